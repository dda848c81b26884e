"""The job description a trainer hands to a solver process (`JOB.json`).

A job is one solver process that runs a list of the study's runs one after the
other; `python -m sciml.transport.worker JOB.json` runs it.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any


#: The environment variable that names the trainer's process id to a job it
#: started as its own child process: the job then ends when the trainer does.
PARENT_ENV = "SCIML_ONLINE_PARENT"
#: The module a solver process runs (`python -m WORKER_MODULE JOB.json`).
WORKER_MODULE = "sciml.transport.worker"


@dataclasses.dataclass(frozen=True)
class RunSpec:
    """One run of a job: its id, attempt, parameters and seed."""

    run: int
    attempt: int
    params: dict[str, float]
    seed: int


@dataclasses.dataclass(frozen=True)
class SolverJob:
    """What a solver process needs: written to `JOB.json` for the worker.

    - `job`: the job's id in the study.
    - `simulation`: the dotted path (`"package.module.function"`) of the
      function that runs one simulation.
    - `settings`: fixed keyword arguments of the simulation (JSON data).
    - `address`: the trainer's endpoint (`tcp://…` or `ipc://…`).
    - `n_steps`: the number of time steps every run yields.
    - `runs`: the runs, in order.
    - `timeout`: seconds a send may wait for the trainer before the job gives
      up (the study's `timeout`; None: forever).
    """

    job: int
    simulation: str
    settings: dict[str, Any]
    address: str
    n_steps: int
    runs: tuple[RunSpec, ...]
    timeout: float | None = None

    def to_json(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> SolverJob:
        runs = tuple(RunSpec(**r) for r in data["runs"])
        return cls(**{**data, "runs": runs})

    def write(self, path: Path) -> Path:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(self.to_json(), indent=1))
        return path
