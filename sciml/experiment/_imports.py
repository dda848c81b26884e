"""Importing a config or task module by dotted name, with a one-line error."""

from __future__ import annotations

import importlib
import importlib.util
from pathlib import Path
from types import ModuleType

from ._errors import ConfigError, describe_raised
from ._validate import did_you_mean


def import_dotted(ref: str, missing: str, who: str) -> ModuleType:
    """`importlib.import_module(ref)`, every failure a one-line `ConfigError`:
    `missing` when `ref` itself (or a parent package of it) does not exist, with
    the closest name of its package, or saying that its top-level package is not
    importable from the current directory; an exception raised by the module's
    own code as `"{who}: {ref}: <type> at line N: <message>"`."""
    try:
        return importlib.import_module(ref)
    except ModuleNotFoundError as error:
        if error.name is not None and ref.startswith(error.name):
            raise _missing(ref, missing, error.name) from None
        raised = error
    except Exception as error:  # noqa: BLE001 - the module's own code: one line
        raised = error
    raise ConfigError(f"{who}: {ref}: {describe_raised(raised, _module_file(ref))}") from None


def _missing(ref: str, missing: str, name: str) -> ConfigError:
    """The error for a `ref` whose module (or package `name`) does not exist."""
    top = ref.split(".")[0]
    if name == top and "." in ref:
        return ConfigError(
            f"{missing.rstrip('.')}: its package {top!r} is not importable from "
            f"{Path.cwd()}; run from the folder that holds {top}/ (the checkout's root), "
            "add that folder to PYTHONPATH, or give a file path."
        )
    return ConfigError(missing.rstrip(".") + _sibling_hint(ref) + ".")


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


def _module_file(ref: str) -> str | None:
    """The file of module `ref` (found without running it), or None."""
    try:
        spec = importlib.util.find_spec(ref)
    except (ImportError, ValueError):
        return None
    return None if spec is None else spec.origin
