"""Resuming a run: its config rebuilt from what it recorded, and the command
that resumes it.

`--resume RUN_DIR` calls the recorded config's `get_config` again with the
recorded overrides plus the new ones, so linked fields (a schedule's
`decay_steps`) follow a raised `train.steps`; a config file that no longer
gives the saved config is refused.
"""

from __future__ import annotations

import os
import shlex
import shutil
import sys
from pathlib import Path
from typing import Any

import ml_collections

from ._config import ConfigSource, attach_source, config_json, load_source
from ._errors import ConfigError, read_json
from ._run import CONFIG_FILE, SOURCE_FILE, UNREADABLE_CONFIG, apply_task_overrides
from ._task import Task


def resume_config(
    run_dir: Path, overrides: list[tuple[str, str]]
) -> tuple[ml_collections.ConfigDict, Task]:
    """The config of the run in `run_dir` with `overrides` applied, and its task.

    **Raises:** [`ConfigError`][sciml.experiment.ConfigError] when the run's
    files cannot be read, or its config file no longer gives the saved config.
    """
    saved = run_dir / CONFIG_FILE
    if not saved.is_file():
        raise ConfigError(f"--resume: {run_dir} holds no {CONFIG_FILE}.")
    saved_config = read_json(saved, UNREADABLE_CONFIG)
    recorded = run_dir / SOURCE_FILE
    if not recorded.is_file():  # a run written before sources were recorded
        config = ml_collections.ConfigDict(saved_config)
        config.lock()
        attach_source(config, None)
        return config, apply_task_overrides(config, overrides)
    fix = (
        "it records the config file, variant and overrides of the run: restore it, or "
        "delete it to resume from config.json as saved."
    )
    data = read_json(recorded, fix)
    try:
        source = ConfigSource.from_json(data, run_dir)
    except (KeyError, TypeError, ValueError) as error:
        raise ConfigError(f"{recorded} is not a config source ({error!r}); {fix}") from None
    try:
        config = load_source(source)
    except ConfigError as error:
        raise ConfigError(
            f"--resume: the run's config {source.spec!r} cannot be loaded again ({error})"
        ) from None
    rebuilt, old = _flat(config_json(config)), _flat(saved_config)
    changed = sorted(k for k in set(rebuilt) | set(old) if rebuilt.get(k) != old.get(k))
    if changed:
        raise ConfigError(
            f"--resume: {source.spec} with the recorded overrides no longer gives the config "
            f"saved in {saved} (keys {changed[:5]} differ); restore the config or start a new run."
        )
    task = apply_task_overrides(config, overrides)
    attach_source(config, source.with_overrides(overrides))
    return config, task


def _flat(tree: Any, prefix: str = "") -> dict[str, Any]:
    if not isinstance(tree, dict):
        return {prefix: tree}
    out = {}
    for key, value in tree.items():
        out.update(_flat(value, f"{prefix}.{key}" if prefix else str(key)))
    return out


def resume_command(prog: str, workdir: str | Path) -> str:
    """The command that resumes `workdir`, ready to paste into the shell the run
    was started from.

    A `python -m ...` program names the interpreter that is running unless it
    is the `python` on `PATH`: `make run` runs the checkout's virtual
    environment without activating it, so a bare `python` would be another one
    (one without the package's dependencies). Inside the working directory the
    interpreter is given relative to it (`.venv/bin/python`).
    """
    if prog.startswith("python "):
        prog = _interpreter() + prog[len("python") :]
    return f"{prog} --resume {shlex.quote(str(workdir))}"


def _interpreter() -> str:
    executable = sys.executable
    on_path = shutil.which("python")
    if on_path is not None and os.path.abspath(on_path) == os.path.abspath(executable):
        return "python"
    path = Path(executable)
    if path.is_relative_to(Path.cwd()):
        path = path.relative_to(Path.cwd())
    return shlex.quote(str(path))
