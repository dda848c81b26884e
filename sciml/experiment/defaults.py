"""Shared config blocks: the run keys, `train.*`, `optimizer.*` and the variants.

Every experiment config has the same skeleton (see `docs/experiments.md`):

<!-- snippet: not run (a template: the data block and `shrink` are the config's own) -->
```python
from sciml.experiment import defaults

def get_config(variant=None):
    config = defaults.base_config("quickstart", "experiments.tasks.quickstart",
                                  steps=3000, batch_size=64, learning_rate=2e-3)
    config.data = ...
    return defaults.select_variant(config, variant, tiny=shrink)
```

The blocks are built from `sciml.training.TrainSettings` and
`sciml.training.OptimizerSettings`: a key a config does not set has the class's
default, written there only. `train.steps` is an `ml_collections.FieldReference`
shared with `optimizer.decay_steps`, so overriding the number of steps (also
when a run is resumed) stretches a cosine schedule with it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import ml_collections

from sciml.training import OptimizerSettings, TrainSettings
from sciml.training._settings import field_defaults

from ._validate import CONFIG_SETTINGS


def class_defaults(cls: type, *names: str) -> dict[str, Any]:
    """`{name: default}` of the fields `names` of a settings class (a
    dataclass or an Equinox module, such as `sciml.online.Study`): a config
    block takes its defaults from the class that checks them, written there
    only."""
    defaults = field_defaults(cls)
    return {name: defaults[name] for name in names}


def train_block(
    steps: int | ml_collections.FieldReference,
    *,
    batch_size: int | None = None,
    **keys: Any,
) -> ml_collections.ConfigDict:
    """The `train.*` block: the [`TrainSettings`][sciml.training.TrainSettings]
    a config holds, plus `batch_size`.

    Every `TrainSettings` field that is a number or a flag (`log_every`,
    `eval_every`, `checkpoint_every`, `keep_checkpoints`, `progress`,
    `check_batch`) is there, at the class's default unless `keys` sets it;
    other `keys` (the task's, e.g. `loss="h1"`) are added as they are, and
    `batch_size` unless it is None.
    """
    train = ml_collections.ConfigDict()
    train.steps = steps
    if batch_size is not None:
        train.batch_size = batch_size
    settings = {k: v for k, v in field_defaults(TrainSettings).items() if k in CONFIG_SETTINGS}
    train.update({**settings, **keys})
    return train


def optimizer_block(
    steps: int | ml_collections.FieldReference,
    *,
    learning_rate: float,
    **keys: Any,
) -> ml_collections.ConfigDict:
    """The `optimizer.*` block: every field of
    [`OptimizerSettings`][sciml.training.OptimizerSettings] (the keys of
    `sciml.training.make_optimizer`), at the class's default unless `keys`
    sets it.

    `decay_steps` is `steps` (pass the `FieldReference` of `train.steps` to link
    them), so a config choosing `schedule="cosine"` decays over its run.
    """
    values = {
        **field_defaults(OptimizerSettings),
        "learning_rate": learning_rate,
        "decay_steps": steps,
    }
    optimizer = ml_collections.ConfigDict()
    for key, value in {**values, **keys}.items():
        optimizer[key] = ml_collections.ConfigDict(value) if isinstance(value, dict) else value
    return optimizer


def base_config(
    name: str,
    task: str,
    *,
    steps: int,
    batch_size: int | None = None,
    learning_rate: float | None = None,
    seed: int = 0,
    train: dict[str, Any] | None = None,
    optimizer: dict[str, Any] | None = None,
) -> ml_collections.ConfigDict:
    """A config with the run keys and linked `train` / `optimizer` blocks.

    **Arguments:**

    - `name`: the run name (the folder under `runs/`).
    - `task`: the task module, a dotted module path or a `.py` path relative to
      the config file.
    - `steps`, `batch_size`, `learning_rate`: the values a training config
      sets; a task that trains no model gives neither `batch_size` nor
      `learning_rate`, and its config has no `optimizer` block.
    - `seed`: the PRNG seed of the run.
    - `train`, `optimizer`: further keys for [`train_block`][sciml.experiment.defaults.train_block]
      and [`optimizer_block`][sciml.experiment.defaults.optimizer_block].

    **Returns:** an unlocked `ml_collections.ConfigDict` with `name`, `task`,
    `seed`, `train.*` and `optimizer.*`; `optimizer.decay_steps` follows
    `train.steps`. A key the config does not set has its class's default, so
    a config with only a learning rate builds the optimiser
    `make_optimizer({"learning_rate": ...})` builds.
    """
    config = ml_collections.ConfigDict()
    config.name = name
    config.task = task
    config.seed = seed
    linked = ml_collections.FieldReference(steps)
    config.train = train_block(linked, batch_size=batch_size, **(train or {}))
    if learning_rate is not None:
        config.optimizer = optimizer_block(linked, learning_rate=learning_rate, **(optimizer or {}))
    elif optimizer:
        raise ValueError("`optimizer` keys need a `learning_rate`.")
    return config


def shrink_training(
    config: ml_collections.ConfigDict,
    *,
    steps: int,
    batch_size: int,
    log_every: int,
    eval_every: int,
    checkpoint_every: int,
    warmup_steps: int,
) -> None:
    """Sets the training keys of a seconds-long `tiny` run in place (no progress bar)."""
    config.train.steps = steps
    config.train.batch_size = batch_size
    config.train.log_every = log_every
    config.train.eval_every = eval_every
    config.train.checkpoint_every = checkpoint_every
    config.train.progress = False
    config.optimizer.warmup_steps = warmup_steps


def select_variant(
    config: ml_collections.ConfigDict,
    variant: str | None,
    **variants: Callable[[ml_collections.ConfigDict], None],
) -> ml_collections.ConfigDict:
    """Applies the named variant to `config` in place and returns it.

    **Arguments:**

    - `config`: the default config.
    - `variant`: the text after `:` in `--config FILE:variant`, or None.
    - `variants`: `name=function` pairs; each function changes the config in
      place (every config has `tiny=...`, which the test suite runs).

    **Raises:** `ValueError` naming the accepted variants for any other name.
    """
    if variant is None:
        return config
    if variant not in variants:
        accepted = ", ".join(repr(name) for name in variants)
        raise ValueError(f"unknown variant {variant!r}; accepted: {accepted}")
    variants[variant](config)
    return config
