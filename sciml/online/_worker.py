"""The solver process: `python -m sciml.online.worker JOB.json`.

Runs each run of the job (see [`SolverJob`][sciml.online.SolverJob]) in turn:
imports the solver function by its dotted path, calls it with the run's
parameters, seed and the study's settings, and sends every yielded time step
to the trainer through a [`SolverClient`][sciml.online.SolverClient]
(`open(params) → send(step, fields) → close(status)`). The study's secret comes
from the environment variable `SCIML_ONLINE_SECRET` (hex).

A solver that raises closes its run with an error status and the process exits
with status 1, as does a job whose trainer takes no message for the study's
`timeout` (it was killed, or restarted elsewhere); the trainer then resubmits the runs that did not finish. A run
that yields more steps than the study declared is an error too (the trainer
would reject those steps).
"""

from __future__ import annotations

import importlib
import json
import os
import sys
from collections.abc import Callable
from pathlib import Path

from ._launch import SECRET_ENV, RunSpec, SolverJob
from ._status import CloseStatus
from ._transport import SolverClient


def import_solver(path: str) -> Callable:
    """The function named by a dotted path `package.module.function`."""
    module_name, _, name = path.rpartition(".")
    if not module_name:
        raise ValueError(f"solver must be a dotted path 'package.module.function', got {path!r}.")
    module = importlib.import_module(module_name)
    try:
        return getattr(module, name)
    except AttributeError:
        raise ValueError(f"module {module_name!r} has no solver function {name!r}.") from None


def run_one(solver: Callable, job: SolverJob, run: RunSpec, secret: bytes) -> None:
    """Streams the time steps of one run to the trainer."""
    timeout_ms = None if job.timeout is None else max(1, round(job.timeout * 1000))
    with SolverClient(
        job.address, secret, run=run.run, attempt=run.attempt, send_timeout_ms=timeout_ms
    ) as client:
        client.open(run.params)
        steps = 0
        for step, fields in enumerate(solver(dict(run.params), seed=run.seed, **job.settings)):
            if step >= job.n_steps:
                raise RuntimeError(
                    f"the solver yielded more than the study's n_steps = {job.n_steps} steps."
                )
            client.send(step, fields)
            steps += 1
        if steps != job.n_steps:
            raise RuntimeError(
                f"the solver yielded {steps} steps, the study expects {job.n_steps}."
            )
        client.close(CloseStatus.OK)


def run_job(job: SolverJob, secret: bytes) -> None:
    solver = import_solver(job.solver)
    for run in job.runs:
        print(f"job {job.job}: run {run.run} (attempt {run.attempt})", flush=True)
        run_one(solver, job, run, secret)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) != 1:
        print("usage: python -m sciml.online.worker JOB.json", file=sys.stderr)
        return 2
    secret_hex = os.environ.get(SECRET_ENV)
    if not secret_hex:
        print(f"{SECRET_ENV} is not set: the study's secret is missing.", file=sys.stderr)
        return 2
    job = SolverJob.from_json(json.loads(Path(argv[0]).read_text()))
    run_job(job, bytes.fromhex(secret_hex))
    return 0
