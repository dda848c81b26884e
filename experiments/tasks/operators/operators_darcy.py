"""Darcy flow `−∇·(a∇u) = 1`: an FNO / TFNO learns the map from the coefficient `a`
to the pressure `u` (Li et al. 2021; the neuraloperator Darcy example).

Data come from `solvers.darcy` (finite differences on the node grid with boundary
nodes, `s` points per side), generated in-process and cached for the run, or
read from files of `python -m solvers.generate darcy` (`config.data.path`,
`config.data.path_2x`). The
zero-shot super-resolution test set uses the nested grid `2s − 1`, on which the
random coefficients are the same functions. Losses and metrics are relative and
use non-periodic finite differences (the data are not periodic) with grid
spacing `h = 1/(s − 1)`.
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
from sciml.experiment import Experiment, Headline, Task, train_experiment


HEADLINE = Headline("test_rel_l2", "test rel. L2", percent=True)


@functools.lru_cache(maxsize=4)
def darcy_data(n_train: int, n_test: int, resolution: int, seed: int, super_resolution: bool):
    """Train / test sets (and the 2s−1 test set) as `(n, 1, s, s)` numpy arrays."""
    from solvers import darcy

    train = darcy.make_dataset(n_train, resolution, seed=seed)
    test = darcy.make_dataset(n_test, resolution, seed=seed + 1)
    arrays = [train["inputs"], train["outputs"], test["inputs"], test["outputs"]]
    if super_resolution:
        fine = darcy.make_dataset(n_test, 2 * resolution - 1, seed=seed + 1)
        arrays += [fine["inputs"], fine["outputs"]]
    return tuple(np.asarray(a)[:, None] for a in arrays)


def build(config) -> Experiment:
    d = config.data
    if d.get("path"):
        arrays = arrays_from_files(d, problem="darcy")
    else:
        arrays = darcy_data(
            int(d.n_train),
            int(d.n_test),
            int(d.resolution),
            int(config.seed),
            bool(d.super_resolution),
        )
    data = OperatorData.from_arrays(*arrays)
    s = int(d.resolution)
    return build_experiment(
        config,
        data,
        periodic=False,
        domain_length=s / (s - 1),  # h = L / s = 1 / (s - 1)
        domain_length_2x=(2 * s - 1) / (2 * s - 2),
        labels=("coefficient a", "pressure u"),
    )


def train_and_evaluate(config, workdir) -> dict:
    return train_experiment(build(config), config, workdir).summary


def validate_config(config) -> None:
    """Data and model sizes and choices, checked by the runner before anything is written."""
    validate_operator_config(config)


TASK = Task(
    train_and_evaluate, validate=validate_config, headline=HEADLINE, data_parallel=True, build=build
)
