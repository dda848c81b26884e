"""The adding problem with a causal S4D-Lin model.

`python -m experiments.run --config experiments/configs/ssm_adding.py`
(length 256: the training loss stays at the mean predictor's 1/6 for about
2000 steps, then drops below 0.02; longer sequences, `--config.data.length`
up to 4096, need more steps and were not tuned here;
`--config.model.layer=s5 --config.model.init=hippo-n` for S5). The `tiny`
variant runs in seconds for the test suite.
"""

import ml_collections

from experiments.configs.ssm_recall import model_config, train_config


def get_config(variant: str | None = None) -> ml_collections.ConfigDict:
    config = ml_collections.ConfigDict()
    config.name = "ssm_adding"
    config.task = "ssm_adding"
    config.seed = 0
    config.data = ml_collections.ConfigDict()
    config.data.length = 256
    config.data.n_test = 1024
    config.model = model_config()
    config.model.d_model = 32
    config.model.state_size = 32
    config.train, config.optimizer = train_config(3000, 1e-2)
    config.optimizer.warmup_steps = 50
    if variant == "tiny":
        config.data.length = 64
        config.data.n_test = 64
        config.model.d_model = 16
        config.model.state_size = 16
        config.train.steps = 20
        config.train.batch_size = 8
        config.train.log_every = 10
        config.train.eval_every = 20
        config.train.checkpoint_every = 20
        config.train.progress = False
        config.optimizer.warmup_steps = 2
    elif variant is not None:
        raise ValueError(f"unknown variant {variant!r}; accepted: 'tiny'")
    return config
