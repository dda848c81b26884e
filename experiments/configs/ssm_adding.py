"""The adding problem with a causal S4D-Lin model.

`python -m experiments.run --config experiments/configs/ssm_adding.py`
(length 256: the training loss stays at the mean predictor's 1/6 for about
2000 steps, then drops below 0.02; longer sequences, `--config.data.length`
up to 4096, need more steps and were not tuned here;
`--config.model.layer=s5 --config.model.init=hippo-n` for S5). The `tiny`
variant runs in seconds for the test suite.
"""

import ml_collections

from experiments.configs.ssm_recall import SSM_OPTIMIZER, model_config, tiny
from sciml.experiment import About, defaults


ABOUT = About(
    "the adding problem at length 256 with a causal S4D-Lin model", minutes=5, tiny_minutes=0.2
)


def get_config(variant: str | None = None) -> ml_collections.ConfigDict:
    config = defaults.base_config(
        "ssm_adding",
        "experiments.tasks.ssm.ssm_adding",
        steps=3000,
        batch_size=32,
        learning_rate=1e-2,
        train={"log_every": 50, "eval_every": 500, "checkpoint_every": 500, "keep_checkpoints": 2},
        optimizer={**SSM_OPTIMIZER, "warmup_steps": 50},
    )
    config.data = ml_collections.ConfigDict()
    config.data.length = 256
    config.data.n_test = 1024
    config.model = model_config()
    config.model.d_model = 32
    config.model.state_size = 32
    return defaults.select_variant(config, variant, tiny=tiny)
