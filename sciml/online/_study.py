"""A study: which solver runs, over which parameters, how many, how many at once.

The held-out validation runs are generated here too, once, at the start of a
study: in the trainer's process, by the same solver function, with parameters
and seeds disjoint from the training runs, and cached to HDF5 in the run
directory (a restarted study reads them back instead of solving again). A
validation run with a NaN or an infinity in a field is reported (a warning,
and the summary's `validation_diverged_runs`) and replaced by a freshly drawn
one, as a training run is; after `max_attempts` draws for one validation run
the study stops before training, naming the runs that diverged.

So is the offline counterpart of a study, for comparisons: its first `M`
training runs (the same parameters and seeds the online study's runs
`0 … M − 1` get), solved in turn and written to HDF5 run by run, resumably.
"""

from __future__ import annotations

import dataclasses
import json
import logging
from pathlib import Path
from typing import Any

import h5py
import numpy as np

from .._checks import check_int, check_positive_int, check_real
from ..transport import import_simulation, simulate
from ._runs import run_seed
from ._sampler import AbstractSampler, MonteCarlo, ParameterSpace


# Validation runs take their seeds from a stream no training run uses.
_VALIDATION_STREAM = 1 << 20
_log = logging.getLogger(__name__)


@dataclasses.dataclass(frozen=True)
class Study:
    """The definition of an online study (built from a config by the task).

    **Arguments:**

    - `simulation`: dotted path of the function that runs one simulation,
      `simulation(params, *, seed, **settings) -> iterator of {name: array}`
      (see `solvers/streams.py` for the contract); imported by name in the
      solver processes (the processes that run simulations), never by `sciml`
      itself.
    - `space`: the [`ParameterSpace`][sciml.online.ParameterSpace].
    - `n_runs`: planned runs (failed runs are replaced by redrawn ones).
    - `n_steps`: time steps each run yields.
    - `settings`: fixed keyword arguments of the simulation (JSON data).
    - `sampler`: a sampler module (default [`MonteCarlo`][sciml.online.MonteCarlo]
      with the study's seed).
    - `concurrency`: solver jobs running at once.
    - `runs_per_job`: runs one solver process does in turn (a JAX solver
      compiles once per process).
    - `n_validation`: held-out runs for validation (>= 1: they also give the
      fields' names, shapes and dtypes the trainer accepts).
    - `seed`: seeds the sampler (when not given) and every run's solver seed.
    - `max_attempts`: attempts per run before its parameters are redrawn;
      also the parameter draws one validation run gets before a study whose
      validation runs all diverge stops.
    - `timeout`: seconds without a message from a running job before it is
      declared hung, killed and its runs resubmitted (longer than one solver
      step).
    - `start_timeout`: extra seconds a job is given to send its first message
      (the interpreter and the solver's imports start, a JAX solver compiles),
      counted from when it leaves a batch queue.
    - `address`: where the trainer listens; None binds a free loopback TCP
      port; `"ipc:///path"` or `"tcp://0.0.0.0:PORT"` (other nodes) on request.
      TCP connections are authenticated with ZeroMQ CURVE keys derived from
      the study's secret; an ipc socket is protected by its directory's mode.
      With several trainer processes each has its own receiver (and secret,
      so its own CURVE keys): process `r` binds a free loopback port of its own
      for None, `PORT + r` for `"tcp://HOST:PORT"` (keep ports `PORT` to
      `PORT + processes − 1` free) and `/path.process<r>` for `"ipc:///path"`
      ([`receiver_address`][sciml.online.Study.receiver_address]).
    """

    simulation: str
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
        if not isinstance(self.simulation, str) or "." not in self.simulation:
            raise ValueError(
                "`simulation` must be a dotted path 'package.module.function', "
                f"got {self.simulation!r}."
            )
        if not isinstance(self.space, ParameterSpace):
            raise TypeError(f"`space` must be a ParameterSpace, got {type(self.space).__name__}.")
        names = ("n_runs", "n_steps", "concurrency", "runs_per_job", "max_attempts", "n_validation")
        for name in names:
            check_int(name, getattr(self, name), minimum=1)
        check_real("timeout", self.timeout, positive=True)
        check_real("start_timeout", self.start_timeout, minimum=0)
        try:
            json.dumps(self.settings)
        except TypeError as error:
            raise ValueError(
                f"`settings` must be JSON data (they go to the solver processes): {error}"
            ) from None
        if self.sampler is None:
            object.__setattr__(self, "sampler", MonteCarlo(seed=self.seed))

    def receiver_address(self, process: int = 0, processes: int = 1) -> str | None:
        """The address trainer process `process` of `processes` binds (see
        `address`): `address` itself for one process."""
        if processes == 1 or self.address is None:
            return self.address
        if self.address.startswith("ipc://"):
            return f"{self.address}.process{process}"
        host, _, port = self.address.rpartition(":")
        if not port.isdigit() or int(port) == 0:  # any free port: each process its own
            return self.address
        return f"{host}:{int(port) + process}"

    def validation_params(self, n: int | None = None) -> tuple[np.ndarray, list[int]]:
        """Parameters `(n, dim)` and seeds of the first `n` validation draws
        (default `n_validation`: the validation runs, unless some diverge;
        replacements are the draws after them)."""
        n = self.n_validation if n is None else n
        sampler = MonteCarlo(seed=run_seed(self.seed, _VALIDATION_STREAM))
        params = sampler.draw(self.space, n)
        seeds = [run_seed(self.seed, _VALIDATION_STREAM + 1 + j) for j in range(n)]
        return params, seeds


