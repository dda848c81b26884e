"""Config blocks shared by the neural-operator configs (not a config itself)."""

import ml_collections

from sciml.experiment import defaults


def model_config(**overrides) -> ml_collections.ConfigDict:
    """Default `config.model` of the operator experiments (neuraloperator's names)."""
    cfg = ml_collections.ConfigDict()
    cfg.kind = "fno"  # "fno" or "mgtfno"
    cfg.n_modes = (12, 12)
    cfg.hidden_channels = 32
    cfg.n_layers = 4
    cfg.factorization = "dense"  # "dense", "cp", "tucker", "tt"
    cfg.rank = 0.1
    cfg.joint_factorization = False
    cfg.implementation = "factorized"
    cfg.domain_padding = 0.0
    cfg.lifting_channel_ratio = 2
    cfg.projection_channel_ratio = 2
    cfg.channel_mlp_skip = "soft-gating"
    cfg.fno_skip = "linear"
    cfg.levels = 1  # MG-TFNO only
    cfg.padding_fraction = 0.125
    cfg.stitching = True
    cfg.update(overrides)
    return cfg


def data_config(**fields) -> ml_collections.ConfigDict:
    """`config.data` of an operator config: its problem's `fields`, plus where the
    data come from.

    - `path`: `""` (default) generates the data in-process from the other keys;
      a path reads a file written by `python -m solvers.generate` instead
      (`n_train` samples of index `< n_train` for training, the next `n_test`
      for testing; `resolution` and any physical key must match the file).
    - `test_path`: with `path`, a file of another seed whose first `n_test`
      samples are the test set (one test set for training sets of several
      sizes); `""` (default): the test samples follow the training samples in
      `path`.
    - `path_2x`: with `path`, a file of the same problem at a finer resolution
      for the zero-shot test, holding the test samples' indices (and their
      seed); `""` for none.
    """
    cfg = ml_collections.ConfigDict()
    cfg.path = ""
    cfg.test_path = ""
    cfg.path_2x = ""
    cfg.update(fields)
    return cfg


#: How the operator models train (the online configs too): a metric line every
#: 50 steps, an evaluation and a checkpoint every 500, two kept; AdamW with
#: weight decay 1e-4, a cosine schedule after 50 warm-up steps, clipping at 1.
TRAIN = {"log_every": 50, "eval_every": 500, "checkpoint_every": 500, "keep_checkpoints": 2}
OPTIMIZER = {
    "name": "adamw",
    "weight_decay": 1e-4,
    "schedule": "cosine",
    "warmup_steps": 50,
    "clip_norm": 1.0,
}


def base_config(name: str, task: str, steps: int) -> ml_collections.ConfigDict:
    """The keys every operator config shares: run, `model.*`, `train.*` and `optimizer.*`.

    Adam with weight decay 1e-4 and a cosine schedule over `train.steps`
    (neuraloperator's recipe uses AdamW-style decay and a step schedule; cosine
    needs no tuning of the step boundaries when `train.steps` is overridden).
    """
    config = defaults.base_config(
        name,
        task,
        steps=steps,
        batch_size=16,
        learning_rate=2e-3,
        train={"loss": "h1", **TRAIN},
        optimizer=OPTIMIZER,
    )
    config.model = model_config()
    return config


def make_tiny(config: ml_collections.ConfigDict, steps: int = 60) -> None:
    """Shrinks `config` in place to a seconds-long smoke run (the `:tiny` variants)."""
    config.model.n_modes = (6, 6)
    config.model.hidden_channels = 8
    config.model.n_layers = 2
    config.optimizer.learning_rate = 1e-2
    defaults.shrink_training(
        config,
        steps=steps,
        batch_size=4,
        log_every=10,
        eval_every=steps,
        checkpoint_every=steps,
        warmup_steps=5,
    )
