"""Command-line overrides `--config.KEY=VALUE` of a locked `ml_collections.ConfigDict`.

`ml_collections.config_flags` does the same through absl flags; the runner keeps
this small parser instead, so that it needs no global flag registry, can be
called in-process with an `argv` list, and can replay the overrides recorded in
a run directory when the run is resumed.
"""

from __future__ import annotations

import ast
from collections.abc import Mapping
from typing import Any

import ml_collections

from ._errors import ConfigError
from ._validate import did_you_mean_key


def parse_value(raw: str, current: Any) -> Any:
    """Parses `raw` as a value of the type of `current` (the key's present value).

    Strings stay strings; booleans accept `true/false/1/0/yes/no`; other values
    are Python literals (`1e-3`, `(16, 16)`); an int given for a float key
    becomes a float, a list for a tuple key a tuple. A value of another type
    raises `ValueError`.
    """
    if isinstance(current, str):
        return raw
    if isinstance(current, bool):
        if raw.lower() in ("true", "1", "yes"):
            return True
        if raw.lower() in ("false", "0", "no"):
            return False
        raise ValueError(f"expected a boolean, got {raw!r}")
    try:
        value = ast.literal_eval(raw)
    except (ValueError, SyntaxError):
        value = raw
    if isinstance(current, float) and isinstance(value, int) and not isinstance(value, bool):
        value = float(value)
    if isinstance(current, tuple) and isinstance(value, list):
        value = tuple(value)
    if current is not None and not isinstance(value, type(current)):
        raise ValueError(f"expected {type(current).__name__}, got {raw!r}")
    return value


def apply_overrides(
    config: ml_collections.ConfigDict,
    overrides: list[tuple[str, str]],
    renamed: Mapping[str, str] | None = None,
) -> None:
    """Sets `(key, value)` pairs (dotted keys) in place; unknown keys and wrong
    types raise (a key in `renamed`, the task's `{old: new}`, names the new one).

    Setting a key that holds an `ml_collections.FieldReference` sets the
    reference, so every field linked to it (e.g. `optimizer.decay_steps` to
    `train.steps`) follows.

    **Raises:** [`ConfigError`][sciml.experiment.ConfigError] naming the key.
    """
    for key, raw in overrides:
        *parents, leaf = key.split(".")
        node = config
        for i, part in enumerate(parents):
            if not isinstance(node, ml_collections.ConfigDict) or part not in node:
                hint = did_you_mean_key(node, parents[:i], part, renamed)
                raise ConfigError(
                    f"--config.{key}: unknown key {'.'.join(parents[: i + 1])!r}{hint}."
                )
            node = node[part]
        if not isinstance(node, ml_collections.ConfigDict) or leaf not in node:
            hint = did_you_mean_key(node, parents, leaf, renamed)
            raise ConfigError(f"--config.{key}: unknown key {key!r}{hint}.")
        try:
            node[leaf] = parse_value(raw, node[leaf])
        except (ValueError, TypeError) as error:
            raise ConfigError(f"--config.{key}: wrong type: {error}.") from None


def split_overrides(extra: list[str]) -> list[tuple[str, str]]:
    """`["--config.a.b=1", "--config.c", "x"]` -> `[("a.b", "1"), ("c", "x")]`."""
    overrides, i = [], 0
    while i < len(extra):
        arg = extra[i]
        if not arg.startswith("--config."):
            raise ConfigError(f"unrecognised argument {arg!r}; overrides look like --config.KEY=V.")
        key, eq, value = arg[len("--config.") :].partition("=")
        if not eq:
            if i + 1 >= len(extra):
                raise ConfigError(f"{arg}: missing value.")
            value, i = extra[i + 1], i + 1
        overrides.append((key, value))
        i += 1
    return overrides
