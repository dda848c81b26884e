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

`train.steps` is an `ml_collections.FieldReference` shared with
`optimizer.decay_steps`, so overriding the number of steps (also when a run is
resumed) stretches the cosine schedule with it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import ml_collections


def train_block(
    steps: int | ml_collections.FieldReference,
    *,
    batch_size: int,
    log_every: int = 50,
    eval_every: int = 500,
    checkpoint_every: int = 500,
    keep_checkpoints: int = 2,
    progress: bool = True,
    **extra: Any,
) -> ml_collections.ConfigDict:
    """The `train.*` block: the arguments of `sciml.training.fit`, plus `batch_size`.

    `extra` keys (e.g. `loss="h1"`) are added as they are.
    """
    train = ml_collections.ConfigDict()
    train.steps = steps
    train.batch_size = batch_size
    train.update(extra)
    train.log_every = log_every
    train.eval_every = eval_every
    train.checkpoint_every = checkpoint_every
    train.keep_checkpoints = keep_checkpoints
    train.progress = progress
    return train


def optimizer_block(
    steps: int | ml_collections.FieldReference,
    *,
    learning_rate: float,
    name: str = "adam",
    schedule: str = "cosine",
    warmup_steps: int = 100,
    clip_norm: float = 1.0,
    **extra: Any,
) -> ml_collections.ConfigDict:
    """The `optimizer.*` block (keys of `sciml.training.make_optimizer`).

    `decay_steps` is `steps` (pass the `FieldReference` of `train.steps` to link
    them). `extra` keys (`weight_decay`, `end_factor`, `groups`, ...) are added
    as they are.
    """
    optimizer = ml_collections.ConfigDict()
    optimizer.name = name
    optimizer.learning_rate = learning_rate
    optimizer.schedule = schedule
    optimizer.warmup_steps = warmup_steps
    optimizer.decay_steps = steps
    optimizer.clip_norm = clip_norm
    for key, value in extra.items():
        optimizer[key] = ml_collections.ConfigDict(value) if isinstance(value, dict) else value
    return optimizer


def base_config(
    name: str,
    task: str,
    *,
    steps: int,
    batch_size: int,
    learning_rate: float,
    seed: int = 0,
    train: dict[str, Any] | None = None,
    optimizer: dict[str, Any] | None = None,
) -> ml_collections.ConfigDict:
    """A config with the run keys and linked `train` / `optimizer` blocks.

    **Arguments:**

    - `name`: the run name (the folder under `runs/`).
    - `task`: the task module, a dotted module path or a `.py` path relative to
      the config file.
    - `steps`, `batch_size`, `learning_rate`: the values every config sets.
    - `seed`: the PRNG seed of the run.
    - `train`, `optimizer`: further keys for [`train_block`][sciml.experiment.defaults.train_block]
      and [`optimizer_block`][sciml.experiment.defaults.optimizer_block].

    **Returns:** an unlocked `ml_collections.ConfigDict` with `name`, `task`,
    `seed`, `train.*` and `optimizer.*`; `optimizer.decay_steps` follows
    `train.steps`.
    """
    config = ml_collections.ConfigDict()
    config.name = name
    config.task = task
    config.seed = seed
    linked = ml_collections.FieldReference(steps)
    config.train = train_block(linked, batch_size=batch_size, **(train or {}))
    config.optimizer = optimizer_block(linked, learning_rate=learning_rate, **(optimizer or {}))
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
