"""The solver process: `python -m sciml.online.worker JOB.json`.

Runs each run of the job (see [`SolverJob`][sciml.online.SolverJob]) in turn:
imports the solver function by its dotted path, calls it with the run's
parameters, seed and the study's settings, and sends every yielded time step
to the trainer through a [`SolverClient`][sciml.online.SolverClient]
(`open(params) → send(step, fields) → close(status)`). The study's secret comes
from the environment variable `SCIML_ONLINE_SECRET` (hex).

A job started by the trainer on this machine dies with it (see
`die_with_parent`). A solver that raises closes its run with an error status and the process exits
with status 1, as does a job whose trainer takes no message for the study's
`timeout` (it was killed, or restarted elsewhere); the trainer then resubmits the runs that did not finish. A run
that yields more steps than the study declared is an error too (the trainer
would reject those steps).
"""

from __future__ import annotations

import ctypes
import importlib
import json
import os
import signal
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

from ._launch import PARENT_ENV, SECRET_ENV, RunSpec, SolverJob
from ._status import CloseStatus
from ._transport import SolverClient


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


def import_simulation(path: str) -> Callable:
    """The function named by a dotted path `package.module.function`."""
    module_name, _, name = path.rpartition(".")
    if not module_name:
        raise ValueError(
            f"`simulation` must be a dotted path 'package.module.function', got {path!r}."
        )
    module = importlib.import_module(module_name)
    try:
        return getattr(module, name)
    except AttributeError:
        raise ValueError(f"module {module_name!r} has no function {name!r}.") from None


def run_one(simulation: Callable, job: SolverJob, run: RunSpec, secret: bytes) -> None:
    """Streams the time steps of one run of `simulation` to the trainer."""
    timeout_ms = None if job.timeout is None else max(1, round(job.timeout * 1000))
    with SolverClient(
        job.address, secret, run=run.run, attempt=run.attempt, send_timeout_ms=timeout_ms
    ) as client:
        client.open(run.params)
        steps = 0
        for step, fields in enumerate(simulation(dict(run.params), seed=run.seed, **job.settings)):
            if step >= job.n_steps:
                raise RuntimeError(
                    f"the simulation yielded more than the study's n_steps = {job.n_steps} steps."
                )
            client.send(step, fields)
            steps += 1
        if steps != job.n_steps:
            raise RuntimeError(
                f"the simulation yielded {steps} steps, the study expects {job.n_steps}."
            )
        client.close(CloseStatus.OK)


def run_job(job: SolverJob, secret: bytes) -> None:
    simulation = import_simulation(job.simulation)
    for run in job.runs:
        print(f"job {job.job}: run {run.run} (attempt {run.attempt})", flush=True)
        run_one(simulation, job, run, secret)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) != 1:
        print("usage: python -m sciml.online.worker JOB.json", file=sys.stderr)
        return 2
    secret_hex = os.environ.get(SECRET_ENV)
    if not secret_hex:
        print(f"{SECRET_ENV} is not set: the study's secret is missing.", file=sys.stderr)
        return 2
    if os.environ.get(PARENT_ENV):
        die_with_parent(int(os.environ[PARENT_ENV]))
    job = SolverJob.from_json(json.loads(Path(argv[0]).read_text()))
    run_job(job, bytes.fromhex(secret_hex))
    return 0
