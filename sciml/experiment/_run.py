"""One run: a checked config and its task -> a run directory with a summary.

Writes `config.json` and `source.json` before the task starts, `summary.json`
after it (its numbers to 4 significant digits; the summary returned keeps
them whole); on several processes process 0 alone writes them. The run's
TensorBoard events (see `sciml.training._events`) hold its config as
hyperparameters, what `fit` logs, and at the end the summary and the figures
under `plots/`. A resumed run that fails before its next checkpoint puts back
the `config.json` and `source.json` it found, so the directory can be resumed
again.
"""

from __future__ import annotations

import datetime
import json
import math
from pathlib import Path
from typing import Any

import jax
import ml_collections

from ..distributed import is_main_process
from ..training import ResumePastEndError, read_metrics
from ..training._events import flat_hparams, run_events
from ..training._metrics import to_python
from ._config import config_json, source_of
from ._errors import ConfigError, read_json
from ._overrides import apply_overrides
from ._task import Task, resolve_task, task_name
from ._validate import check_shared_blocks, config_value


REQUIRED_KEYS = (
    "name",
    "task",
    "seed",
    "train.steps",
    "train.log_every",
    "train.eval_every",
    "train.checkpoint_every",
    "train.keep_checkpoints",
)
CONFIG_FILE = "config.json"
SOURCE_FILE = "source.json"
SUMMARY_FILE = "summary.json"
UNREADABLE_CONFIG = (
    "restore it (the checkpoints' metadata holds the run's config: "
    "sciml.experiment.load_run_config(RUN_DIR)), or choose another directory."
)


def task_of_config(config: ml_collections.ConfigDict) -> Task:
    """The [`Task`][sciml.experiment.Task] of `config` (a relative file path
    against the config's folder)."""
    source = source_of(config)
    return resolve_task(str(config.task), None if source is None else source.directory)


def apply_task_overrides(
    config: ml_collections.ConfigDict, overrides: list[tuple[str, str]]
) -> Task:
    """Applies `overrides` to `config` (an unknown key that its task renamed
    is told the new name) and returns the config's task.

    **Raises:** [`ConfigError`][sciml.experiment.ConfigError].
    """
    task = task_of_config(config)
    apply_overrides(config, overrides, task.renamed_keys)
    return task_of_config(config) if any(key == "task" for key, _ in overrides) else task


def validate(config: ml_collections.ConfigDict, task: Task | None = None) -> Task:
    """Checks the whole config before anything is written.

    The keys every config has, the `train.*` and `optimizer.*` blocks (by
    building the [`TrainSettings`][sciml.training.TrainSettings] and the
    optimiser they describe), that the task module exists, and then the
    task's own checks ([`Task.check`][sciml.experiment.Task.check]).

    **Returns:** the task (`task`, or the one `config.task` names).

    **Raises:** [`ConfigError`][sciml.experiment.ConfigError] naming the key,
    the value and the accepted values.
    """
    for key in REQUIRED_KEYS:
        config_value(config, key)
    check_shared_blocks(config)
    task = task_of_config(config) if task is None else task
    task.check(config)
    return task


def check_workdir(config: ml_collections.ConfigDict, workdir: Path) -> None:
    """Refuses a run directory that belongs to another experiment."""
    saved = workdir / CONFIG_FILE
    if saved.exists():
        other = read_json(saved, UNREADABLE_CONFIG)
        theirs = (other.get("name"), task_name(str(other.get("task"))))
        if theirs != (config.name, task_name(str(config.task))):
            raise ConfigError(
                f"{workdir} holds a run of experiment {other.get('name')!r} "
                f"(task {other.get('task')!r}), not {config.name!r}; choose another --workdir."
            )
    elif workdir.exists() and any(workdir.iterdir()):
        raise ConfigError(f"{workdir} is not empty and holds no {CONFIG_FILE}; choose another.")


def default_workdir(config: ml_collections.ConfigDict, root: Path = Path("runs")) -> Path:
    """`root/<name>/<timestamp>`, with a suffix if that folder exists."""
    stamp = datetime.datetime.now().strftime("%Y%m%d-%H%M%S")
    workdir = root / str(config.name) / stamp
    suffix = 1
    while workdir.exists():
        workdir = root / str(config.name) / f"{stamp}-{suffix}"
        suffix += 1
    return workdir


def main_from_config(config: ml_collections.ConfigDict, workdir: str | Path) -> dict[str, Any]:
    """Checks `config`, runs its task in `workdir` and returns its summary
    (also `summary.json`).

    Writes `config.json` (and `source.json` when the config was loaded from a
    file or module) before the task starts. On several processes (see
    [`ProcessGroup`][sciml.distributed.ProcessGroup]) every one runs the task
    and process 0 alone writes these files; a task that is not
    `data_parallel` is refused there.
    """
    return run_task(config, validate(config), Path(workdir))


