"""The job description a trainer hands to a solver process (`JOB.json`).

A job is one solver process that runs a list of the study's runs one after the
other; `python -m sciml.transport.worker JOB.json` runs it.
"""

from __future__ import annotations

import dataclasses
import json
import os
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

    @classmethod
    def read(cls, path: str | os.PathLike) -> SolverJob:
        """The job that `write` wrote to `path`; a `ValueError` naming the file
        and what is wrong with it (missing, a directory, not JSON, not a job)."""
        name = os.fspath(path)
        try:
            text = Path(path).read_text(encoding="utf-8")
        except FileNotFoundError:
            raise ValueError(f"the job file {name!r} does not exist.") from None
        except IsADirectoryError:
            raise ValueError(f"the job file {name!r} is a directory, not a JSON file.") from None
        except (OSError, UnicodeDecodeError) as error:
            raise ValueError(f"the job file {name!r} cannot be read: {error}.") from None
        try:
            data = json.loads(text)
        except json.JSONDecodeError as error:
            raise ValueError(f"the job file {name!r} is not JSON ({error}).") from None
        keys = {field.name for field in dataclasses.fields(cls)}
        missing = sorted(keys - {"timeout"} - set(data)) if isinstance(data, dict) else []
        if not isinstance(data, dict) or missing or set(data) - keys:
            what = f"missing {missing}" if missing else f"keys {sorted(data)}"
            what = what if isinstance(data, dict) else f"a JSON {type(data).__name__}"
            raise ValueError(
                f"the job file {name!r} is not a job description (the keys {sorted(keys)}); "
                f"got {what}."
            )
        try:
            return cls.from_json(data)
        except (TypeError, AttributeError) as error:  # a run that is not a RunSpec
            raise ValueError(
                f"the job file {name!r} has a run that is not {{'run', 'attempt', 'params', "
                f"'seed'}}: {error}."
            ) from None

    def write(self, path: Path) -> Path:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(self.to_json(), indent=1))
        return path
