"""Task modules: resolved from a dotted module path or a `.py` file path.

A task module defines `train_and_evaluate(config, workdir) -> summary` (the
shape of flax's examples). The config's `task` key names it either as a dotted
module path (`experiments.tasks.quickstart`, importable from `sys.path`) or as
a file path (`my_task.py`, `../tasks/heat.py`); a relative file path is
resolved against the config file's directory, so a config file and its task
can live together anywhere on disk.
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import sys
from pathlib import Path
from types import ModuleType

from ._errors import ConfigError, describe_raised
from ._imports import import_dotted


def is_file_task(task: str) -> bool:
    """Whether `task` names a file (ends in `.py` or holds a path separator)."""
    return task.endswith(".py") or "/" in task or "\\" in task


def task_name(task: str) -> str:
    """The short name of a task: the file's stem or the module's last component.

    Checkpoints and run directories are named by it, so moving a task module
    (or renaming `quickstart` to `experiments.tasks.quickstart`) keeps old runs
    resumable.
    """
    return Path(task).stem if is_file_task(task) else task.rsplit(".", 1)[-1]


def _load_file(path: Path) -> ModuleType:
    digest = hashlib.sha1(str(path).encode()).hexdigest()[:10]
    name = f"_sciml_task_{path.stem}_{digest}"
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # before running it: dataclasses look themselves up
    try:
        spec.loader.exec_module(module)
    except BaseException:
        del sys.modules[name]
        raise
    return module


def resolve_task(task: str, directory: str | Path | None = None) -> ModuleType:
    """Imports the task module named by a config's `task` key.

    **Arguments:**

    - `task`: a dotted module path or a `.py` file path.
    - `directory`: what a relative file path is relative to (the config file's
      folder); the current directory when None.

    **Returns:** the module; it defines `train_and_evaluate(config, workdir)`.

    **Raises:** [`ConfigError`][sciml.experiment.ConfigError] when there is no
    such module, importing it raises (one line: the exception and the line of
    the task file it came from) or it defines no `train_and_evaluate`.
    """
    task = str(task)
    if is_file_task(task):
        path = Path(task)
        if not path.is_absolute():
            path = Path(directory or Path.cwd()) / path
        path = path.resolve()
        if not path.is_file():
            raise ConfigError(
                f"config key 'task': no task module file {str(path)!r} (a relative path is "
                "resolved against the config file's directory)."
            )
        try:
            module = _load_file(path)
        except Exception as error:  # noqa: BLE001 - the task's own code: one line
            raise ConfigError(
                f"config key 'task': {path}: {describe_raised(error, path)}"
            ) from None
    else:
        module = import_dotted(
            task,
            f"config key 'task': no task module {task!r}; give a dotted module path "
            "(e.g. 'experiments.tasks.quickstart') or a .py file path.",
            "config key 'task'",
        )
    if not callable(getattr(module, "train_and_evaluate", None)):
        raise ConfigError(
            f"task module {module.__name__} defines no train_and_evaluate(config, workdir) "
            "(see docs/experiments.md)."
        )
    return module
