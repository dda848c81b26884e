"""2-D Navier–Stokes with MG-TFNO: `ns_tfno` on 2×2 tiles (levels 1) with one
coarse context window, padding 1/16 of the grid, loss on the stitched field.

`python -m experiments.run --config experiments/configs/ns_mgtfno.py[:tiny]`
"""

import ml_collections

from experiments.configs.ns_tfno import get_config as ns_tfno_config
from sciml.experiment import About


ABOUT = About(
    "an MG-TFNO (2×2 tiles) on Navier–Stokes 64², zero-shot at 128²", minutes=18, tiny_minutes=0.3
)


def get_config(variant: str | None = None) -> ml_collections.ConfigDict:
    config = ns_tfno_config(variant)
    config.name = "ns_mgtfno"
    config.model.kind = "mgtfno"
    config.model.levels = 1
    config.model.padding_fraction = 1 / 16
    config.model.stitching = True
    return config
