"""Online training with several trainer processes.

The run table's partition: each process holds its share of the study's runs,
with the parameters and seeds the one-process study gives those runs. End to
end (slow): two trainer processes on this machine (JAX's CPU collectives),
each with its own receiver, buffer and solver jobs, account for every sample
exactly once; a process killed mid-run stops the other one promptly with no
solver left behind, and a resume of both finishes the study exactly once.
"""

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import equinox as eqx
import jax
import numpy as np
import optax
import pytest

from sciml.distributed import PROCESSES_FILE, ProcessGroup, start_time
from sciml.online import FIFO, RunTable, Study, run_seed, train_online
from sciml.online._runs import FAILED
from sciml.online._sampler import LatinHypercube, MonteCarlo, ParameterSpace
from sciml.online._shared import merged_monitor, merged_summary, process_folder
from sciml.training import TrainSettings

from .processes_trainer import N_RUNS, N_STEPS, PROCESSES


SPACE = ParameterSpace({"nu": (1e-3, 1e-2, "log"), "a": (0.0, 1.0)})
REPO = Path(__file__).resolve().parents[2]
PLANNED = {(r, k) for r in range(N_RUNS) for k in range(N_STEPS)}


def tables(n_runs, processes, sampler=None, max_attempts=1):
    sampler = MonteCarlo(seed=7) if sampler is None else sampler
    return [
        RunTable(
            SPACE,
            sampler,
            n_runs=n_runs,
            n_steps=3,
            seed=7,
            max_attempts=max_attempts,
            process=r,
            processes=processes,
        )
        for r in range(processes)
    ]


@pytest.mark.parametrize("sampler", [MonteCarlo(seed=7), LatinHypercube(seed=7, block=4)])
@pytest.mark.parametrize("n_runs", [6, 7])
def test_processes_share_the_runs_of_one_table_with_their_parameters_and_seeds(n_runs, sampler):
    (whole,) = tables(n_runs, 1, sampler)
    parts = tables(n_runs, 3, sampler)
    ids = [[t.global_run(i) for i in range(len(t))] for t in parts]
    # disjoint, and together exactly the study's runs
    assert sorted(sum(ids, [])) == list(range(n_runs))
    for t, own in zip(parts, ids):
        for i, g in enumerate(own):
            spec, reference = t.spec(i), whole.spec(g)
            assert spec.run == i and spec.seed == run_seed(7, g) == reference.seed
            assert spec.params == reference.params
    # one process: the table of before (local ids are global ids)
    assert [whole.global_run(i) for i in range(n_runs)] == list(range(n_runs))
    np.testing.assert_array_equal(whole.params, sampler.draw(SPACE, n_runs))


def test_redrawn_runs_of_different_processes_never_share_a_global_id():
    parts = tables(4, 2)
    redrawn = []
    for t in parts:
        for _ in range(3):  # fail the first run, then each replacement: three redraws
            run = len(t) - 1
            t.start([run])
            assert t.ended(run) == FAILED
            redrawn.append(t.global_run(t.replaced_by[run]))
        # the process's failed runs are reported with global ids and parameters
        failed = t.failed_runs()
        assert [f["run"] for f in failed] == [t.global_run(i) for i in range(1, 4)]
        assert failed[-1]["replaced_by"] == t.global_run(4)
    assert len(set(redrawn)) == len(redrawn) and min(redrawn) >= 4
    assert sorted(redrawn) == [4, 5, 6, 7, 8, 9]
    # a redrawn run has the row of its global id, as a restart draws it again
    full = MonteCarlo(seed=7).draw(SPACE, 10)
    for t in parts:
        np.testing.assert_array_equal(t.params, full[t.process :: 2])
        again = tables(4, 2)[t.process]
        again.restore(t.to_json())
        np.testing.assert_array_equal(again.params, t.params)


def test_a_table_refuses_processes_without_runs_of_their_own():
    with pytest.raises(ValueError, match=r"`n_runs` \(2\) must be at least .* processes \(3\)"):
        tables(2, 3)


def test_each_process_binds_its_own_receiver_address():
    def study(address):
        space = ParameterSpace({"a": (0.0, 1.0)})
        return Study("m.f", space, n_runs=4, n_steps=2, address=address)

    assert study("tcp://0.0.0.0:5555").receiver_address(2, 3) == "tcp://0.0.0.0:5557"
    assert study("ipc:///tmp/s/recv").receiver_address(1, 2) == "ipc:///tmp/s/recv.process1"
    assert study(None).receiver_address(1, 2) is None  # a free port each
    assert study("tcp://127.0.0.1:*").receiver_address(1, 2) == "tcp://127.0.0.1:*"
    # one process: the study's address as given
    assert study("ipc:///tmp/s/recv").receiver_address() == "ipc:///tmp/s/recv"


