"""Character-level language model on the Python standard library's source, trained twice:
with every recurrent layer evaluated sequentially and by Newton's method.

`python -m experiments.run --config experiments/configs/char_lm.py`; the `tiny`
variant (`char_lm.py:tiny`) runs in seconds for the test suite. The two runs
start from the same parameters and see the same batches, so their learning
curves must coincide (up to the Newton tolerance).
"""

import ml_collections

from sciml.experiment import About, defaults


ABOUT = About(
    "a two-layer ParaGRU character model trained twice, sequentially and by Newton",
    minutes=13,
    tiny_minutes=0.3,
)


def tiny(config: ml_collections.ConfigDict) -> None:
    config.data.max_bytes = 200_000
    config.data.seq_len = 32
    config.data.val_windows = 8
    config.model.width = 16
    config.model.depth = 1
    config.model.num_heads = 2
    defaults.shrink_training(
        config,
        steps=20,
        batch_size=4,
        log_every=5,
        eval_every=0,  # evaluated once, at the end
        checkpoint_every=0,  # saved once, at the end
        warmup_steps=5,
    )


def get_config(variant: str | None = None) -> ml_collections.ConfigDict:
    config = defaults.base_config(
        "char_lm",
        "experiments.tasks.pararnn.char_lm",
        steps=2000,
        batch_size=16,
        learning_rate=3e-3,
        train={"log_every": 10, "eval_every": 500, "checkpoint_every": 500, "keep_checkpoints": 2},
        optimizer={"schedule": "cosine", "warmup_steps": 50, "end_factor": 0.1, "clip_norm": 1.0},
    )

    config.data = ml_collections.ConfigDict()
    config.data.max_bytes = 4_000_000  # of the stdlib's top-level *.py files, sorted by name
    config.data.val_fraction = 0.05
    config.data.seq_len = 256
    config.data.val_windows = 64

    config.model = ml_collections.ConfigDict()
    config.model.cell = "paragru"  # paragru | paralstm | gru | lstm
    config.model.width = 64
    config.model.depth = 2
    config.model.num_heads = 4
    config.model.mlp_ratio = 2
    config.model.dtype = "float32"

    config.newton = ml_collections.ConfigDict()
    config.newton.max_iter = 20
    config.newton.fallback = "sequential"
    config.newton.method = "auto"
    return defaults.select_variant(config, variant, tiny=tiny)
