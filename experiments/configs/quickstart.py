"""Quickstart: an MLP learns the 1-D heat-equation solution operator (exact data).

`python -m experiments.run --config experiments/configs/quickstart.py`; the
`tiny` variant (`quickstart.py:tiny`) runs in seconds for the test suite.
"""

import ml_collections

from sciml.experiment import About, defaults


ABOUT = About(
    "an MLP learns the 1-D heat-equation solution operator (exact data)",
    minutes=1,
    tiny_minutes=0.2,
)


def tiny(config: ml_collections.ConfigDict) -> None:
    config.data.n_train = 256
    config.data.n_test = 32
    config.data.resolution = 16
    config.data.n_modes = 4
    config.model.width = 32
    config.optimizer.learning_rate = 5e-3
    defaults.shrink_training(
        config,
        steps=300,
        batch_size=16,
        log_every=50,
        eval_every=100,
        checkpoint_every=100,
        warmup_steps=5,
    )


def get_config(variant: str | None = None) -> ml_collections.ConfigDict:
    config = defaults.base_config(
        "quickstart",
        "experiments.tasks.quickstart",
        steps=3000,
        batch_size=64,
        learning_rate=2e-3,
        train={"log_every": 50, "eval_every": 500, "checkpoint_every": 500, "keep_checkpoints": 2},
        optimizer={"schedule": "cosine", "warmup_steps": 100, "clip_norm": 1.0},
    )

    config.data = ml_collections.ConfigDict()
    config.data.n_train = 1024
    config.data.n_test = 256
    config.data.resolution = 64
    config.data.n_modes = 8
    config.data.diffusivity = 0.01
    config.data.t_final = 0.1

    config.model = ml_collections.ConfigDict()
    config.model.width = 128
    config.model.depth = 2
    return defaults.select_variant(config, variant, tiny=tiny)
