"""Quickstart: an MLP learns the 1-D heat-equation solution operator (exact data).

`python -m experiments.run --config experiments/configs/quickstart.py`; the
`tiny` variant (`quickstart.py:tiny`) runs in seconds for the test suite.
"""

import ml_collections


def get_config(variant: str | None = None) -> ml_collections.ConfigDict:
    config = ml_collections.ConfigDict()
    config.name = "quickstart"
    config.task = "quickstart"
    config.seed = 0

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

    steps = ml_collections.FieldReference(3000)
    config.train = ml_collections.ConfigDict()
    config.train.steps = steps
    config.train.batch_size = 64
    config.train.log_every = 50
    config.train.eval_every = 500
    config.train.checkpoint_every = 500
    config.train.keep_checkpoints = 2
    config.train.progress = True

    config.optimizer = ml_collections.ConfigDict()
    config.optimizer.name = "adam"
    config.optimizer.learning_rate = 2e-3
    config.optimizer.schedule = "cosine"
    config.optimizer.warmup_steps = 100
    config.optimizer.decay_steps = steps
    config.optimizer.clip_norm = 1.0

    if variant == "tiny":
        config.data.n_train = 256
        config.data.n_test = 32
        config.data.resolution = 16
        config.data.n_modes = 4
        config.model.width = 32
        config.optimizer.learning_rate = 5e-3
        config.train.steps = 300
        config.train.batch_size = 16
        config.train.log_every = 50
        config.train.eval_every = 100
        config.train.checkpoint_every = 100
        config.train.progress = False
        config.optimizer.warmup_steps = 5
    elif variant is not None:
        raise ValueError(f"unknown variant {variant!r}; accepted: 'tiny'")
    return config
