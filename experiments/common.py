"""What the experiment runner and the task modules share."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from pathlib import Path
from typing import Any

import equinox as eqx
import jax
import numpy as np


@dataclasses.dataclass
class Experiment:
    """One model trained by the standard loop (see docs/experiments.md).

    - `model`: the initial Equinox module.
    - `loss_fn(model, batch, key) -> (loss, aux)`: `aux` a dict of scalars.
    - `batch_fn(step, key) -> batch`: a pure function of its arguments, so a
      resumed run sees the same batches as an uninterrupted one.
    - `evaluate(model) -> dict[str, float]`: held-out metrics; the final ones go
      into `summary.json`.
    - `plot(model, plot_dir)`: writes PNG files into `plot_dir`.
    - `label_fn`: parameter-group labels for `sciml.training.make_optimizer`.
    """

    model: Any
    loss_fn: Callable[[Any, Any, jax.Array], tuple[jax.Array, dict]]
    batch_fn: Callable[[int, jax.Array], Any]
    evaluate: Callable[[Any], dict[str, float]] | None = None
    plot: Callable[[Any, Path], None] | None = None
    label_fn: Callable[[Any], Any] | None = None


def count_params(model: Any) -> int:
    """Number of trainable scalars (complex counts as two) in `model`."""
    leaves = jax.tree_util.tree_leaves(eqx.filter(model, eqx.is_inexact_array))
    return int(sum(x.size * (2 if np.iscomplexobj(x) else 1) for x in leaves))


def train_kwargs(config: Any) -> dict[str, Any]:
    """The `sciml.training.fit` keyword arguments held in `config.train`."""
    train = config.train
    return {
        "steps": int(train.steps),
        "log_every": int(train.log_every),
        "eval_every": int(train.eval_every),
        "checkpoint_every": int(train.checkpoint_every),
        "keep_checkpoints": int(train.keep_checkpoints),
        "progress": bool(train.get("progress", True)),
    }


def fingerprint(config: Any) -> dict[str, str]:
    """Names a run's checkpoints, so another experiment's are never loaded."""
    return {"name": str(config.name), "task": str(config.task)}
