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
import math
import numbers
from pathlib import Path
from typing import Any

import numpy as np

from .._checks import check_choice, check_int, check_real, is_int


OPTIMIZERS = ("adam", "adamw", "sgd")
SCHEDULES = ("constant", "cosine", "step")
#: The keys a parameter group of `OptimizerSettings.groups` may override.
GROUP_KEYS = ("learning_rate", "weight_decay", "schedule", "warmup_steps", "end_factor")


@dataclasses.dataclass(frozen=True)
class TrainSettings:
    """The plain-value options of a training loop (see [`fit`][sciml.training.fit]).

    - `steps`: optimiser steps in total (an int >= 0; a resumed run counts the
      steps done before).
    - `workdir`: the run directory (`checkpoints/`, `metrics.jsonl`, the
      TensorBoard events); `None`
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
        check_int("log_every", self.log_every, minimum=1)
        check_int("keep_checkpoints", self.keep_checkpoints, minimum=1)
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

    Each value is checked here, once, with an error naming its key
    (`optimizer.<key>`) and the accepted values: numbers must be numbers (not
    strings), `b1`, `b2` and `momentum` in `[0, 1)`, `eps`, `weight_decay`
    and `clip_norm` >= 0, and so on; a key only one choice of `name` or
    `schedule` reads is checked when it is read.
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

    def __post_init__(self):
        check_choice("optimizer.name", self.name, OPTIMIZERS)
        check_choice("optimizer.schedule", self.schedule, SCHEDULES)
        check_real("optimizer.learning_rate", self.learning_rate, positive=True)
        check_int("optimizer.warmup_steps", self.warmup_steps, minimum=0)
        if self.schedule == "cosine":
            check_int("optimizer.decay_steps", self.decay_steps, minimum=1)
            _check_interval(self, "end_factor", 0.0, 1.0)
        if self.schedule == "step":
            _check_interval(self, "decay_factor", 0.0, 1.0)
            if self.decay_factor == 0.0:
                raise ValueError("`optimizer.decay_factor` must be in (0, 1], got 0.0.")
            _check_boundaries(self.boundaries)
        _check_interval(self, "weight_decay", 0.0, math.inf)
        if self.name in ("adam", "adamw"):
            for name in ("b1", "b2"):
                _check_interval(self, name, 0.0, 1.0, closed_hi=False)
            _check_interval(self, "eps", 0.0, math.inf)
        if self.name == "adam" and self.weight_decay > 0:
            raise ValueError(
                "optimizer.weight_decay > 0 needs name='adamw' (decoupled decay) or 'sgd'; "
                f"got name='adam' with weight_decay={self.weight_decay}."
            )
        if self.name == "sgd":
            _check_interval(self, "momentum", 0.0, 1.0, closed_hi=False)
            if not isinstance(self.nesterov, bool):
                raise ValueError(
                    f"`optimizer.nesterov` must be True or False, got {self.nesterov!r}."
                )
        _check_interval(self, "clip_norm", 0.0, math.inf)
        for label, overrides in self.groups.items():
            bad = sorted(set(overrides) - set(GROUP_KEYS))
            if bad:
                raise ValueError(
                    f"optimizer.groups.{label} has unknown keys {bad}; accepted: {list(GROUP_KEYS)}."
                )
            self.group(label)  # its settings check themselves

    def group(self, label: str) -> OptimizerSettings:
        """The settings of the parameters labelled `label`: these, with the
        group's overrides."""
        return dataclasses.replace(self, groups={}, **self.groups[label])


def _check_interval(
    settings: OptimizerSettings, name: str, lo: float, hi: float, *, closed_hi: bool = True
) -> None:
    """`settings.<name>` is a number in `[lo, hi]` (or `[lo, hi)`), else a one-line error."""
    value = getattr(settings, name)
    interval = f"[{lo:g}, {hi:g}{']' if closed_hi else ')'}".replace("inf]", "inf)")
    ok = not isinstance(value, bool) and isinstance(value, numbers.Real)
    if ok:
        inside = lo <= value and (value <= hi if closed_hi else value < hi)
        ok = inside and math.isfinite(value)
    if not ok:
        raise ValueError(f"`optimizer.{name}` must be a number in {interval}, got {value!r}.")


def _check_boundaries(boundaries: Any) -> None:
    if not all(is_int(b) for b in boundaries):
        raise ValueError(
            f"`optimizer.boundaries` must be increasing positive integer steps, got {boundaries!r}."
        )
    steps = [int(b) for b in boundaries]
    if sorted(set(steps)) != steps or any(b <= 0 for b in steps):
        raise ValueError(f"`optimizer.boundaries` must be increasing positive steps, got {steps}.")


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
