"""Checking a whole config before a run writes anything.

The runner checks the keys every config shares (`train.*` through the same
rules as `sciml.training.fit`, `optimizer.*` by building the optimiser with
`sciml.training.make_optimizer`), then calls the task module's
`validate_config(config)` when it defines one: each task declares the sizes
and choices of its own parts with [`check_config`][sciml.experiment.check_config].
All of it runs before the run directory is created, so a wrong value costs one
line (`error: config key 'train.log_every' must be an integer >= 1, got 0`)
and leaves nothing on disk.
"""

from __future__ import annotations

import difflib
import numbers
from collections.abc import Iterable, Mapping
from typing import Any

import ml_collections

from .._checks import is_int
from .._deprecated import renamed_hint
from ._errors import ConfigError


def did_you_mean(name: str, candidates: Iterable[str]) -> str:
    """`" (did you mean 'x'?)"` for the closest candidate, or `""` when none is close."""
    close = difflib.get_close_matches(str(name), [str(c) for c in candidates], n=1, cutoff=0.6)
    return f" (did you mean {close[0]!r}?)" if close else ""


def did_you_mean_key(
    node: Any, parents: list[str], part: str, renamed: Mapping[str, str] | None = None
) -> str:
    """The did-you-mean hint for a missing `part` below the keys `parents` of a config
    (a key in `renamed`, a task's `{old: new}`, names its new name)."""
    if not isinstance(node, ml_collections.ConfigDict):
        return ""
    prefix = "".join(f"{p}." for p in parents)
    hint = renamed_hint(renamed or {}, prefix + part)
    return hint or did_you_mean(prefix + part, [prefix + str(k) for k in node.keys()])


def config_value(config: ml_collections.ConfigDict, key: str) -> Any:
    """The value of a dotted `key`; a `ConfigError` naming it when it is missing."""
    node: Any = config
    parts = key.split(".")
    for i, part in enumerate(parts):
        if not isinstance(node, ml_collections.ConfigDict) or part not in node:
            raise ConfigError(
                f"config key {key!r} is missing{did_you_mean_key(node, parts[:i], part)} "
                "(see docs/experiments.md)."
            )
        node = node[part]
    return node


def _check_count(config: ml_collections.ConfigDict, key: str, low: int) -> None:
    value = config_value(config, key)
    values = value if isinstance(value, list | tuple) else [value]
    if not values or not all(is_int(v) and v >= low for v in values):
        what = "a list of integers" if isinstance(value, list | tuple) else "an integer"
        raise ConfigError(
            f"config key {key!r} must be {what} >= {low}, got {value!r} "
            f"(set it with --config.{key}=N)."
        )


def _check_number(config: ml_collections.ConfigDict, key: str) -> None:
    value = config_value(config, key)
    if not isinstance(value, numbers.Real) or isinstance(value, bool) or not value > 0:
        raise ConfigError(f"config key {key!r} must be a number > 0, got {value!r}.")


def check_choice(config: ml_collections.ConfigDict, key: str, accepted: Iterable[Any]) -> None:
    """Raises a `ConfigError` naming `key`, the accepted values and the closest one."""
    accepted = tuple(accepted)
    value = config_value(config, key)
    if value not in accepted:
        listed = ", ".join(repr(a) for a in accepted)
        raise ConfigError(
            f"config key {key!r} is {value!r}; accepted: {listed}"
            f"{did_you_mean(value, [str(a) for a in accepted])}."
        )


def check_config(
    config: ml_collections.ConfigDict,
    *,
    positive: Iterable[str] = (),
    non_negative: Iterable[str] = (),
    positive_numbers: Iterable[str] = (),
    choices: Mapping[str, Iterable[Any]] | None = None,
) -> None:
    """Checks the named keys of `config`; the first wrong one raises.

    **Arguments:**

    - `positive`: keys holding an integer >= 1 (or a non-empty list of them):
      sizes, counts, resolutions.
    - `non_negative`: keys holding an integer >= 0.
    - `positive_numbers`: keys holding a number > 0 (time steps, rates).
    - `choices`: `{key: accepted values}`.

    **Raises:** [`ConfigError`][sciml.experiment.ConfigError] naming the key,
    the value and what is accepted.
    """
    for key in positive:
        _check_count(config, key, 1)
    for key in non_negative:
        _check_count(config, key, 0)
    for key in positive_numbers:
        _check_number(config, key)
    for key, accepted in (choices or {}).items():
        check_choice(config, key, accepted)


def check_shared_blocks(config: ml_collections.ConfigDict) -> None:
    """The `train.*` keys (as `sciml.training.fit` needs them) and `optimizer.*`."""
    from sciml.training import make_optimizer
    from sciml.training._optim import DEFAULTS, OPTIMIZERS, SCHEDULES

    check_config(
        config,
        positive=("train.log_every", "train.keep_checkpoints"),
        non_negative=("train.steps", "train.eval_every", "train.checkpoint_every"),
    )
    if "batch_size" in config.train:
        check_config(config, positive=("train.batch_size",))
    optimizer = config.get("optimizer")
    if optimizer is None:
        return
    unknown = sorted(set(optimizer.keys()) - set(DEFAULTS))
    if unknown:
        raise ConfigError(
            f"config key 'optimizer.{unknown[0]}' is not an optimiser setting"
            f"{did_you_mean(unknown[0], DEFAULTS)}; accepted: {', '.join(sorted(DEFAULTS))}."
        )
    check_config(
        config,
        choices={
            key: accepted
            for key, accepted in (("optimizer.name", OPTIMIZERS), ("optimizer.schedule", SCHEDULES))
            if key.split(".")[1] in optimizer
        },
    )
    if int(config.train.steps) == 0:  # no optimiser step: the schedule is never built
        return
    try:  # the label function only matters once parameters exist
        make_optimizer(optimizer, label_fn=lambda params: params)
    except (ValueError, TypeError) as error:
        message = str(error).replace("`", "'")
        prefix = "config key " if message.startswith("'optimizer.") else "config key 'optimizer': "
        raise ConfigError(prefix + message) from None
