"""The standard training loop of a task: one `Experiment` through `sciml.training.fit`.

Most tasks build a model, a loss, a batch function and an evaluation, and then
all run the same loop: an optimiser from `config.optimizer`, `fit` with the
`config.train` settings in the run directory, the plots, and a summary of the
final loss, the steps, the training time, the parameter count and the final
evaluation. [`train_experiment`][sciml.experiment.train_experiment] is that
loop, so no task plumbs `fit` by hand; a task that trains several models calls
it once per model, each in a folder of its own.
"""

from __future__ import annotations

import dataclasses
import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import equinox as eqx
import jax
import ml_collections
import numpy as np

from sciml.distributed import ProcessGroup, is_main_process
from sciml.training import FitResult, fit, make_optimizer

from ._config import config_json
from ._plots import plot_loss
from ._task import task_name
from ._validate import train_settings


@dataclasses.dataclass
class Experiment:
    """One model trained by the standard loop (see `docs/experiments.md`).

    - `model`: the initial Equinox module.
    - `loss_fn(model, batch, key) -> (loss, aux)`: `aux` a dict of scalars.
    - `batch_fn(step, key) -> batch`: a pure function of its arguments, so a
      resumed run sees the same batches as an uninterrupted one.
    - `evaluate(model) -> dict[str, float]`: held-out metrics; the final ones go
      into the summary.
    - `plot(model, plot_dir)`: writes PNG files into `plot_dir`.
    - `label_fn`: parameter-group labels for `sciml.training.make_optimizer`.
    """

    model: Any
    loss_fn: Callable[[Any, Any, jax.Array], tuple[jax.Array, dict]]
    batch_fn: Callable[[int, jax.Array], Any]
    evaluate: Callable[[Any], dict[str, float]] | None = None
    plot: Callable[[Any, Path], None] | None = None
    label_fn: Callable[[Any], Any] | None = None


@dataclasses.dataclass
class Trained:
    """What [`train_experiment`][sciml.experiment.train_experiment] returns.

    - `model`: the trained model;
    - `summary`: `final_loss`, `steps`, `train_seconds` (summed over every
      part of a resumed run, kept in `train_seconds.json`), `n_params` and the
      final evaluation metrics (without the `eval_` prefix);
    - `result`: the [`FitResult`][sciml.training.FitResult] of `fit` (its
      `start_step` is the step the run resumed from).
    """

    model: Any
    summary: dict[str, Any]
    result: FitResult


def count_params(model: Any) -> int:
    """Number of trainable scalars (complex counts as two) in `model`."""
    leaves = jax.tree_util.tree_leaves(eqx.filter(model, eqx.is_inexact_array))
    return int(sum(x.size * (2 if np.iscomplexobj(x) else 1) for x in leaves))


# The `config.train` keys that are training settings (`TrainSettings` fields
# holding a plain number or flag); `train.batch_size`, `train.loss`, ... are
# the task's.
def fingerprint(config: ml_collections.ConfigDict, **extra: str) -> dict[str, str]:
    """Names a run's checkpoints, so another experiment's are never loaded.

    The task is named by its short name (see [`task_name`][sciml.experiment.task_name]).
    """
    return {"name": str(config.name), "task": task_name(str(config.task)), **extra}


TIME_FILE = "train_seconds.json"


def _earlier_seconds(workdir: Path) -> float:
    """The training time of the earlier parts of a resumed run (0 for a new one)."""
    path = workdir / TIME_FILE
    if not path.is_file() or not (workdir / "checkpoints").is_dir():
        return 0.0
    return float(json.loads(path.read_text()).get("train_seconds", 0.0))


def _save_seconds(workdir: Path, seconds: float) -> None:
    workdir.mkdir(parents=True, exist_ok=True)
    (workdir / TIME_FILE).write_text(json.dumps({"train_seconds": seconds}) + "\n")


def _fit(experiment, config, workdir, optimizer, key, tag, description) -> FitResult:
    group = ProcessGroup.current()

    def rows(step, key):  # this process's rows of the global batch
        return group.rows(experiment.batch_fn(step, key))

    batch_fn = experiment.batch_fn if group.single else rows
    return fit(
        experiment.model,
        experiment.loss_fn,
        batch_fn,
        optimizer=optimizer,
        key=jax.random.key(int(config.seed) + 1) if key is None else key,
        settings=train_settings(
            config,
            workdir=workdir,
            fingerprint=fingerprint(config, **(tag or {})),
            description=str(config.name) if description is None else description,
            run_config=config_json(config),
        ),
        eval_fn=experiment.evaluate,
    )


def train_experiment(
    experiment: Experiment,
    config: ml_collections.ConfigDict,
    workdir: str | Path,
    *,
    key: jax.Array | None = None,
    tag: dict[str, str] | None = None,
    description: str | None = None,
    plots: bool = True,
) -> Trained:
    """Trains `experiment` with `sciml.training.fit` as `config` says.

    **Arguments:**

    - `experiment`: the model, loss, batches, evaluation, plots and labels.
    - `config`: the run's config; `config.train` gives the `fit` settings,
      `config.optimizer` the optimiser, `config.seed` the default key.
    - `workdir`: the folder of this model's `checkpoints/`, `metrics.jsonl` and
      `plots/`; a folder holding checkpoints of it is resumed.
    - `key`: the training key (default `jax.random.key(config.seed + 1)`).
    - `tag`: extra fingerprint entries that tell apart several models trained
      in one run (e.g. `{"model": "dense"}`).
    - `description`: the progress-bar label (default `config.name`).
    - `plots`: whether to write `plots/loss.png` and `experiment.plot`'s plots.

    On several processes (see [`ProcessGroup`][sciml.distributed.ProcessGroup])
    each trains on its rows of every batch `experiment.batch_fn` returns (so
    the batch size must be a multiple of the process count), and process 0
    alone writes the plots and `train_seconds.json`.

    **Returns:** a [`Trained`][sciml.experiment.Trained]; the checkpoints carry
    the config in their metadata, so the model can be rebuilt from the run
    directory (see [`restore_model`][sciml.training.restore_model]).
    """
    workdir = Path(workdir)
    main = is_main_process()
    optimizer = make_optimizer(config.get("optimizer"), experiment.label_fn)
    earlier = _earlier_seconds(workdir)
    start = time.perf_counter()
    try:
        result = _fit(experiment, config, workdir, optimizer, key, tag, description)
    except KeyboardInterrupt:  # the finished steps are checkpointed: so is their time
        if main:
            _save_seconds(workdir, earlier + time.perf_counter() - start)
        raise
    seconds = earlier + time.perf_counter() - start
    if main:
        _save_seconds(workdir, seconds)
    if plots and main:
        plot_dir = workdir / "plots"
        plot_dir.mkdir(parents=True, exist_ok=True)
        if experiment.plot is not None:
            experiment.plot(result.model, plot_dir)
        plot_loss(
            workdir / "metrics.jsonl",
            plot_dir,
            run_name=str(config.name) if description is None else description,
            loss_name=config.train.get("loss"),
        )
    summary = {
        "final_loss": result.metrics.get("loss"),
        "steps": result.step,
        "train_seconds": seconds,
        "n_params": count_params(result.model),
    }
    summary.update(
        {k[len("eval_") :]: v for k, v in result.metrics.items() if k.startswith("eval_")}
    )
    return Trained(model=result.model, summary=summary, result=result)
