"""The solver process: the environment a launcher starts it with, and its
entry point, `python -m sciml.transport.worker JOB.json`, called as its
`main(argv)`: a bad job file, simulation or secret is one line and exit
status 2 before anything runs; a trainer that takes nothing is one line and
exit status 1."""

import json
import os
import re

from sciml.online import LocalLauncher, _launch
from sciml.transport import PARENT_ENV, SECRET_ENV, RunSpec, SolverJob, new_secret, worker


PROG = re.escape("python -m sciml.transport.worker: error: ")


BLAS_THREADS = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")


def test_local_jobs_get_their_thread_count_and_the_secret(tmp_path, monkeypatch):
    """Each BLAS thread variable and XLA's flags name the launcher's
    `threads` (default 1), over what the trainer's own environment says;
    `env` has the last word; the secret travels in the environment only."""
    started = []

    class Popen:  # records what a process would have been started with
        def __init__(self, command, *, env, **kwargs):
            started.append((command, env))
            self.pid = os.getpid()

    monkeypatch.setattr(_launch.subprocess, "Popen", Popen)
    for var in BLAS_THREADS:
        monkeypatch.setenv(var, "16")  # the trainer's machine-wide setting
    job = SolverJob(3, "pkg.mod.solver", {}, "tcp://10.0.0.1:5555", 4, ())
    spec = job.write(tmp_path / "jobs" / "job-3.json")
    secret = bytes(range(32))
    for launcher in (LocalLauncher(), LocalLauncher(threads=3, env={"MKL_NUM_THREADS": "2"})):
        launcher.submit(job, spec, secret, tmp_path / "jobs" / "job-3.log")
    (command, default), (_, three) = started
    assert command[-3:] == ["-m", "sciml.transport.worker", str(spec)]
    assert [default[var] for var in BLAS_THREADS] == ["1", "1", "1"]
    assert [three[var] for var in BLAS_THREADS] == ["3", "3", "2"]
    assert "intra_op_parallelism_threads=1" in default["XLA_FLAGS"]
    assert "intra_op_parallelism_threads=3" in three["XLA_FLAGS"]
    assert "--xla_cpu_multi_thread_eigen=false" in three["XLA_FLAGS"]
    assert default["JAX_PLATFORMS"] == "cpu" and default[PARENT_ENV] == str(os.getpid())
    assert default[SECRET_ENV] == secret.hex() and secret.hex() not in " ".join(command)


def _job(simulation="tests.online.stream_solvers.counter", address="tcp://127.0.0.1:9"):
    runs = (RunSpec(run=0, attempt=0, params={"a": 0.25}, seed=7),)
    return SolverJob(0, simulation, {"n_steps": 2}, address, 2, runs, timeout=0.2)


def test_a_bad_job_file_or_simulation_is_one_line_and_exit_2(tmp_path, monkeypatch, capsys):
    # Before: a traceback each (the unknown module's never named the simulation).
    monkeypatch.setenv(SECRET_ENV, new_secret().hex())
    (tmp_path / "not.json").write_text("{runs: [")
    (tmp_path / "list.json").write_text("[1, 2]")
    without_runs = {k: v for k, v in _job().to_json().items() if k != "runs"}
    (tmp_path / "no_runs.json").write_text(json.dumps(without_runs))
    bad_run = {**_job().to_json(), "runs": [{"run": 0}]}
    (tmp_path / "bad_run.json").write_text(json.dumps(bad_run))
    unknown = _job("nowhere.module.solver").write(tmp_path / "unknown.json")
    no_function = _job("tests.online.stream_solvers.nothing").write(tmp_path / "f.json")
    cases = [
        ("missing.json", "the job file '{path}' does not exist."),
        (".", "the job file '{path}' is a directory, not a JSON file."),
        ("not.json", "the job file '{path}' is not JSON (Expecting property name"),
        ("list.json", "the job file '{path}' is not a job description (the keys "),
        ("no_runs.json", "is not a job description (the keys ['address', 'job', 'n_steps', "),
        ("bad_run.json", "the job file '{path}' has a run that is not {'run', 'attempt', "),
        (
            unknown.name,
            "`simulation` 'nowhere.module.solver' cannot be imported: "
            "ModuleNotFoundError: No module named 'nowhere'.",
        ),
        (no_function.name, "module 'tests.online.stream_solvers' has no function 'nothing'."),
    ]
    for name, message in cases:
        path = str(tmp_path / name)
        assert worker.main([path]) == 2, name
        out, err = capsys.readouterr()
        assert out == "" and err.count("\n") == 1, (name, err)  # one line, nothing run
        assert re.match(PROG + ".*" + re.escape(message.replace("{path}", path)), err), (name, err)
    monkeypatch.delenv(SECRET_ENV)
    assert worker.main([str(unknown)]) == 2
    assert re.match(
        PROG + "the environment variable 'SCIML_ONLINE_SECRET'", capsys.readouterr().err
    )


def test_a_job_whose_trainer_takes_nothing_is_one_line_and_exit_1(tmp_path, monkeypatch, capsys):
    # Before: a traceback. Nobody listens on this ipc path; the job waits 0.2 s.
    monkeypatch.setenv(SECRET_ENV, new_secret().hex())
    spec = _job(address=f"ipc://{tmp_path / 'gone.ipc'}").write(tmp_path / "job.json")
    assert worker.main([str(spec)]) == 1
    out, err = capsys.readouterr()
    assert out == "job 0: run 0 (attempt 0)\n"
    assert err.count("\n") == 1
    assert re.match(PROG + r"run 0: the trainer at ipc://.* took no message for 0.2 s", err), err
