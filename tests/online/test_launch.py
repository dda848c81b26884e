"""The solver processes' environment: the local launcher's, as it starts them."""

import os

from sciml.online import LocalLauncher, SolverJob, _launch
from sciml.transport import PARENT_ENV, SECRET_ENV


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
