"""Tasks: what a task module declares, resolved from a dotted module path or a
`.py` file path.

A task module declares one [`Task`][sciml.experiment.Task]:

    TASK = Task(train_and_evaluate, validate=validate_config, headline=HEADLINE,
                data_parallel=True)

around its `train_and_evaluate(config, workdir) -> summary` (the shape of
flax's examples); a module that defines only `train_and_evaluate` is the task
`Task(train_and_evaluate)`. The config's `task` key names the module either as
a dotted module path (`experiments.tasks.quickstart`, importable from
`sys.path`) or as a file path (`my_task.py`, `../tasks/heat.py`); a relative
file path is resolved against the config file's directory, so a config file
and its task can live together anywhere on disk. The runner resolves the task
once and reads its fields.
"""

from __future__ import annotations

import dataclasses
import hashlib
import importlib
import importlib.util
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from types import MappingProxyType, ModuleType
from typing import Any

import ml_collections

from .._deprecated import refuse_old_task_protocol, refuse_renamed_keys
from ..distributed import equal_share
from ._errors import ConfigError, describe_raised
from ._imports import import_dotted
from ._verdict import Headline


@dataclasses.dataclass(frozen=True)
class Task:
    """What a task module declares, once, as `TASK = Task(...)`.

    **Arguments:**

    - `train_and_evaluate(config, workdir) -> summary`: the experiment.
    - `validate(config)`: the task's own checks of its config (the sizes and
      choices of its data, model and solver; see
      [`check_config`][sciml.experiment.check_config]), run by the runner
      before anything is written; a `ValueError`, `TypeError` or `KeyError`
      it raises becomes a `ConfigError` naming the task.
    - `headline`: the [`Headline`][sciml.experiment.Headline] a run ends with.
    - `data_parallel`: the task trains through
      [`train_experiment`][sciml.experiment.train_experiment] or the online
      trainer, which split each batch over processes, so `--processes N`
      may run it; a task running a loop of its own leaves it False.
    - `renamed_keys`: `{old key: new key}` of this task's config keys that
      were renamed; a config holding an old key is refused with the new name.
    - `build(config)`: the task's [`Experiment`][sciml.experiment.Experiment]
      (its `model` is what [`load_run`][sciml.experiment.load_run] rebuilds
      a trained model into), for tasks that train one model.
    """

    train_and_evaluate: Callable[[ml_collections.ConfigDict, Path], dict[str, Any]]
    validate: Callable[[ml_collections.ConfigDict], None] | None = None
    headline: Headline | None = None
    data_parallel: bool = False
    renamed_keys: Mapping[str, str] = dataclasses.field(default_factory=dict)
    build: Callable[[ml_collections.ConfigDict], Any] | None = None

    def __post_init__(self):
        for name in ("train_and_evaluate", "validate", "build"):
            value = getattr(self, name)
            if not callable(value) and (name == "train_and_evaluate" or value is not None):
                raise TypeError(f"Task: `{name}` must be a function, got {type(value).__name__}.")
        if self.headline is not None and not isinstance(self.headline, Headline):
            raise TypeError(
                "Task: `headline` must be a sciml.experiment.Headline, "
                f"got {type(self.headline).__name__}."
            )
        if not isinstance(self.data_parallel, bool):
            raise TypeError(
                f"Task: `data_parallel` must be True or False, got {self.data_parallel!r}."
            )
        object.__setattr__(self, "renamed_keys", MappingProxyType(dict(self.renamed_keys)))

    def check(self, config: ml_collections.ConfigDict) -> None:
        """Refuses renamed keys, then runs `validate(config)`.

        **Raises:** [`ConfigError`][sciml.experiment.ConfigError].
        """
        refuse_renamed_keys(config, self.renamed_keys, ConfigError)
        if self.validate is None:
            return
        try:
            self.validate(config)
        except ConfigError:
            raise
        except (ValueError, TypeError, KeyError) as error:
            raise ConfigError(f"task {config.task}: {error}") from None

    def check_processes(self, config: ml_collections.ConfigDict, count: int) -> None:
        """Refuses to train `config` on `count` > 1 processes unless the task is
        `data_parallel` and `train.batch_size` splits into equal shares.

        **Raises:** [`ConfigError`][sciml.experiment.ConfigError].
        """
        if count <= 1:
            return
        if not self.data_parallel:
            raise ConfigError(
                f"task {config.task} cannot train on {count} processes: it does not declare "
                "Task(..., data_parallel=True) (only tasks that train through "
                "sciml.experiment.train_experiment or the online trainer split their batches "
                "over processes; this one runs a loop of its own). Run it on one process "
                "(drop --processes)."
            )
        batch_size = config.get("train", {}).get("batch_size")
        if batch_size is not None:
            try:
                equal_share(int(batch_size), count, "train.batch_size")
            except ValueError as error:
                raise ConfigError(
                    f"config key 'train.batch_size': {error} (--processes {count}; set it with "
                    "--config.train.batch_size=...)"
                ) from None


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


def resolve_task(task: str, directory: str | Path | None = None) -> Task:
    """Imports the task module named by a config's `task` key and returns its
    [`Task`][sciml.experiment.Task].

    **Arguments:**

    - `task`: a dotted module path or a `.py` file path.
    - `directory`: what a relative file path is relative to (the config file's
      folder); the current directory when None.

    **Returns:** the module's `TASK`, or `Task(train_and_evaluate)` for a
    module that defines only `train_and_evaluate`.

    **Raises:** [`ConfigError`][sciml.experiment.ConfigError] when there is no
    such module, importing it raises (one line: the exception and the line of
    the task file it came from), or it declares no task.
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
    return task_of(module)


def task_of(module: ModuleType) -> Task:
    """The [`Task`][sciml.experiment.Task] a module declares as `TASK`, or
    `Task(train_and_evaluate)` for a module that defines only that function."""
    names = vars(module)
    declared = names.get("TASK")
    if isinstance(declared, Task):
        return declared
    if declared is not None:
        raise ConfigError(
            f"task module {module.__name__}: TASK must be a sciml.experiment.Task, "
            f"got {type(declared).__name__}."
        )
    refuse_old_task_protocol(module.__name__, names, ConfigError)
    train_and_evaluate = names.get("train_and_evaluate")
    if not callable(train_and_evaluate):
        raise ConfigError(
            f"task module {module.__name__} declares no TASK = Task(train_and_evaluate, ...) "
            "and defines no train_and_evaluate(config, workdir) (see docs/experiments.md)."
        )
    return Task(train_and_evaluate)