def run_task(config: ml_collections.ConfigDict, task: Task, workdir: Path) -> dict[str, Any]:
    """[`main_from_config`][sciml.experiment.main_from_config] for a config
    already checked, with its task."""
    task.check_processes(config, jax.process_count())
    if not is_main_process():  # process 0 checks the directory and writes the run's files
        try:
            return {**to_python(task.train_and_evaluate(config, workdir)), **_processes()}
        except ResumePastEndError as error:
            raise ConfigError(_past_end(config, workdir, error)) from error
    check_workdir(config, workdir)
    before = _RunFiles(workdir)
    (workdir / "plots").mkdir(parents=True, exist_ok=True)
    saved = config_json(config)
    (workdir / CONFIG_FILE).write_text(json.dumps(saved, indent=2, sort_keys=True))
    source = source_of(config)
    if source is not None:
        recorded = source.to_json(root=Path.cwd())
        (workdir / SOURCE_FILE).write_text(json.dumps(recorded, indent=2) + "\n")
    try:
        with run_events(workdir, hparams=flat_hparams(saved)) as events:
            summary = to_python(task.train_and_evaluate(config, workdir))
            summary.update(_processes())
            step = _last_step(summary, workdir)
            events.scalars("summary", step, flat_hparams(summary))
            events.images(step, _figures(workdir))
    except ResumePastEndError as error:
        before.put_back_if_no_new_checkpoint()
        raise ConfigError(_past_end(config, workdir, error)) from error
    except Exception as error:
        if before.resumed and before.put_back_if_no_new_checkpoint():
            raise ConfigError(
                f"--resume: the run could not continue with this config "
                f"({type(error).__name__}: {_one_line(error)}); {workdir} is left as it was "
                "(config.json and source.json put back), so it can still be resumed."
            ) from error
        raise
    rounded = json.dumps(significant(summary), indent=2, sort_keys=True)
    (workdir / SUMMARY_FILE).write_text(rounded + "\n")
    return summary


def _processes() -> dict[str, int]:
    """The summary's record of how many processes trained the run."""
    return {"processes": jax.process_count()}


def significant(tree: Any, digits: int = 4) -> Any:
    """`tree` (JSON data) with every float rounded to `digits` significant
    digits: what `summary.json` holds."""
    if isinstance(tree, dict):
        return {key: significant(value, digits) for key, value in tree.items()}
    if isinstance(tree, list):
        return [significant(value, digits) for value in tree]
    if isinstance(tree, float) and math.isfinite(tree):
        return float(f"{tree:.{digits - 1}e}")
    return tree


def _last_step(summary: dict[str, Any], workdir: Path) -> int:
    """The step the run ended at: the summary's `steps`, else the last of
    `metrics.jsonl` (0 for a run that logs none)."""
    if isinstance(summary.get("steps"), int):
        return summary["steps"]
    return max((int(r.get("step", 0)) for r in read_metrics(workdir / "metrics.jsonl")), default=0)


def _figures(workdir: Path) -> dict[str, Path]:
    """The run's figures, `{tag: path}`: every PNG file in a `plots/` folder of
    the run directory (a model's folder has its own), tagged by its path."""
    return {
        path.relative_to(workdir).with_suffix("").as_posix(): path
        for path in sorted(workdir.rglob("*.png"))
        if "plots" in path.relative_to(workdir).parts
    }


def _past_end(config: ml_collections.ConfigDict, workdir: Path, error: Exception) -> str:
    """What to do about a run resumed with fewer steps than its checkpoint holds."""
    if config.train.steps != error.steps:  # a task's own step count: fit's message names it
        return f"{workdir}: {error}"
    return (
        f"{workdir} holds a checkpoint at step {error.checkpoint_step}, past train.steps = "
        f"{error.steps}: a run cannot train back to fewer steps. To train on, resume with a "
        f"larger train.steps: --resume {workdir} --config.train.steps=<more than "
        f"{error.checkpoint_step}>; the trained model is read as it is with "
        "sciml.experiment.load_run. The directory is left as it was."
    )


def _one_line(error: BaseException, n: int = 300) -> str:
    text = " ".join(str(error).split())
    return text if len(text) <= n else text[: n - 3] + "..."


class _RunFiles:
    """What a run directory held before a (resumed) run started.

    When the run then fails before it writes a checkpoint, the run's saved
    state is still the one it started from, and so should be its config:
    `put_back_if_no_new_checkpoint` restores the `config.json` and
    `source.json` it found and removes the `plots/` folder when it created it.
    """

    def __init__(self, workdir: Path):
        self.workdir = workdir
        self.resumed = (workdir / CONFIG_FILE).is_file()
        self.saved = {
            name: (workdir / name).read_bytes()
            for name in (CONFIG_FILE, SOURCE_FILE)
            if (workdir / name).is_file()
        }
        self.had_plots = (workdir / "plots").exists()
        self.checkpoints = self._checkpoints()

    def _checkpoints(self) -> set[tuple[str, int]]:
        """Every file under a `checkpoints/` folder, with its size."""
        found = set()
        for folder in self.workdir.rglob("checkpoints"):
            for path in folder.rglob("*"):
                if path.is_file():
                    found.add((str(path.relative_to(self.workdir)), path.stat().st_size))
        return found

    def put_back_if_no_new_checkpoint(self) -> bool:
        if self._checkpoints() != self.checkpoints:
            return False
        for name in (CONFIG_FILE, SOURCE_FILE):
            if name in self.saved:
                (self.workdir / name).write_bytes(self.saved[name])
            else:
                (self.workdir / name).unlink(missing_ok=True)
        plots = self.workdir / "plots"
        if not self.had_plots and plots.is_dir() and not any(plots.iterdir()):
            plots.rmdir()
        return True
