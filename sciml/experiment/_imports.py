"""Importing a config or task module by dotted name, with a one-line error."""

from __future__ import annotations

import importlib
from types import ModuleType

from ._errors import ConfigError


def import_dotted(ref: str, missing: str) -> ModuleType:
    """`importlib.import_module(ref)`; raises `ConfigError(missing)` when `ref`
    itself (or a parent package of it) does not exist. An import error raised
    inside the module is not hidden."""
    try:
        return importlib.import_module(ref)
    except ModuleNotFoundError as error:
        if error.name is None or not ref.startswith(error.name):
            raise
        raise ConfigError(missing) from None
