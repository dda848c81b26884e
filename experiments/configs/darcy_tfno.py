"""Darcy flow with a TFNO: `darcy_fno` with Tucker-factorised spectral weights (rank 0.1).

`python -m experiments.run --config experiments/configs/darcy_tfno.py[:tiny]`
"""

import ml_collections

from experiments.configs.darcy_fno import get_config as darcy_fno_config
from sciml.experiment import About


ABOUT = About(
    "a Tucker TFNO on Darcy flow (33² nodes), zero-shot at 65²", minutes=8, tiny_minutes=0.2
)


def get_config(variant: str | None = None) -> ml_collections.ConfigDict:
    config = darcy_fno_config(variant)
    config.name = "darcy_tfno"
    config.model.factorization = "tucker"
    config.model.rank = 0.1
    return config
