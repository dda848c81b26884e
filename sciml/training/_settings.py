"""How a training loop runs: the settings `fit` and the trainers built on it share.

[`TrainSettings`][sciml.training.TrainSettings] holds every option of the
loop that is a plain value (steps, checkpoints, logging, evaluation cadence,
run naming), checked once when it is built. `fit` and `train_online` take one
(`settings=`) or the same options as keywords, so a new option is a new field
here and nothing else: both accept it, and a trainer built on `fit` forwards
the settings as one object.
"""

from __future__ import annotations

import dataclasses
import difflib
from pathlib import Path
from typing import Any

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

    @classmethod
    def build(cls, settings: TrainSettings | None = None, **options: Any) -> TrainSettings:
        """`settings` with `options` (field names) replaced, or new settings
        from `options` alone (then `steps` is required). An unknown option is a
        `TypeError` that names the settings accepted."""
        names = [field.name for field in dataclasses.fields(cls)]
        for name in options:
            if name not in names:
                close = difflib.get_close_matches(name, names, n=1)
                hint = f" Did you mean `{close[0]}`?" if close else ""
                raise TypeError(
                    f"`{name}` is not a training setting.{hint} The settings are: "
                    f"{', '.join(names)}."
                )
        if settings is None:
            if "steps" not in options:
                raise TypeError(
                    "`steps` is required: pass `steps=...` or `settings=TrainSettings(steps=...)`."
                )
            return cls(**options)
        if not isinstance(settings, TrainSettings):
            raise TypeError(
                f"`settings` must be a `TrainSettings` or None, got {type(settings).__name__}."
            )
        return dataclasses.replace(settings, **options)
