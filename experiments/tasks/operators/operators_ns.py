"""2-D Navier–Stokes (vorticity form, periodic unit square, FNO forcing): a TFNO or
MG-TFNO learns the map from the vorticity `ω(t_start)` (default the initial
field, `config.data.t_start = 0`) to `ω(T)`.

Data come from `solvers.navier_stokes` (pseudo-spectral, Crank–Nicolson/Heun),
generated in-process and cached for the run, or read from files of
`python -m solvers.generate navier_stokes` (`config.data.path`, `config.data.path_2x`;
the target is the last recorded time). The zero-shot super-resolution test
set is the same initial functions on the `2s` grid (`x_i = i/s` nests). Losses
and metrics are relative, with periodic finite differences.
"""

from __future__ import annotations

import functools

import numpy as np

from experiments.tasks.operators.operators_common import (
    OperatorData,
    arrays_from_files,
    build_experiment,
    validate_operator_config,
)
from sciml.experiment import ConfigError, Experiment, Headline, Task, check_config, train_experiment


HEADLINE = Headline("test_rel_l2", "test rel. L2", percent=True)


@functools.lru_cache(maxsize=4)
def ns_data(
    n_train: int,
    n_test: int,
    resolution: int,
    seed: int,
    viscosity: float,
    t_final: float,
    dt: float,
    super_resolution: bool,
    t_start: float = 0.0,
):
    """Train / test pairs `(ω(t_start), ω(t_final))` (and the 2s test set) as
    `(n, 1, s, s)` arrays."""
    from solvers import navier_stokes

    def make(n, s, seed):
        out = navier_stokes.make_dataset(
            n,
            s,
            seed=seed,
            viscosity=viscosity,
            t_start=t_start,
            t_final=t_final,
            record_every=t_final - t_start,
            dt=dt,
        )
        return np.asarray(out["inputs"])[:, None], np.asarray(out["outputs"])[:, -1:]

    arrays = [*make(n_train, resolution, seed), *make(n_test, resolution, seed + 1)]
    if super_resolution:
        arrays += make(n_test, 2 * resolution, seed + 1)
    return tuple(arrays)


def raw_arrays(config) -> tuple[np.ndarray, ...]:
    """Unscaled train / test (and 2× test) `(inputs, outputs)` arrays, `(n, 1,
    s, s)`, from the files of `config.data` or generated in-process.

    With `config.data.subsample = k` (default 1) every field is taken at every
    `k`-th point per axis: the same flows on a `k` times coarser grid (the
    periodic grid `x_i = i/s` without its endpoint nests).
    """
    d = config.data
    if d.get("path"):
        arrays = arrays_from_files(d, problem="navier_stokes")
    else:
        arrays = ns_data(
            int(d.n_train),
            int(d.n_test),
            int(d.resolution),
            int(config.seed),
            float(d.viscosity),
            float(d.t_final),
            float(d.dt),
            bool(d.super_resolution),
            float(d.get("t_start", 0.0)),
        )
    k = int(d.get("subsample", 1))
    return tuple(a[..., ::k, ::k] for a in arrays)


def data_from_config(config) -> OperatorData:
    return OperatorData.from_arrays(*raw_arrays(config))


def experiment(config, data: OperatorData, model_cfg=None) -> Experiment:
    """The `Experiment` of `model_cfg` (default `config.model`) on the NS data."""
    return build_experiment(
        config,
        data,
        periodic=True,
        domain_length=1.0,
        labels=("vorticity ω(0)", "vorticity ω(T)"),
        model_cfg=model_cfg,
    )


def build(config) -> Experiment:
    return experiment(config, data_from_config(config))


def train_and_evaluate(config, workdir) -> dict:
    return train_experiment(build(config), config, workdir).summary


def validate_config(config) -> None:
    """Data and model sizes and choices, checked by the runner before anything is written."""
    validate_operator_config(config)
    check_config(config, positive_numbers=("data.dt", "data.t_final", "data.viscosity"))
    check_subsample(config)


def check_subsample(config) -> None:
    """`config.data.subsample` (if set) is an int >= 1 that divides the resolution."""
    if "subsample" not in config.data:
        return
    check_config(config, positive=("data.subsample",))
    k, s = int(config.data.subsample), int(config.data.resolution)
    if s % k:
        raise ConfigError(
            f"config.data.subsample: {k} does not divide config.data.resolution = {s}; "
            f"accepted: a divisor of {s}."
        )


TASK = Task(
    train_and_evaluate, validate=validate_config, headline=HEADLINE, data_parallel=True, build=build
)