def two_processes(monkeypatch, other) -> ProcessGroup:
    """Process 0 of two, whose `gather` returns its value and `other`'s."""
    monkeypatch.setattr(ProcessGroup, "gather", lambda self, value: [value, other])
    return ProcessGroup(2, 0)


def test_the_summary_sums_counters_joins_run_lists_and_averages_the_rest(monkeypatch):
    def summary(received, fill, wait, failed, auth):
        return {
            "samples_received": received,
            "rejections": {"auth": auth, "duplicate": 0},
            "failed_runs": [{"run": r, "attempts": 3} for r in failed],
            "fill": fill,
            "wait_fraction": wait,
        }

    merged = merged_summary(
        summary(16, 0.5, 0.2, [1], 2), two_processes(monkeypatch, summary(12, 0.25, 0.6, [0, 4], 1))
    )
    assert merged == {
        "samples_received": 28,
        "rejections": {"auth": 3, "duplicate": 0},
        "failed_runs": [{"run": r, "attempts": 3} for r in (0, 1, 4)],
        "fill": 0.375,
        "wait_fraction": 0.4,
        "wait_fraction_by_process": [0.2, 0.6],
        "processes": 2,
    }
    # progress values: a rejection reason only one process has seen is kept
    mine, theirs = {"received": 3, "reuse": 1.0}, {"received": 4, "reuse": 2.0, "rejected_auth": 1}
    assert merged_monitor(mine, two_processes(monkeypatch, theirs)) == {
        "received": 7,
        "reuse": 1.5,
        "rejected_auth": 1,
    }


def test_batch_size_and_devices_must_suit_several_processes(tmp_path, monkeypatch):
    monkeypatch.setattr(ProcessGroup, "current", classmethod(lambda cls: cls(4, 1)))
    study = Study("m.f", ParameterSpace({"a": (0.0, 1.0)}), n_runs=8, n_steps=2)

    def train(batch_size, devices=None):
        train_online(
            study,
            eqx.nn.Linear(2, 1, key=jax.random.key(0)),
            lambda m, b, k: (0.0, {}),
            buffer=FIFO(capacity=8),
            optimizer=optax.sgd(0.1),
            batch_size=batch_size,
            key=jax.random.key(1),
            settings=TrainSettings(steps=1, workdir=tmp_path),
            devices=devices,
        )

    with pytest.raises(
        ValueError, match=r"`batch_size` \(6\) must be a multiple of the number of processes \(4\)"
    ):
        train(6)
    with pytest.raises(ValueError, match=r"`devices` must be None on 4 processes"):
        train(8, devices=jax.devices())


# -- two trainer processes ------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_processes(workdir: Path, kill_at: int | None = None) -> list[subprocess.Popen]:
    """Starts the two processes of `processes_trainer` on `workdir` (`kill_at`:
    process 1 SIGKILLs itself when asked for that batch)."""
    workdir.mkdir(exist_ok=True)
    env = {k: v for k, v in os.environ.items() if k != "XLA_FLAGS"}  # one device each
    env.update(SCIML_PROCESSES=str(PROCESSES), JAX_COORDINATOR_ADDRESS=f"127.0.0.1:{free_port()}")
    command = [sys.executable, "-m", "tests.online.processes_trainer", str(workdir)]
    command += [] if kill_at is None else [str(kill_at)]
    procs = []
    for index in range(PROCESSES):
        with open(log_path(workdir, index), "ab") as log:
            procs.append(
                subprocess.Popen(
                    command,
                    cwd=REPO,
                    env={**env, "SCIML_PROCESS_ID": str(index)},
                    stdout=log,
                    stderr=subprocess.STDOUT,
                )
            )
    return procs


def log_path(workdir: Path, index: int) -> Path:
    return workdir.parent / f"{workdir.name}-process{index}.log"


def finish(procs: list[subprocess.Popen], workdir: Path) -> dict:
    try:
        for index, proc in enumerate(procs):
            assert proc.wait(timeout=120) == 0, log_path(workdir, index).read_text()
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    return json.loads((workdir / "summary.json").read_text())


def finals(workdir: Path) -> list[dict]:
    """What each process recorded when its stream closed (see `processes_trainer`)."""
    return [
        json.loads((workdir / "online" / f"process-{r}" / "final.json").read_text())
        for r in range(PROCESSES)
    ]


def check_exactly_once(workdir: Path) -> list[dict]:
    """Each process accepted each id of its own runs once; together, every planned id."""
    processes = finals(workdir)
    ids = [[tuple(i) for i in f["accepted"]] for f in processes]
    for index, own in enumerate(ids):
        assert len(own) == len(set(own)), f"process {index} accepted an id twice"
        assert {run % PROCESSES for run, _ in own} == {index}
    assert not set(ids[0]) & set(ids[1]) and set(ids[0]) | set(ids[1]) == PLANNED
    return processes


