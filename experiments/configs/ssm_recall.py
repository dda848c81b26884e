"""Recall the first token (8 classes) with a causal S4D-Lin model.

S4D-Lin is the default init because it learns these synthetic memory tasks
fastest (at length 256, S4D-LegS needs several times more steps);
`--config.model.init=legs` (or `inv`, `real`, `ptd`) selects another.

`python -m experiments.run --config experiments/configs/ssm_recall.py`
(length 1024; `--config.data.length=4096` for the long version,
`--config.model.layer=s5 --config.model.init=hippo-n` for S5). The `tiny`
variant runs in seconds for the test suite.
"""

import ml_collections

from sciml.experiment import About, defaults


ABOUT = About(
    "recall the first of 1,024 tokens with a causal S4D-Lin model", minutes=18, tiny_minutes=0.2
)


def model_config(layer: str = "s4d", init: str = "lin") -> ml_collections.ConfigDict:
    """Model keys shared by the SSM configs (see `experiments/tasks/ssm/ssm_common.py`)."""
    model = ml_collections.ConfigDict()
    model.layer = layer
    model.init = init
    model.d_model = 64
    model.n_layers = 2
    model.state_size = 64
    model.pooling = "last"
    model.activation = ""  # "" = the layer's default ("glu" for S4D, "half_glu1" for S5)
    model.dropout = 0.0
    model.prenorm = True
    model.norm = "layer"  # or "none"
    model.discretization = "zoh"
    model.dt_min = 1e-3
    model.dt_max = 1e-1
    model.bidirectional = False
    model.n_ssm = 1  # S4D: independent (Λ, B) copies
    model.blocks = 1  # S5: HiPPO-N blocks
    model.conj_sym = True  # S5
    return model


SSM_OPTIMIZER = {
    # AdamW, cosine; (Λ, B, Δ) at lr 1e-3 without weight decay
    "name": "adamw",
    "weight_decay": 0.01,
    "schedule": "cosine",
    "warmup_steps": 100,
    "clip_norm": 1.0,
    "groups": {"ssm": {"learning_rate": 1e-3, "weight_decay": 0.0}},
}


def tiny(config: ml_collections.ConfigDict) -> None:
    """The `tiny` variant of the SSM task configs."""
    config.data.length = 64
    config.data.n_test = 64
    config.model.d_model = 16
    config.model.state_size = 16
    defaults.shrink_training(
        config,
        steps=20,
        batch_size=8,
        log_every=10,
        eval_every=20,
        checkpoint_every=20,
        warmup_steps=2,
    )


def get_config(variant: str | None = None) -> ml_collections.ConfigDict:
    config = defaults.base_config(
        "ssm_recall",
        "experiments.tasks.ssm.ssm_recall",
        steps=3000,
        batch_size=32,
        learning_rate=1e-2,
        train={"log_every": 50, "eval_every": 500, "checkpoint_every": 500, "keep_checkpoints": 2},
        optimizer=SSM_OPTIMIZER,
    )
    config.data = ml_collections.ConfigDict()
    config.data.length = 1024
    config.data.n_classes = 8
    config.data.n_test = 1024
    config.model = model_config()
    return defaults.select_variant(config, variant, tiny=tiny)