def _description(study: Study, params: np.ndarray, seeds: list[int]) -> str:
    return json.dumps(
        {
            "solver": study.simulation,  # the cache key keeps its name: caches stay valid
            "settings": study.settings,
            "n_steps": study.n_steps,
            "names": list(study.space.names),
            "params": params.tolist(),
            "seeds": seeds,
        },
        sort_keys=True,
    )


def _solve_run(study: Study, simulation, row: np.ndarray, seed: int, run: int) -> list:
    """The time steps of one run: `{fields..., "params", "run", "step"}` each."""
    steps = simulate(
        simulation,
        study.space.as_dict(row),
        seed=seed,
        settings=study.settings,
        n_steps=study.n_steps,
    )
    params = row.astype(np.float32)
    return [{**f, "params": params, "run": run, "step": k} for k, f in enumerate(steps)]


def _stack(steps: list[dict]) -> dict[str, np.ndarray]:
    return {name: np.stack([np.asarray(s[name]) for s in steps]) for name in steps[0]}


def _first_non_finite(steps: list[dict]) -> int | None:
    """The first step with a NaN or an infinity in a floating field, if any."""
    for k, fields in enumerate(steps):
        for x in fields.values():
            x = np.asarray(x)
            if np.issubdtype(x.dtype, np.inexact) and not np.isfinite(x).all():
                return k
    return None


def _solve_validation(study: Study) -> tuple[list[dict], list[dict[str, Any]]]:
    """The steps of `n_validation` finite validation runs, and the draws that
    diverged: `{"run", "params", "seed", "non_finite_step", "replaced_by"}`
    each (`run` numbers the draws; validation run `j` is draw `j` unless it
    diverged). Raises `RuntimeError` when one validation run diverged in
    `max_attempts` draws."""
    n = study.n_validation
    params, seeds = study.validation_params(n * study.max_attempts)  # all it may need
    simulation = import_simulation(study.simulation)
    steps: list[dict[str, np.ndarray]] = []
    diverged: list[dict[str, Any]] = []
    next_draw = n
    for j in range(n):
        draw = j
        for attempt in range(study.max_attempts):
            run = _solve_run(study, simulation, params[draw], seeds[draw], j)
            bad = _first_non_finite(run)
            if bad is None:
                steps += run
                break
            record = {
                "run": draw,
                "params": study.space.as_dict(params[draw]),
                "seed": seeds[draw],
                "non_finite_step": bad,
                "replaced_by": next_draw if attempt + 1 < study.max_attempts else None,
            }
            diverged.append(record)
            then = "no draws left" if record["replaced_by"] is None else f"draw {next_draw} next"
            _log.warning("validation %s; %s", _describe(record), then)
            draw, next_draw = next_draw, next_draw + 1
        else:
            raise RuntimeError(
                f"the simulation {study.simulation} diverged in all {study.max_attempts} "
                f"draws (max_attempts) of validation run {j}, so the study stops before "
                "training (its validation metrics would be NaN): "
                + "; ".join(f"validation {_describe(d)}" for d in diverged)
                + ". Narrow the parameter space or make the simulation stable there."
            )
    return steps, diverged


