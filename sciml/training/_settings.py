"""The settings of training: the loop's (`TrainSettings`) and the optimiser's
(`OptimizerSettings`).

Each default of training is written once, here: `fit` and `train_online` take
one `TrainSettings` (`settings=`), `make_optimizer` fills what its config does
not set from `OptimizerSettings`, and the runner's config blocks
(`sciml.experiment.defaults`) are built from these two classes. A new option
is a new field here and nothing else.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import numpy as np

from .._checks import check_int, check_positive_int


@dataclasses.dataclass(frozen=True)
class TrainSettings:
    """The plain-value options of a training loop (see [`fit`][sciml.training.fit]).

    - `steps`: optimiser steps in total (an int >= 0; a resumed run counts the
      steps done before).
    - `workdir`: the run directory (`checkpoints/`, `metrics.jsonl`); `None`
      keeps nothing on disk.
    - `checkpoint_every`: steps between checkpoints (0: only at the end and
      when interrupted).
    - `keep_checkpoints`: how many checkpoints to keep (>= 1).
    - `log_every`: steps between training records (>= 1).
    - `eval_every`: steps between evaluations (0: only at the end).
    - `progress`: show a progress bar.
    - `fingerprint`: names the run; a checkpoint folder of another run is refused.
    - `description`: the progress bar's and the resume message's label.
    - `run_config`: JSON data stored with each checkpoint (rebuilds the model).
    - `check_batch`: refuse a batch holding NaN or Inf.
    """

    steps: int
    workdir: str | Path | None = None
    checkpoint_every: int = 0
    keep_checkpoints: int = 3
    log_every: int = 10
    eval_every: int = 0
    progress: bool = True
    fingerprint: dict | None = None
    description: str = "train"
    run_config: dict | None = None
    check_batch: bool = True

    def __post_init__(self):
        check_int("steps", self.steps, minimum=0)
        check_int("checkpoint_every", self.checkpoint_every, minimum=0)
        check_int("eval_every", self.eval_every, minimum=0)
        check_positive_int("log_every", self.log_every)
        check_positive_int("keep_checkpoints", self.keep_checkpoints)
        for name in ("progress", "check_batch"):  # `progress="no"` would show the bar
            value = getattr(self, name)
            if not isinstance(value, bool | np.bool_):
                raise TypeError(f"`{name}` must be True or False, got {value!r}.")


@dataclasses.dataclass(frozen=True)
class OptimizerSettings:
    """The optimiser's settings: the keys of [`make_optimizer`][sciml.training.make_optimizer]
    and their defaults (a constant-rate Adam, no clipping).

    - `name`: `"adam"`, `"adamw"` or `"sgd"`.
    - `learning_rate`: the peak rate (> 0).
    - `weight_decay`: decoupled (`adamw`) or added to the gradient (`sgd`), >= 0.
    - `b1`, `b2`, `eps`: Adam's moments and stabiliser.
    - `momentum`, `nesterov`: SGD's momentum (0 turns it off).
    - `schedule`: `"constant"`, `"cosine"` or `"step"`, after `warmup_steps`
      of linear warm-up from 0 (see [`make_schedule`][sciml.training.make_schedule]).
    - `decay_steps`, `end_factor`: the cosine's length and final fraction.
    - `boundaries`, `decay_factor`: the step schedule's steps and factor.
    - `clip_norm`: global-norm clipping of the gradient (0 turns it off).
    - `groups`: `{label: {key: value}}` overrides for labelled parameters.

    Values are checked when the optimiser is built, each error naming its key.
    """

    name: str = "adam"
    learning_rate: float = 1e-3
    weight_decay: float = 0.0
    b1: float = 0.9
    b2: float = 0.999
    eps: float = 1e-8
    momentum: float = 0.9
    nesterov: bool = False
    schedule: str = "constant"
    warmup_steps: int = 0
    decay_steps: int = 1000
    end_factor: float = 0.0
    boundaries: tuple[int, ...] = ()
    decay_factor: float = 0.1
    clip_norm: float = 0.0
    groups: dict[str, dict[str, Any]] = dataclasses.field(default_factory=dict)


def field_defaults(cls: type) -> dict[str, Any]:
    """`{field: default}` of a settings class (fields without one left out)."""
    out = {}
    for field in dataclasses.fields(cls):
        if field.default is not dataclasses.MISSING:
            out[field.name] = field.default
        elif field.default_factory is not dataclasses.MISSING:
            out[field.name] = field.default_factory()
    return out


def check_settings(settings: Any) -> TrainSettings:
    """`settings` if it is a `TrainSettings`, else a `TypeError` showing one."""
    if not isinstance(settings, TrainSettings):
        raise TypeError(
            "`settings` must be a `TrainSettings`, such as "
            f"`settings=TrainSettings(steps=100)`, got {type(settings).__name__}."
        )
    return settings
