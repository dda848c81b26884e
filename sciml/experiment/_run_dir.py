"""Reading a finished (or interrupted) run back: its config and its model."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import ml_collections

from sciml.training import restore_model
from sciml.training._checkpoint import checkpoint_dir, read_run_config

from ._config import ConfigSource
from ._errors import ConfigError
from ._task import resolve_task


def _run_files(run_dir: Path) -> list[Path]:
    """`run_dir` and up to two parents: a model's folder sits inside the run directory."""
    return [run_dir, *list(run_dir.parents)[:2]]


def load_run_config(run_dir: str | Path) -> ml_collections.ConfigDict:
    """The config a run was trained with, from its checkpoint metadata.

    Falls back to the run's `config.json` when its checkpoints predate configs
    in the metadata. `run_dir` is a run directory, a model's folder inside it
    (e.g. `run_dir / "sequential"`), or a `checkpoints/` folder.

    **Returns:** a locked `ml_collections.ConfigDict` (plain values: fields are
    no longer linked).
    """
    run_dir = Path(run_dir)
    data = read_run_config(run_dir)
    if data is None:
        for folder in _run_files(run_dir):
            if (folder / "config.json").is_file():
                data = json.loads((folder / "config.json").read_text())
                break
    if data is None:
        raise ConfigError(f"{run_dir} holds no checkpoint with a config and no config.json.")
    config = ml_collections.ConfigDict(data)
    config.lock()
    return config


def load_run(run_dir: str | Path, build_model: Any = None) -> tuple[Any, ml_collections.ConfigDict]:
    """Rebuilds the trained model of a run directory, for inference.

    **Arguments:**

    - `run_dir`: the run directory (or a model's folder inside it).
    - `build_model`: `build_model(config) -> model` giving a model of the same
      structure (its values are replaced); default: the task's
      `build(config).model` (see [`Task`][sciml.experiment.Task]), the task resolved from the config's `task` key
      (a relative task file against the config file's directory recorded in
      the run's `source.json`).

    **Returns:** `(model, config)`.
    """
    config = load_run_config(run_dir)
    if build_model is None:
        directory = None
        for folder in _run_files(Path(run_dir)):
            if (folder / "source.json").is_file():
                recorded = json.loads((folder / "source.json").read_text())
                directory = ConfigSource.from_json(recorded, folder).directory
                break
        task = resolve_task(str(config.task), directory)
        if task.build is None:
            raise ConfigError(
                f"task {config.task} declares no build(config) (Task(..., build=build)); "
                "pass build_model."
            )

        def build_model(config):
            return task.build(config).model

    return restore_model(checkpoint_dir(run_dir), build_model(config)), config