def _describe(record: dict[str, Any]) -> str:
    return (
        f"draw {record['run']} (parameters {record['params']}, seed {record['seed']}) "
        f"is non-finite from step {record['non_finite_step']}"
    )


def validation_data(study: Study, path: str | Path | None = None) -> dict[str, np.ndarray]:
    """The validation runs' time steps, solved here or read from the cache `path`.

    A validation run that is not finite is replaced by a new draw (see the
    module docstring); `RuntimeError` if one diverged in `max_attempts` draws.

    **Returns:** `{name: (n_validation · n_steps, *shape)}` for every field the
    solver yields, plus `"params"` `(n_validation · n_steps, dim)` float32 and
    `"run"` / `"step"` (int) — runs one after another, steps in order.
    """
    return validation_runs(study, path)[0]


def validation_runs(
    study: Study, path: str | Path | None = None
) -> tuple[dict[str, np.ndarray], list[dict[str, Any]]]:
    """[`validation_data`][sciml.online.validation_data] and the validation
    draws that diverged and were replaced, `{"run", "params", "seed",
    "non_finite_step", "replaced_by"}` each (also read back from the cache)."""
    params, seeds = study.validation_params()
    description = _description(study, params, seeds)
    path = None if path is None else Path(path)
    if path is not None and path.exists():
        with h5py.File(path, "r") as f:
            if f.attrs.get("description") == description:
                diverged = json.loads(f.attrs.get("diverged", "[]"))
                return {name: f[name][...] for name in f}, diverged
    steps, diverged = _solve_validation(study)
    data = _stack(steps)
    if path is not None:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".tmp")
        with h5py.File(tmp, "w") as f:
            for name, array in data.items():
                f[name] = array
            f.attrs["description"] = description
            f.attrs["diverged"] = json.dumps(diverged)
        tmp.replace(path)
    return data, diverged


def offline_data(study: Study, n_runs: int, path: str | Path) -> dict[str, np.ndarray]:
    """A fixed data set: the study's first `n_runs` training runs, on disk.

    Run `r` has the parameters of row `r` of the study's sampler and the seed
    `run_seed(study.seed, r)`: exactly the run `r` of the online study, so an
    offline data set of `M` runs is the first `M` runs of the stream. The runs
    are solved here one after another and written to the HDF5 file `path`
    (each run flushed, then marked in the `done` dataset); calling again after
    an interruption solves only the runs not marked done, and a file written
    for another study or size is replaced.

    **Returns:** `{name: (n_runs · n_steps, *shape)}` for every field the solver
    yields, plus `"params"` `(n_runs · n_steps, dim)` float32 and `"run"` /
    `"step"` (int), in the layout of [`validation_data`][sciml.online.validation_data].
    """
    n_runs = check_positive_int("n_runs", n_runs)
    params = study.sampler.draw(study.space, n_runs)
    seeds = [run_seed(study.seed, r) for r in range(n_runs)]
    description = _description(study, params, seeds)
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.exists():
        with h5py.File(path, "r") as f:
            stale = f.attrs.get("description") != description
        if stale:
            path.unlink()
    simulation = None
    n = study.n_steps
    with h5py.File(path, "a") as f:
        if "done" not in f:
            f.attrs["description"] = description
            f.create_dataset("done", data=np.zeros(n_runs, bool))
        for r in np.flatnonzero(~f["done"][...]):
            simulation = simulation or import_simulation(study.simulation)
            data = _stack(_solve_run(study, simulation, params[r], seeds[r], int(r)))
            for name, array in data.items():
                if name not in f:
                    f.create_dataset(name, (n_runs * n, *array.shape[1:]), array.dtype)
                f[name][r * n : (r + 1) * n] = array
            f.flush()
            f["done"][r] = True
            f.flush()
        return {name: f[name][...] for name in f if name != "done"}
