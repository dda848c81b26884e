"""Launchers: how a study's solver jobs are started, watched and stopped.

A job is one solver process that runs a list of the study's runs one after the
other (so a JAX solver compiles once per process, not once per run) and sends
each time step to the trainer. Every launcher starts the same command,
`python -m sciml.transport.worker JOB.json`, with the study's secret in the
process environment (never on the command line); they differ only in where
the process runs.

[`LocalLauncher`][sciml.online.LocalLauncher] (the default) starts it as a
fresh Python interpreter on this machine: nothing is forked from the trainer's
JAX process (JAX is not fork-safe), exactly as `multiprocessing`'s `spawn`
method would, but with the environment set per job and the exit status and
process id at hand for fault handling.
"""

from __future__ import annotations

import abc
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from ..distributed import PROCESS_ENV, reap_processes, record_process
from ..transport import PARENT_ENV, WORKER_MODULE, SolverJob, secret_to_env


def worker_command(spec_path: Path) -> list[str]:
    """The command that runs a job: this interpreter, the worker module, the spec."""
    return [sys.executable, "-m", WORKER_MODULE, str(spec_path)]


def solver_environment(
    secret: bytes, *, threads: int, cpu_only: bool, env: dict[str, str]
) -> dict[str, str]:
    """The environment of a solver process: this one's, with `threads` CPU
    threads for XLA and BLAS, `JAX_PLATFORMS=cpu` when `cpu_only`, this
    interpreter's `sys.path` as `PYTHONPATH` (the job imports the same `sciml`
    and solver modules), then `env`, and the secret (`secret_to_env`)."""
    out = dict(os.environ)
    # A job is not the test suite's 4-device host, nor a second GPU user.
    out["XLA_FLAGS"] = f"--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads={threads}"
    for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        out[var] = str(threads)
    if cpu_only:
        out["JAX_PLATFORMS"] = "cpu"
    out["PYTHONPATH"] = os.pathsep.join(p for p in sys.path if p)
    for var in PROCESS_ENV:  # a trainer process's place in its run, not the job's
        out.pop(var, None)
    out.update(env)
    return secret_to_env(secret, out)


class AbstractLauncher(abc.ABC):
    """Starts, polls and cancels solver jobs.

    `submit` returns a handle; `poll(handle)` is None while the job runs and its
    exit status once it ended (0 = success; negative = killed by that signal,
    as in `subprocess`); `cancel` stops it (idempotent); `shutdown` cancels
    every job still running.
    """

    @abc.abstractmethod
    def submit(self, job: SolverJob, spec_path: Path, secret: bytes, log_path: Path) -> Any: ...

    @abc.abstractmethod
    def poll(self, handle: Any) -> int | None: ...

    @abc.abstractmethod
    def cancel(self, handle: Any) -> None: ...

    def started(self, handle: Any) -> bool:
        """Whether the job has left the queue (default True): while it waits in
        a batch queue, the study's start-up clock does not run."""
        return True

    def reap_orphans(self, jobs_dir: Path) -> list[int]:
        """Kills the jobs a previous trainer of this run directory started
        that still run (called before a trainer starts its own); returns
        their process ids. The default has nothing to reap."""
        return []

    def shutdown(self) -> None:  # noqa: B027 (optional hook)
        """Cancels every job still running (default: nothing to do)."""


class LocalLauncher(AbstractLauncher):
    """Solver processes on this machine (fresh interpreters, no service needed).

    **Arguments:**

    - `env`: extra environment variables for the solver processes.
    - `cpu_only`: run JAX solvers on the CPU (`JAX_PLATFORMS=cpu`), leaving the
      accelerator to the trainer (default True).
    - `threads`: CPU threads per solver process for XLA and BLAS (default 1:
      the trainer keeps the other cores).

    A solver process dies with the trainer (whose id it finds in `PARENT_ENV`;
    see the worker's `die_with_parent`): a killed trainer leaves no solver
    behind, not even a stopped one. Each process is also recorded (id and
    start time) in the jobs directory, and `reap_orphans` kills those still
    running when the run directory is resumed.
    """

    def __init__(
        self, *, env: dict[str, str] | None = None, cpu_only: bool = True, threads: int = 1
    ):
        self.env = dict(env or {})
        self.cpu_only = bool(cpu_only)
        self.threads = int(threads)
        self._procs: dict[int, subprocess.Popen] = {}

    def submit(self, job, spec_path, secret, log_path):
        log_path.parent.mkdir(parents=True, exist_ok=True)
        with open(log_path, "ab") as log:
            proc = subprocess.Popen(
                worker_command(spec_path),
                env=solver_environment(
                    secret,
                    threads=self.threads,
                    cpu_only=self.cpu_only,
                    env={**self.env, PARENT_ENV: str(os.getpid())},
                ),
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,  # Ctrl-C in the terminal reaches the trainer only
            )
        self._procs[proc.pid] = proc
        record_process(log_path.parent, proc.pid, job=job.job)
        return proc

    def poll(self, handle: subprocess.Popen) -> int | None:
        code = handle.poll()
        if code is not None:
            self._procs.pop(handle.pid, None)
        return code

    def cancel(self, handle: subprocess.Popen) -> None:
        if handle.poll() is None:
            try:
                # SIGKILL ends a stopped (hung) process too; a SIGCONT first would
                # let it run, and send, until the kill lands.
                handle.kill()
            except ProcessLookupError:
                pass
        try:
            handle.wait(timeout=10)
        except subprocess.TimeoutExpired:  # pragma: no cover (a kill cannot be ignored)
            pass
        self._procs.pop(handle.pid, None)

    def reap_orphans(self, jobs_dir: Path) -> list[int]:
        return reap_processes(jobs_dir)

    def shutdown(self) -> None:
        for proc in list(self._procs.values()):
            self.cancel(proc)
