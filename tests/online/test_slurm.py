"""The Slurm launcher.

Its parsing, state mapping, command line and errors are tested against
stand-in `sbatch` / `squeue` / `scontrol` / `scancel` scripts (everywhere);
studies run end to end on a real single-node Slurm cluster started for this
module (`slurm_cluster.py`: installed with apt when missing; skipped, with the
reason, where that is impossible).
"""

import dataclasses
import json
import os
import socket
import threading
import time

import pytest

from experiments.configs.online_ns_tfno import get_config
from experiments.tasks.online.online_common import launcher_from_config
from sciml.online import SlurmLauncher, SolverJob
from sciml.online._slurm import (
    LOST,
    check_time,
    exit_status,
    parse_sacct,
    parse_scontrol,
    parse_squeue,
)
from sciml.transport import SECRET_ENV, connect_address

from .slurm_cluster import CPUS
from .test_trainer import N_STEPS, PLANNED, accepted_ids, events, make_study, train


# One worker runs this whole module under pytest-xdist (`--dist loadgroup`), so the
# module's Slurm cluster starts once.
pytestmark = pytest.mark.xdist_group("slurm_cluster")


SCONTROL_FAILED = (
    "JobId=7 JobName=wrap UserId=root(0) GroupId=root(0) MCS_label=N/A Priority=1 "
    "JobState=FAILED Reason=NonZeroExitCode Dependency=(null) Requeue=0 Restarts=0 "
    "BatchFlag=1 Reboot=0 ExitCode=3:0 RunTime=00:00:02 TimeLimit=UNLIMITED "
    "WorkDir=/home/user/my runs StdOut=/home/user/my runs/job-7.log Power= \n"
)


# -- state mapping and parsing ---------------------------------------------------


@pytest.mark.parametrize(
    "state, code, expected",
    [
        ("PENDING", None, None),
        ("RUNNING", "0:0", None),
        ("COMPLETING", "0:0", None),  # not final yet
        ("COMPLETED", "0:0", 0),
        ("FAILED", "3:0", 3),
        ("FAILED", "0:9", -9),  # killed by SIGKILL
        ("FAILED", "0:0", 1),  # never 0 for a job that did not complete
        ("CANCELLED", "0:15", -15),
        ("CANCELLED by 1000", "0:0", -15),  # sacct's form, cancelled while pending
        ("CANCELLED+", None, -15),  # sacct's column cut short
        ("TIMEOUT", "0:0", -15),
        ("PREEMPTED", "0:0", -15),
        ("OUT_OF_MEMORY", "0:125", -9),
        ("NODE_FAIL", "0:0", -9),
        ("BOOT_FAIL", "0:0", 1),
        (LOST, None, 1),
    ],
)
def test_slurm_states_map_to_the_poll_convention(state, code, expected):
    assert exit_status(state, code) == expected


def test_parse_squeue_scontrol_and_sacct_outputs():
    assert parse_squeue("12|RUNNING\n13|PENDING\n\n14|COMPLETING\n") == {
        "12": "RUNNING",
        "13": "PENDING",
        "14": "COMPLETING",
    }
    assert parse_squeue("") == {}
    assert parse_scontrol(SCONTROL_FAILED) == ("FAILED", "3:0")
    assert parse_scontrol("slurm_load_jobs error: Invalid job id specified") is None
    sacct = "8|CANCELLED by 0|0:15\n9|COMPLETED|0:0\n"
    assert parse_sacct(sacct, "8") == ("CANCELLED by 0", "0:15")
    assert parse_sacct(sacct, "10") is None


@pytest.mark.parametrize("value", [30, "30", "5:00", "1:00:00", "2-0", "2-12:30", "1-0:0:1"])
def test_slurm_time_limits_are_accepted(value):
    assert check_time(value) == str(value)


@pytest.mark.parametrize("value", ["1h", "", "1:2:3:4", "-5", 0, -3])
def test_a_bad_time_limit_is_refused_by_name(value):
    with pytest.raises(ValueError, match="`time` must be a Slurm time limit"):
        check_time(value)


