"""Checking a whole config before a run writes anything.

The runner checks the keys every config shares by building the typed objects
they describe (`train.*` a `TrainSettings`, `optimizer.*` an
`OptimizerSettings`; each checks itself, and the error is told with its
config key: [`build_block`][sciml.experiment.build_block]), then runs the
task's own checks (`Task(validate=...)`): each task builds its parts, or
declares the sizes and choices of its own with
[`check_config`][sciml.experiment.check_config].
All of it runs before the run directory is created, so a wrong value costs one
line (`error: config key 'train.log_every' must be an integer >= 1, got 0`)
and leaves nothing on disk.
"""

from __future__ import annotations

import dataclasses
import difflib
import numbers
import re
from collections.abc import Callable, Iterable, Mapping
from typing import Any, TypeVar

import ml_collections

from .._checks import is_int
from .._deprecated import renamed_hint
from ..training import TrainSettings
from ._errors import ConfigError


T = TypeVar("T")


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


def build_block(config: ml_collections.ConfigDict, block: str, build: Callable[[], T]) -> T:
    """`build()`: the typed object the block `block` of `config` describes,
    which checks itself; its error as a `ConfigError` naming the config keys
    (the setting it is about, `` `name` `` at its start, as `'block.name'`,
    and every other key of the block it names).

    **Raises:** [`ConfigError`][sciml.experiment.ConfigError].
    """
    try:
        return build()
    except (ValueError, TypeError) as error:
        message, keys = str(error), set(config[block].keys())
        named = re.match(r"`([\w.]+)`", message)
        if named is None:
            head, rest = f"config key {block!r}: ", message
        else:
            name = named.group(1)
            key = name if name.startswith(f"{block}.") else f"{block}.{name}"
            head, rest = f"config key {key!r}", message[named.end() :]
        rest = re.sub(r"`(\w+)`", lambda m: f"'{block}.{m[1]}'" if m[1] in keys else m[0], rest)
        raise ConfigError(head + rest) from None


#: The `TrainSettings` a config's `train` block holds: its numbers and flags.
CONFIG_SETTINGS = {
    field.name: field.type
    for field in dataclasses.fields(TrainSettings)
    if field.type in ("int", "bool")
}


def train_settings(config: ml_collections.ConfigDict, **settings: Any) -> TrainSettings:
    """The [`TrainSettings`][sciml.training.TrainSettings] that `config.train`
    holds (`train.steps`, `train.log_every`, `train.eval_every`,
    `train.checkpoint_every`, `train.keep_checkpoints`, and `train.progress`,
    `train.check_batch` if set), with `settings` (such as `workdir=`) added."""
    train = config.train
    values = {name: train[name] for name in CONFIG_SETTINGS if name in train}
    return TrainSettings(**{**values, **settings})


def check_shared_blocks(config: ml_collections.ConfigDict) -> None:
    """The `train.*` and `optimizer.*` blocks, checked by building the
    [`TrainSettings`][sciml.training.TrainSettings] and
    [`OptimizerSettings`][sciml.training.OptimizerSettings] they describe."""
    from sciml.training._optim import optimizer_settings

    build_block(config, "train", lambda: train_settings(config))
    if "batch_size" in config.train:
        check_config(config, positive=("train.batch_size",))
    if config.get("optimizer") is not None:
        build_block(config, "optimizer", lambda: optimizer_settings(config.optimizer))
