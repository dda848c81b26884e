"""The solver process: `python -m sciml.transport.worker JOB.json`.

Runs each run of the job (see [`SolverJob`][sciml.transport.SolverJob]) in turn:
imports the solver function by its dotted path, calls it with the run's
parameters, seed and the study's settings, and sends every yielded time step
to the trainer through a [`SolverClient`][sciml.transport.SolverClient]
(`open(params) → send(step, fields) → close(status)`). The study's secret comes
from the environment variable `SECRET_ENV` (see `secret_from_env`).

The package does not import this module, so that running it with `-m`
executes it once, fresh.

A job started by the trainer on this machine dies with it (see
`die_with_parent`). A solver that raises closes its run with an error status and the process exits
with status 1, as does a job whose trainer takes no message for the study's
`timeout` (it was killed, or restarted elsewhere; one line says so); the trainer then resubmits the runs that did not finish. A run
that yields more steps than the study declared is an error too (the trainer
would reject those steps). A job file that is missing or not a job, a
simulation that cannot be imported and a missing secret end the process with
one line and exit status 2 before any run starts.
"""

from __future__ import annotations

import ctypes
import os
import signal
import sys
import threading
import time
from collections.abc import Callable

from ._client import SolverClient
from ._job import PARENT_ENV, WORKER_MODULE, RunSpec, SolverJob
from ._secret import secret_from_env
from ._simulation import import_simulation, simulate
from ._status import CloseStatus


_PR_SET_PDEATHSIG = 1  # from <linux/prctl.h>
_WATCH_S = 0.5  # how often the watchdog checks that the parent lives


def die_with_parent(parent: int) -> None:
    """Ends this process when its parent process `parent` (the trainer) dies.

    On Linux the kernel sends it SIGKILL the moment the parent dies
    (`prctl(PR_SET_PDEATHSIG)`; strictly, when the parent's thread that started
    this process ends: the trainer's scheduler, which lives as long as the
    study); a SIGKILL also ends a stopped (SIGSTOP) process. Everywhere, a
    daemon thread also checks every 0.5 s that the parent is still this
    process's parent, and exits otherwise. If the parent died before either was
    in place, the process exits at once.
    """
    if sys.platform.startswith("linux"):
        libc = ctypes.CDLL(None, use_errno=True)
        if libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0) != 0:
            error = ctypes.get_errno()
            raise OSError(error, f"prctl(PR_SET_PDEATHSIG) failed: {os.strerror(error)}")

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(_WATCH_S)
        print("the trainer has ended: exiting.", file=sys.stderr, flush=True)
        os._exit(1)

    if os.getppid() != parent:
        watch()
    threading.Thread(target=watch, name="parent-watchdog", daemon=True).start()


def run_one(simulation: Callable, job: SolverJob, run: RunSpec, secret: bytes) -> None:
    """Streams the time steps of one run of `simulation` to the trainer."""
    timeout_ms = None if job.timeout is None else max(1, round(job.timeout * 1000))
    with SolverClient(
        job.address, secret, run=run.run, attempt=run.attempt, send_timeout_ms=timeout_ms
    ) as client:
        client.open(run.params)
        steps = simulate(
            simulation, run.params, seed=run.seed, settings=job.settings, n_steps=job.n_steps
        )
        for step, fields in enumerate(steps):
            client.send(step, fields)
        client.close(CloseStatus.OK)


def run_job(job: SolverJob, secret: bytes, simulation: Callable | None = None) -> None:
    simulation = import_simulation(job.simulation) if simulation is None else simulation
    for run in job.runs:
        print(f"job {job.job}: run {run.run} (attempt {run.attempt})", flush=True)
        run_one(simulation, job, run, secret)


def _error(message: str) -> None:
    print(f"python -m {WORKER_MODULE}: error: {message}", file=sys.stderr, flush=True)


def main(argv: list[str] | None = None) -> int:
    """Runs the job; exit status 0 when every run was sent, 2 (one line on
    standard error, nothing run) for a bad job file, simulation or secret, 1
    when the trainer took no message for the study's `timeout` or a
    simulation raised (its traceback is the job's log)."""
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) != 1:
        print(f"usage: python -m {WORKER_MODULE} JOB.json", file=sys.stderr)
        return 2
    try:
        secret = secret_from_env()
        job = SolverJob.read(argv[0])
        simulation = import_simulation(job.simulation)
    except (KeyError, ValueError) as error:
        _error(error.args[0])
        return 2
    if os.environ.get(PARENT_ENV):
        die_with_parent(int(os.environ[PARENT_ENV]))
    try:
        run_job(job, secret, simulation)
    except TimeoutError as error:  # the trainer is gone: it resubmits what did not finish
        _error(str(error))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