def running_solvers(workdir: Path) -> list[int]:
    """The solver processes the trainer processes recorded that still run
    (same id and start time)."""
    pids = []
    for path in (workdir / "online").glob(f"process-*/jobs/{PROCESSES_FILE}"):
        for line in path.read_text().splitlines():
            entry = json.loads(line)
            if start_time(entry["pid"]) == entry["start"]:
                pids.append(entry["pid"])
    return pids


@pytest.mark.slow
def test_two_processes_account_for_every_sample_exactly_once(tmp_path):
    workdir = tmp_path / "study"
    summary = finish(start_processes(workdir), workdir)
    processes = check_exactly_once(workdir)
    # each process ran its global runs with the parameters and seeds of one study
    params = MonteCarlo(seed=0).draw(ParameterSpace({"a": (0.0, 1.0)}), N_RUNS)
    for index in range(PROCESSES):
        jobs = (workdir / "online" / f"process-{index}" / "jobs").glob("job-*.json")
        runs = [run for job in jobs for run in json.loads(job.read_text())["runs"]]
        assert len(runs) == N_RUNS // PROCESSES
        for spec in runs:
            g = spec["run"] * PROCESSES + index
            assert spec["seed"] == run_seed(0, g) and spec["params"]["a"] == params[g, 0]
    # the summary sums the processes: 32 samples in 8 steps of 2 × 2
    for key in ("samples_received", "samples_trained", "runs_done", "jobs_started"):
        assert summary[key] == sum(r["summary"][key] for r in processes), key
    assert summary["samples_received"] == summary["samples_trained"] == len(PLANNED)
    assert summary["steps"] == 8 and summary["ended_early"] and summary["processes"] == PROCESSES
    assert summary["duplicates_dropped"] == summary["messages_rejected"] == 0
    by_process = summary["wait_fraction_by_process"]
    assert len(by_process) == PROCESSES
    assert summary["wait_fraction"] == pytest.approx(np.mean(by_process))
    # metrics.jsonl (process 0 only) logs the counters of both processes
    last = json.loads((workdir / "metrics.jsonl").read_text().splitlines()[-1])
    assert last["step"] == 8 and last["received"] == last["trained"] == len(PLANNED)
    assert not running_solvers(workdir)


@pytest.mark.slow
def test_a_killed_process_stops_the_job_and_a_resume_finishes_it_exactly_once(tmp_path):
    workdir = tmp_path / "study"
    survivor, victim = start_processes(workdir, kill_at=3)
    closed = workdir / "online" / "process-0" / "final.json"
    try:
        assert victim.wait(timeout=120) == -signal.SIGKILL, log_path(workdir, 1).read_text()
        killed = time.monotonic()
        # the survivor's next step fails, and its `finally` stops its solvers
        while not closed.exists() and survivor.poll() is None:
            assert time.monotonic() < killed + 30, "the survivor did not stop its stream"
            time.sleep(0.01)
        stopped = time.monotonic() - killed
        # JAX's runtime then waits at exit for the dead process's heartbeat to
        # time out (about 90 s here); the `--processes` parent stops a child
        # left running a few seconds after another failed: so does this test
        try:
            survivor.wait(timeout=1)
        except subprocess.TimeoutExpired:
            survivor.kill()
    finally:
        for proc in (survivor, victim):
            if proc.poll() is None:
                proc.kill()
            proc.wait()
    log = log_path(workdir, 0).read_text()
    assert closed.exists() and stopped < 10, (stopped, log)  # measured: 0.1-0.2 s
    assert "Traceback" in log and not (workdir / "summary.json").exists(), log
    # no solver is left: the survivor's were cancelled, the victim's died with it
    # (a solver process ends when its trainer does)
    deadline = time.monotonic() + 5
    while running_solvers(workdir) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not running_solvers(workdir)
    assert sorted(p.name for p in (workdir / "checkpoints").iterdir()) == ["2"]
    # the resume of both processes restores each one's runs, buffer and accepted ids
    summary = finish(start_processes(workdir), workdir)
    assert "resuming from step 2" in log_path(workdir, 0).read_text()
    check_exactly_once(workdir)
    # FIFO trains each sample once, across the restart too: a process that forgot
    # its accepted ids would accept (and train on) its first samples again
    assert summary["samples_received"] == summary["samples_trained"] == len(PLANNED)
    assert summary["steps"] == 8 and summary["runs_done"] == N_RUNS


def test_a_run_written_before_the_rename_keeps_its_rank_folders(tmp_path):
    online = tmp_path / "online"
    (online / "rank-1").mkdir(parents=True)  # a run of before: its folder is read on resume
    assert process_folder(online, 1) == online / "rank-1"
    assert process_folder(online, 0) == online / "process-0"  # a new run: the new name
