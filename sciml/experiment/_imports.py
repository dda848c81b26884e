"""Importing a config or task module by dotted name, with a one-line error."""

from __future__ import annotations

import importlib
import importlib.util
from pathlib import Path
from types import ModuleType

from ._errors import ConfigError
from ._validate import did_you_mean


def import_dotted(ref: str, missing: str) -> ModuleType:
    """`importlib.import_module(ref)`; raises `ConfigError(missing)` when `ref`
    itself (or a parent package of it) does not exist, with the closest name of
    its package, or saying that its top-level package is not importable from
    the current directory. An import error raised inside the module is not
    hidden."""
    try:
        return importlib.import_module(ref)
    except ModuleNotFoundError as error:
        if error.name is None or not ref.startswith(error.name):
            raise
        top = ref.split(".")[0]
        if error.name == top and "." in ref:
            raise ConfigError(
                f"{missing.rstrip('.')}: its package {top!r} is not importable from "
                f"{Path.cwd()}; run from the folder that holds {top}/ (the checkout's root), "
                "add that folder to PYTHONPATH, or give a file path."
            ) from None
        raise ConfigError(missing.rstrip(".") + _sibling_hint(ref) + ".") from None


def _sibling_hint(ref: str) -> str:
    """Did-you-mean among the modules of `ref`'s package, when that package exists."""
    package = ref.rpartition(".")[0]
    try:
        spec = importlib.util.find_spec(package) if package else None
    except (ImportError, ValueError):
        spec = None
    if spec is None or not spec.submodule_search_locations:
        return ""
    folder = Path(next(iter(spec.submodule_search_locations)))
    return did_you_mean(ref, [f"{package}.{p.stem}" for p in folder.glob("*.py")])


def module_file(ref: str) -> str | None:
    """The file of module `ref` (found without running it), or None."""
    try:
        spec = importlib.util.find_spec(ref)
    except (ImportError, ValueError):
        return None
    return None if spec is None else spec.origin
