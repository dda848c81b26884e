"""Every migration guard of the package, each with the release that removes it.

A guard turns a call, a name or a config written for an older version into an
error that shows the new form (or, for a moved name, keeps the old import
working). They live here only, as equinox keeps its guards in one module, so
that a release can drop what it promised to drop by reading one file.

| guard | since | removed in |
| --- | --- | --- |
| settings given as keywords (`fit(..., steps=100)`): `settings_module_only` | 0.1.0 | 0.2.0 |
| `DCDM(direction_fn)`: the generator given to the settings module | 0.1.0 | 0.2.0 |
| `ProcessGroup`, `initialize_processes` from `sciml.training` (now `sciml.distributed`): `MOVED` | 0.1.0 | 0.2.0 |
| `sciml.training.sigterm_as_interrupt` (`fit` handles SIGTERM itself): `REMOVED` | 0.1.0 | 0.2.0 |
| a task module's `DATA_PARALLEL`, `HEADLINE`, `validate_config` without a `TASK`: `refuse_old_task_protocol` | 0.1.0 | 0.2.0 |
| a task's renamed config keys (`study.solver` -> `study.simulation`, declared by the online tasks): `refuse_renamed_keys` | 0.1.0 | 0.2.0 |
| `online/rank-<r>/` folders of runs written before "process" was the word: `rank_folder` | 0.1.0 | 0.2.0 |
| `Elasticity2D.scene("stretch")` (now `"roller_stretch"`; the paper's is `"clamped_stretch"`): `refuse_renamed_scene` | 0.1.0 | 0.2.0 |

Imports the standard library only.
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any


#: The release that drops every guard of this module.
REMOVED_IN = "0.2.0"

#: Public names that moved: `{(old module, name): new module}`; the old module
#: still re-exports each (a test checks both give the same object).
MOVED = {
    ("sciml.training", "ProcessGroup"): "sciml.distributed",
    ("sciml.training", "initialize_processes"): "sciml.distributed",
}

#: Public names that were removed: `{(module, name): what to do instead}`.
REMOVED = {
    ("sciml.training", "sigterm_as_interrupt"): (
        "`fit` (and every loop of the package) takes SIGTERM as it takes Ctrl-C: "
        "drop the `with sigterm_as_interrupt():` block"
    ),
}


def removed_names(module: str) -> Callable[[str], Any]:
    """A module `__getattr__` that names the replacement of a name in `REMOVED`."""

    def __getattr__(name: str) -> Any:
        if (module, name) in REMOVED:
            raise AttributeError(
                f"{module}.{name} was removed: {REMOVED[module, name]} "
                f"(this message goes in {REMOVED_IN})."
            )
        raise AttributeError(f"module {module!r} has no attribute {name!r}")

    return __getattr__


def settings_module_only(settings_class: type, argument: str, call: str):
    """A decorator for a routine that takes its settings as one dataclass
    module (`argument`, a `settings_class`): the settings given as keywords
    instead (`steps=100`, the call shape the routine no longer takes) are a
    `TypeError` that shows `call` (e.g. `"fit(..., settings={module})"`) with
    the module that holds them, `Class(steps=100)`, or, beside a module
    already given, `dataclasses.replace(<argument>, steps=100)`. A name that is
    no setting is left to Python's own error."""
    fields = {field.name for field in dataclasses.fields(settings_class)}

    def decorate(function):
        signature = inspect.signature(function)

        @functools.wraps(function)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            old = [k for k in kwargs if k not in signature.parameters and k in fields]
            if old:
                known = {k: v for k, v in kwargs.items() if k in signature.parameters}
                given = signature.bind_partial(*args, **known).arguments.get(argument)
                shown = ", ".join(f"{name}={kwargs[name]!r}" for name in old)
                module = (
                    f"{settings_class.__name__}({shown})"
                    if given is None
                    else f"dataclasses.replace({argument}, {shown})"
                )
                raise TypeError(
                    f"`{function.__name__}` takes its settings as one "
                    f"{settings_class.__name__}, not as keywords: call "
                    f"`{call.format(module=module)}`."
                )
            return function(*args, **kwargs)

        return wrapper

    return decorate


def refuse_direction_fn(args: tuple, kwargs: dict) -> None:
    """`DCDM(f, ...)` or `DCDM(direction_fn=f)`: the direction generator where
    it went before DCDM held settings only."""
    if "direction_fn" in kwargs or (args and callable(args[0])):
        raise TypeError(
            "DCDM holds settings only; the direction generator travels beside it: "
            "solve(apply_A, b, direction_fn, DCDM(rtol=...)), or "
            "lx.linear_solve(operator, b, DCDM(rtol=...), options={'direction_fn': "
            "direction_fn})."
        )


#: The module names of the task protocol before `Task`, and the `Task` field each became.
OLD_TASK_NAMES = {
    "validate_config": "validate=validate_config",
    "HEADLINE": "headline=HEADLINE",
    "DATA_PARALLEL": "data_parallel=True",
    "build": "build=build",
}


def refuse_old_task_protocol(module: str, names: Mapping[str, Any], error: type[Exception]) -> None:
    """A task module that declares its parts as module names (the protocol
    before `Task`) and no `TASK`: raises `error` showing the declaration."""
    old = [name for name in OLD_TASK_NAMES if name in names]
    if old:
        fields = ", ".join(["train_and_evaluate", *(OLD_TASK_NAMES[n] for n in old)])
        raise error(
            f"task module {module} declares {', '.join(old)} as module names; a task is "
            f"now declared once: TASK = sciml.experiment.Task({fields}) "
            f"(module names are refused until {REMOVED_IN}, then ignored)."
        )


def refuse_renamed_keys(config: Any, renamed: Mapping[str, str], error: type[Exception]) -> None:
    """Raises `error` for the first key of `config` (a `ConfigDict`) that a
    task renamed (`renamed`: `{old dotted key: new dotted key}`)."""
    for old, new in renamed.items():
        node = config
        try:
            for part in old.split("."):
                node = node[part]
        except (KeyError, TypeError, AttributeError):
            continue
        raise error(f"config key {old!r} was renamed {new!r}; did you mean {new!r}?")


def renamed_hint(renamed: Mapping[str, str], key: str) -> str:
    """The hint for an unknown config `key` that a task renamed, or `""`."""
    return f" (renamed: did you mean {renamed[key]!r}?)" if key in renamed else ""


def rank_folder(online: Path, index: int) -> Path | None:
    """The `online/rank-<index>` folder of a run written before a trainer
    process was called a process (it resumes there), or None."""
    old = Path(online) / f"rank-{index}"
    return old if old.is_dir() else None


#: Scenes of `sciml.insr.Elasticity2D.scene` that were renamed: old -> new.
RENAMED_SCENES = {"stretch": "roller_stretch"}


def refuse_renamed_scene(name: str) -> None:
    """Raises `ValueError` naming the new name of a renamed elasticity scene."""
    if name in RENAMED_SCENES:
        raise ValueError(
            f"scene {name!r} was renamed {RENAMED_SCENES[name]!r} (rollers, a homogeneous "
            "answer: a solver check); the paper's clamped stretch is 'clamped_stretch' "
            f"(this message goes in {REMOVED_IN})."
        )
