"""Darcy flow: a dense FNO learns the map from the coefficient `a` to the pressure `u`.

`python -m experiments.run --config experiments/configs/darcy_fno.py`; evaluates
at the training grid and zero-shot at the nested `2s − 1` grid. Data are
generated in-process; `--config.data.path=FILE` (and `--config.data.path_2x=FILE`)
reads files written by `python -m solvers.generate darcy` instead. The `tiny`
variant (`darcy_fno.py:tiny`) runs in seconds for the test suite.
"""

import ml_collections

from experiments.configs._operators import base_config, data_config, make_tiny
from sciml.experiment import About, defaults


ABOUT = About(
    "a dense FNO on Darcy flow (33² nodes), zero-shot at 65²", minutes=8, tiny_minutes=0.2
)


def get_config(variant: str | None = None) -> ml_collections.ConfigDict:
    config = base_config("darcy_fno", "experiments.tasks.operators.operators_darcy", steps=3000)
    config.data = data_config()
    config.data.n_train = 1000
    config.data.n_test = 100
    config.data.resolution = 33  # nodes per side, boundary included: h = 1/32
    config.data.super_resolution = True
    config.model.factorization = "dense"
    config.optimizer.learning_rate = 3e-3

    return defaults.select_variant(config, variant, tiny=tiny)


def tiny(config: ml_collections.ConfigDict) -> None:
    make_tiny(config)
    config.data.n_train = 32
    config.data.n_test = 8
    config.data.resolution = 17
