"""DCDM on 3-D pressure-Poisson systems: train at 32³, evaluate at 32³ and 64³.

`python -m experiments.run --config experiments/configs/dcdm_poisson3d.py`;
the `tiny` variant (`dcdm_poisson3d.py:tiny`) runs in seconds for the tests.
Training at 64³ (`--config.data.resolution=64`) keeps the Ritz data at about
8.4 GB with the default 1,600 Lanczos steps (see `sciml.dcdm.lanczos`).
"""

import ml_collections

from experiments.configs.dcdm_poisson2d import data_block, eval_block, model_block
from sciml.experiment import About, defaults


ABOUT = About(
    "DCDM trained on 3-D Poisson at 32³, against CG and IC(0) at 32³ and 64³",
    minutes=120,
    tiny_minutes=0.6,
)


def tiny(config: ml_collections.ConfigDict) -> None:
    config.data.resolution = 8
    config.data.n_ritz = 40
    config.data.n_rhs = 64
    config.data.n_valid = 8
    config.model.pairs = (1, 1, 1)
    config.eval.resolutions = (8,)  # the 2-D tiny config covers a second, larger grid
    config.eval.scene_seeds = (101,)
    config.eval.max_steps = 120
    defaults.shrink_training(
        config,
        steps=20,
        batch_size=4,
        log_every=10,
        eval_every=10,
        checkpoint_every=10,
        warmup_steps=2,
    )


def get_config(variant: str | None = None) -> ml_collections.ConfigDict:
    config = defaults.base_config(
        "dcdm_poisson3d",
        "experiments.tasks.dcdm.dcdm",
        steps=10000,
        batch_size=8,
        learning_rate=1e-3,
        train={"log_every": 50, "eval_every": 500, "checkpoint_every": 500, "keep_checkpoints": 2},
        optimizer={"schedule": "cosine", "warmup_steps": 100, "clip_norm": 1.0},
    )
    config.data = data_block(3, 32, n_ritz=1600, n_rhs=2000)
    config.model = model_block()
    config.eval = eval_block((32, 64), (101, 102))
    return defaults.select_variant(config, variant, tiny=tiny)