def test_a_wildcard_address_is_reached_by_host_name():
    host = socket.gethostname()
    assert connect_address("tcp://0.0.0.0:5555") == f"tcp://{host}:5555"
    assert connect_address("tcp://*:5555") == f"tcp://{host}:5555"
    assert connect_address("tcp://10.1.2.3:5555") == "tcp://10.1.2.3:5555"
    assert connect_address("ipc:///tmp/study.sock") == "ipc:///tmp/study.sock"


# -- the launcher against stand-in commands --------------------------------------------

# Each stand-in prints NAME.out and NAME.err from the directory of the fake
# commands, appends its arguments to NAME.args and exits with NAME.rc (0).
FAKE = """#!/bin/bash
d=$(dirname "$0")
echo "$*" >> "$d/{name}.args"
[ "{name}" = sbatch ] && env > "$d/sbatch.env"
cat "$d/{name}.out" 2>/dev/null
cat "$d/{name}.err" >&2 2>/dev/null
exit $(cat "$d/{name}.rc" 2>/dev/null || echo 0)
"""


@pytest.fixture
def fake_slurm(tmp_path, monkeypatch):
    """A directory of stand-in Slurm commands, first on PATH."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for name in ("sbatch", "squeue", "scontrol", "scancel", "sacct"):
        path = bin_dir / name
        path.write_text(FAKE.format(name=name))
        path.chmod(0o755)
    (bin_dir / "sbatch.out").write_text("42\n")
    (bin_dir / "sacct.rc").write_text("1")  # no accounting
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    return bin_dir


def solver_job(tmp_path):
    job = SolverJob(3, "pkg.mod.solver", {}, "tcp://10.0.0.1:5555", 4, ())
    return job, job.write(tmp_path / "jobs" / "job-3.json")


def test_submit_passes_options_and_keeps_the_secret_off_the_command_line(
    fake_slurm, tmp_path, monkeypatch
):
    secret = bytes(range(32))
    for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        monkeypatch.setenv(var, "16")  # the trainer's machine-wide setting
    launcher = SlurmLauncher(
        partition="cpu",
        time="1:00:00",
        cpus_per_task=2,
        mem="2G",
        sbatch_args=["--account=proj", "--qos=short"],
        setup=["module load python"],
        env={"MY_VAR": "1"},
    )
    job, spec = solver_job(tmp_path)
    handle = launcher.submit(job, spec, secret, tmp_path / "jobs" / "job-3.log")
    assert handle.job_id == "42" and handle.name == "sciml-solver-3"
    args = (fake_slurm / "sbatch.args").read_text().split()
    script = spec.with_suffix(".sh")
    assert args[-1] == str(script) and args[-3:-1] == ["--account=proj", "--qos=short"]
    for option in ("--partition=cpu", "--time=1:00:00", "--cpus-per-task=2", "--mem=2G"):
        assert option in args
    assert "--export=ALL" in args and "--no-requeue" in args
    text = script.read_text()
    assert text.splitlines()[2] == "module load python"
    assert text.splitlines()[-1].endswith(f"-m sciml.transport.worker {spec}")
    # the secret travels in sbatch's environment only
    env = dict(line.split("=", 1) for line in (fake_slurm / "sbatch.env").read_text().splitlines())
    assert env[SECRET_ENV] == secret.hex() and env["MY_VAR"] == "1"
    assert env["JAX_PLATFORMS"] == "cpu"
    # each job's threads: cpus_per_task, over the trainer's own setting
    for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        assert env[var] == "2", var
    assert "intra_op_parallelism_threads=2" in env["XLA_FLAGS"]
    assert secret.hex() not in " ".join(args) and secret.hex() not in text


def test_poll_follows_the_job_from_queue_to_its_end(fake_slurm, tmp_path):
    launcher = SlurmLauncher(poll_interval=1e-6)
    handle = launcher.submit(*solver_job(tmp_path), b"k" * 32, tmp_path / "job.log")
    (fake_slurm / "squeue.out").write_text("42|PENDING\n")
    assert launcher.poll(handle) is None and not launcher.started(handle)
    (fake_slurm / "squeue.out").write_text("42|RUNNING\n")
    assert launcher.poll(handle) is None and launcher.started(handle)
    # gone from squeue: the exit status comes from scontrol
    (fake_slurm / "squeue.out").write_text("")
    (fake_slurm / "scontrol.out").write_text(SCONTROL_FAILED.replace("JobId=7", "JobId=42"))
    assert launcher.poll(handle) == 3 and handle.state == "FAILED"
    launcher.cancel(handle)  # ended: nothing to cancel
    launcher.shutdown()
    assert not (fake_slurm / "scancel.args").exists()


def test_a_job_no_command_knows_any_more_ends_as_lost(fake_slurm, tmp_path):
    launcher = SlurmLauncher(poll_interval=1e-6)
    handle = launcher.submit(*solver_job(tmp_path), b"k" * 32, tmp_path / "job.log")
    (fake_slurm / "squeue.err").write_text("slurm_load_jobs error: Invalid job id specified\n")
    (fake_slurm / "squeue.rc").write_text("1")
    (fake_slurm / "scontrol.rc").write_text("1")
    assert launcher.poll(handle) is None  # one miss may be a glitch
    assert launcher.poll(handle) == 1 and handle.state == LOST


def test_an_unreachable_controller_is_not_taken_for_an_ended_job(fake_slurm, tmp_path):
    launcher = SlurmLauncher(poll_interval=1e-6)
    handle = launcher.submit(*solver_job(tmp_path), b"k" * 32, tmp_path / "job.log")
    (fake_slurm / "squeue.err").write_text("slurm_load_jobs error: Unable to contact slurm\n")
    (fake_slurm / "squeue.rc").write_text("1")
    assert all(launcher.poll(handle) is None for _ in range(5))
    launcher.cancel(handle)
    launcher.shutdown()
    assert (fake_slurm / "scancel.args").read_text().split() == ["42", "42"]


def test_an_sbatch_failure_raises_with_its_message(fake_slurm, tmp_path):
    (fake_slurm / "sbatch.out").write_text("")
    (fake_slurm / "sbatch.err").write_text("sbatch: error: invalid partition specified: gpu\n")
    (fake_slurm / "sbatch.rc").write_text("1")
    launcher = SlurmLauncher(partition="gpu")
    with pytest.raises(RuntimeError, match="invalid partition specified: gpu"):
        launcher.submit(*solver_job(tmp_path), b"k" * 32, tmp_path / "job.log")


def test_slurm_commands_missing_from_path_are_named(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(RuntimeError, match="sbatch, squeue, scontrol, scancel are not on PATH"):
        SlurmLauncher()


@pytest.mark.parametrize(
    "kwargs, name",
    [
        ({"cpus_per_task": 0}, "cpus_per_task"),
        ({"mem": "2 GB"}, "mem"),
        ({"sbatch_args": "--qos=short"}, "sbatch_args"),
        ({"setup": "module load python"}, "setup"),
        ({"threads": 0}, "threads"),
        ({"partition": ""}, "partition"),
        ({"time": "soon"}, "time"),
        ({"job_name": "my job"}, "job_name"),
        ({"poll_interval": 0.0}, "poll_interval"),
    ],
)
def test_bad_launcher_options_are_refused_by_name(fake_slurm, kwargs, name):
    with pytest.raises(ValueError, match=f"`{name}`"):
        SlurmLauncher(**kwargs)


# -- a real cluster ----------------------------------------------------------------------


@pytest.fixture
def slurm(cluster, monkeypatch):
    """The cluster, reached by the launcher (and the test) through `SLURM_CONF`."""
    monkeypatch.setenv("SLURM_CONF", str(cluster.conf))
    yield cluster
    # cancelled jobs end within KillWait (2 s here)
    assert cluster.wait_empty(timeout=10.0) == [], "the study left Slurm jobs behind"


def test_every_sample_arrives_exactly_once_through_slurm_jobs(slurm, tmp_path):
    launcher = SlurmLauncher(partition="debug", time="10", mem="500M", poll_interval=0.5)
    # listening on every interface, as on a cluster: the jobs connect by host name
    result = train(make_study(address="tcp://0.0.0.0:*"), tmp_path, launcher=launcher)
    ids = accepted_ids(tmp_path)
    assert len(ids) == len(PLANNED) and {tuple(map(int, i)) for i in ids} == PLANNED
    summary = result.summary
    assert summary["duplicates_dropped"] == 0 and summary["messages_rejected"] == 0
    assert summary["runs_done"] == len(PLANNED) // N_STEPS and summary["runs_failed"] == 0
    assert summary["jobs_started"] == 3 and summary["jobs_failed"] == 0
    logs = sorted((tmp_path / "online" / "jobs").glob("job-*.log"))
    assert len(logs) == 3 and all("run " in log.read_text() for log in logs)
    spec = json.loads((tmp_path / "online" / "jobs" / "job-0.json").read_text())
    assert spec["address"].startswith(f"tcp://{socket.gethostname()}:")


def test_a_job_cancelled_with_scancel_has_its_runs_resubmitted(slurm, tmp_path):
    markers = tmp_path / "markers"
    markers.mkdir()
    cancelled: list[str] = []
    done = threading.Event()

    def cancel_waiting_jobs():  # plays the cluster's admin (or a preemption)
        while not done.is_set():
            for marker in markers.glob("job-*"):
                job_id = marker.name.removeprefix("job-")
                if job_id not in cancelled:
                    slurm.run("scancel", job_id)
                    cancelled.append(job_id)
            time.sleep(0.1)

    watcher = threading.Thread(target=cancel_waiting_jobs, daemon=True)
    watcher.start()
    settings = {"marker_dir": str(markers), "after": 1}
    study = make_study("counter", settings, runs_per_job=1, n_runs=4, timeout=60.0)
    study = dataclasses.replace(study, simulation="tests.online.slurm_solvers.wait_for_cancel")
    launcher = SlurmLauncher(poll_interval=0.5)
    try:
        result = train(study, tmp_path / "run", launcher=launcher)
    finally:
        done.set()
        watcher.join()
    planned = {(r, k) for r in range(4) for k in range(N_STEPS)}
    ids = accepted_ids(tmp_path / "run")
    assert len(ids) == len(planned) and {tuple(map(int, i)) for i in ids} == planned
    failed = [e for e in events(tmp_path / "run") if e["event"] == "job_failed"]
    assert cancelled and len(failed) == len(cancelled)
    assert all(e["exit"] == -15 for e in failed)  # CANCELLED, signal 15
    # each cancelled run re-sent steps 0 and 1 from its next attempt: dropped
    assert result.summary["duplicates_dropped"] == 2 * len(cancelled)
    assert result.summary["runs_done"] == 4 and result.summary["runs_failed"] == 0


def test_the_launcher_block_of_an_online_config(fake_slurm):
    config = get_config()
    assert type(launcher_from_config(config.launcher)).__name__ == "LocalLauncher"
    config.launcher.kind = "slurm"
    config.launcher.partition, config.launcher.time = "cpu", "0:30:00"
    config.launcher.cpus_per_task, config.launcher.threads = 4, 0
    config.launcher.sbatch_args = ("--qos=short",)
    launcher = launcher_from_config(config.launcher)
    assert isinstance(launcher, SlurmLauncher)
    assert (launcher.partition, launcher.time, launcher.mem) == ("cpu", "0:30:00", None)
    assert launcher.threads == 4 and launcher.sbatch_args == ["--qos=short"]
    config.launcher.kind = "ray"
    with pytest.raises(ValueError, match="config.launcher.kind must be 'local' or 'slurm'"):
        launcher_from_config(config.launcher)


def test_a_job_waiting_in_the_queue_is_not_taken_for_a_hung_one(slurm, tmp_path):
    # a job holding every CPU of the node keeps the study's jobs pending for 10 s, longer
    # than the study allows a started job to stay silent (timeout + start_timeout)
    blocker = slurm.run(
        "sbatch",
        "--parsable",
        "-c",
        str(CPUS),
        "-o",
        str(tmp_path / "blocker.out"),
        "--wrap",
        "sleep 10",
    ).stdout.strip()
    deadline = time.monotonic() + 10
    while slurm.run("squeue", "-h", "-o", "%T", "-j", blocker).stdout.strip() != "RUNNING":
        assert time.monotonic() < deadline, "the blocking job did not start"
        time.sleep(0.1)
    study = make_study(n_runs=2, runs_per_job=1, timeout=4.0, start_timeout=4.0)
    result = train(study, tmp_path, launcher=SlurmLauncher(poll_interval=0.5))
    assert result.summary["jobs_hung"] == 0 and result.summary["jobs_started"] == 2
    ids = accepted_ids(tmp_path)
    assert {tuple(map(int, i)) for i in ids} == {(r, k) for r in range(2) for k in range(N_STEPS)}
