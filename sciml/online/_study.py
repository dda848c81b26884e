"""A study: which solver runs, over which parameters, how many, how many at once.

The held-out validation runs are generated here too, once, at the start of a
study: in the trainer's process, by the same solver function, with parameters
and seeds disjoint from the training runs, and cached to HDF5 in the run
directory (a restarted study reads them back instead of solving again).
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import h5py
import numpy as np

from .._checks import check_positive_int
from ._runs import run_seed
from ._sampler import AbstractSampler, MonteCarlo, ParameterSpace
from ._worker import import_solver


# Validation runs take their seeds from a stream no training run uses.
_VALIDATION_STREAM = 1 << 20


@dataclasses.dataclass(frozen=True)
class Study:
    """The definition of an online study (built from a config by the task).

    **Arguments:**

    - `solver`: dotted path of the solver function
      `solver(params, *, seed, **settings) -> iterator of {name: array}`
      (see `solvers/streams.py` for the contract); imported by name in the
      solver processes, never by `sciml` itself.
    - `space`: the [`ParameterSpace`][sciml.online.ParameterSpace].
    - `n_runs`: planned runs (failed runs are replaced by redrawn ones).
    - `n_steps`: time steps each run yields.
    - `settings`: fixed keyword arguments of the solver (JSON data).
    - `sampler`: a sampler module (default [`MonteCarlo`][sciml.online.MonteCarlo]
      with the study's seed).
    - `concurrency`: solver jobs running at once.
    - `runs_per_job`: runs one solver process does in turn (a JAX solver
      compiles once per process).
    - `n_validation`: held-out runs for validation (>= 1: they also give the
      fields' names, shapes and dtypes the trainer accepts).
    - `seed`: seeds the sampler (when not given) and every run's solver seed.
    - `max_attempts`: attempts per run before its parameters are redrawn.
    - `timeout`: seconds without a message from a running job before it is
      declared hung, killed and its runs resubmitted (longer than one solver
      step).
    - `start_timeout`: extra seconds a job is given to send its first message
      (the interpreter and the solver's imports start, a JAX solver compiles),
      counted from when it leaves a batch queue.
    - `address`: where the trainer listens; None binds a free loopback TCP
      port; `"ipc:///path"` or `"tcp://0.0.0.0:PORT"` (other nodes) on request.
    """

    solver: str
    space: ParameterSpace
    n_runs: int
    n_steps: int
    settings: dict[str, Any] = dataclasses.field(default_factory=dict)
    sampler: AbstractSampler | None = None
    concurrency: int = 2
    runs_per_job: int = 4
    n_validation: int = 4
    seed: int = 0
    max_attempts: int = 3
    timeout: float = 120.0
    start_timeout: float = 60.0
    address: str | None = None

    def __post_init__(self):
        if not isinstance(self.solver, str) or "." not in self.solver:
            raise ValueError(
                f"`solver` must be a dotted path 'package.module.function', got {self.solver!r}."
            )
        if not isinstance(self.space, ParameterSpace):
            raise TypeError(f"`space` must be a ParameterSpace, got {type(self.space).__name__}.")
        names = ("n_runs", "n_steps", "concurrency", "runs_per_job", "max_attempts", "n_validation")
        for name in names:
            check_positive_int(name, getattr(self, name))
        if not self.timeout > 0:
            raise ValueError(
                f"`timeout` must be a positive number of seconds, got {self.timeout!r}."
            )
        try:
            json.dumps(self.settings)
        except TypeError as error:
            raise ValueError(
                f"`settings` must be JSON data (they go to the solver processes): {error}"
            ) from None
        if self.sampler is None:
            object.__setattr__(self, "sampler", MonteCarlo(seed=self.seed))

    def validation_params(self) -> tuple[np.ndarray, list[int]]:
        """Parameters `(n_validation, dim)` and seeds of the validation runs."""
        sampler = MonteCarlo(seed=run_seed(self.seed, _VALIDATION_STREAM))
        params = sampler.draw(self.space, self.n_validation)
        seeds = [run_seed(self.seed, _VALIDATION_STREAM + 1 + j) for j in range(self.n_validation)]
        return params, seeds


def _description(study: Study, params: np.ndarray, seeds: list[int]) -> str:
    return json.dumps(
        {
            "solver": study.solver,
            "settings": study.settings,
            "n_steps": study.n_steps,
            "names": list(study.space.names),
            "params": params.tolist(),
            "seeds": seeds,
        },
        sort_keys=True,
    )


def validation_data(study: Study, path: str | Path | None = None) -> dict[str, np.ndarray]:
    """The validation runs' time steps, solved here or read from the cache `path`.

    **Returns:** `{name: (n_validation · n_steps, *shape)}` for every field the
    solver yields, plus `"params"` `(n_validation · n_steps, dim)` float32 and
    `"run"` / `"step"` (int) — runs one after another, steps in order.
    """
    params, seeds = study.validation_params()
    description = _description(study, params, seeds)
    path = None if path is None else Path(path)
    if path is not None and path.exists():
        with h5py.File(path, "r") as f:
            if f.attrs.get("description") == description:
                return {name: f[name][...] for name in f}
    solver = import_solver(study.solver)
    steps: list[dict[str, np.ndarray]] = []
    for j in range(study.n_validation):
        run_params = study.space.as_dict(params[j])
        fields = list(solver(run_params, seed=seeds[j], **study.settings))
        if len(fields) != study.n_steps:
            raise ValueError(
                f"the solver {study.solver} yielded {len(fields)} steps for a validation run; "
                f"the study declares n_steps = {study.n_steps}."
            )
        for k, f in enumerate(fields):
            steps.append({**f, "params": params[j].astype(np.float32), "run": j, "step": k})
    data = (
        {name: np.stack([np.asarray(s[name]) for s in steps]) for name in steps[0]} if steps else {}
    )
    if path is not None:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".tmp")
        with h5py.File(tmp, "w") as f:
            for name, array in data.items():
                f[name] = array
            f.attrs["description"] = description
        tmp.replace(path)
    return data
