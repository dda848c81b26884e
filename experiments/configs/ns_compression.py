"""The MG-TFNO paper's comparison on 2-D Navier–Stokes, at laptop scale.

Dense FNO vs TFNO (CP, Tucker, TT at several ranks, joint Tucker across
layers) vs MG-TFNO, all trained on the `ns_tfno` data (ν = 1e-3, T = 2, 64²,
1,000 trajectories) with the same optimiser and steps. Writes `table.md`
(parameters, compression, test relative L2 / H1 at 64² and zero-shot 128²,
train time, peak memory of a train step) and `plots/compression.png`.

`python -m experiments.run --config experiments/configs/ns_compression.py[:tiny]`;
`--config.models="('dense','tucker:0.05')"` runs a subset (see the task module
`experiments/tasks/operators/operators_table.py` for the spec syntax).
"""

import ml_collections

from experiments.configs.ns_tfno import get_config as ns_tfno_config
from sciml.experiment import About


ABOUT = About(
    "dense FNO vs CP / Tucker / TT / joint TFNO vs MG-TFNO on Navier–Stokes 64²",
    minutes=150,
    tiny_minutes=0.4,
)


def get_config(variant: str | None = None) -> ml_collections.ConfigDict:
    config = ns_tfno_config(variant)
    config.name = "ns_compression"
    config.task = "experiments.tasks.operators.operators_table"
    config.model.padding_fraction = 1 / 16  # for the mg specs
    config.models = (
        "dense",
        "tucker:0.1",
        "tucker:0.02",
        "tucker:0.005",
        "cp:0.1",
        "cp:0.02",
        "tt:0.1",
        "tt:0.02",
        "joint:0.02",
        "mg1-tucker:0.1",
    )
    if variant == "tiny":
        config.models = ("dense", "tucker:0.1", "joint:0.1", "mg1-cp:0.1")
    return config
