"""What the online-training tasks share: the study, buffer and launcher from a
config, the surrogate a problem defines, the online training run, the summary,
and the plots of a study (validation error and buffer statistics over time).

A problem's task module defines `surrogate(config, study) -> Surrogate` (the
model, its loss, its validation metrics and its prediction plots); one online
run of it is [`run_online`][experiments.tasks.online_common.run_online], and the
online-vs-offline comparison trains the same surrogate both ways.
"""

from __future__ import annotations

import dataclasses
import importlib
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import jax
import ml_collections
import numpy as np

from experiments.tasks.online.online_plots import plot_buffer, plot_validation
from sciml.distributed import is_main_process
from sciml.experiment import (
    ConfigError,
    Headline,
    Task,
    build_block,
    check_config,
    config_json,
    count_params,
    fingerprint,
    plot_loss,
    save_figure,
    train_settings,
)
from sciml.experiment.defaults import class_defaults
from sciml.online import (
    FIFO,
    FIRO,
    Halton,
    LatinHypercube,
    LocalLauncher,
    MonteCarlo,
    OnlineResult,
    ParameterSpace,
    Reservoir,
    SlurmLauncher,
    Sobol,
    Study,
    train_online,
)
from sciml.training import make_optimizer, read_metrics


#: The online tasks' closing line: the validation error, beside persistence
#: (the input field taken as the prediction) where the task reports it.
ONLINE_HEADLINE = Headline(
    "val_rel_l2", "validation rel. L2", "persistence_rel_l2", "persistence", percent=True
)

#: The online tasks' renamed config keys: the function a study runs is a
#: simulation (`study.simulation`), not a "solver", a word that means four
#: other things in this package.
ONLINE_RENAMED_KEYS = {"study.solver": "study.simulation"}


@dataclasses.dataclass
class Surrogate:
    """A problem's surrogate and how it is trained and scored.

    - `model`: the initial Equinox module.
    - `loss_fn(model, batch, key) -> (loss, aux)`: `batch` holds the solver's
      fields `(batch, *shape)` and `"params"` `(batch, n_params)`.
    - `evaluate(model, data) -> {"val_rel_l2": ..., ...}`: metrics on held-out
      runs `data` (the layout of `sciml.online.validation_data`).
    - `plot(model, data, plot_dir, step=None)`: prediction plots on `data` of
      the model after training step `step`.
    """

    model: Any
    loss_fn: Callable
    evaluate: Callable[[Any, dict[str, np.ndarray]], dict[str, float]]
    plot: Callable[[Any, dict[str, np.ndarray], Path], None]


def run_online(
    config: ml_collections.ConfigDict,
    workdir: Path,
    build: Callable[[ml_collections.ConfigDict, Study], Surrogate],
) -> tuple[OnlineResult, dict[str, Any]]:
    """Trains `build(config, study)`'s surrogate online as `config` says, writes
    the loss, study and prediction plots to `workdir/plots` (process 0 of
    several), and returns the result and the summary
    ([`online_summary`][experiments.tasks.online_common.online_summary])."""
    workdir = Path(workdir)
    study = study_from_config(config)
    surrogate = build(config, study)
    start = time.perf_counter()
    result = train_online(
        study,
        surrogate.model,
        surrogate.loss_fn,
        buffer=buffer_from_config(config.buffer),
        optimizer=make_optimizer(config.optimizer),
        batch_size=int(config.train.batch_size),
        key=jax.random.key(int(config.seed) + 1),
        settings=train_settings(
            config,
            workdir=workdir,
            fingerprint=fingerprint(config),
            run_config=config_json(config),
            description=str(config.name),
        ),
        launcher=launcher_from_config(config.launcher),
        evaluate=surrogate.evaluate,
    )
    seconds = time.perf_counter() - start
    if is_main_process():  # on several trainer processes, the first one plots
        plot_dir = workdir / "plots"
        plot_dir.mkdir(parents=True, exist_ok=True)
        plot_loss(
            workdir / "metrics.jsonl",
            plot_dir,
            run_name=config.name,
            loss_name=config.train.loss,
            eval_metrics=("val_rel_l2", "persistence_rel_l2"),
        )
        plot_study(workdir / "metrics.jsonl", plot_dir, run_name=config.name)
        surrogate.plot(result.model, result.validation, plot_dir, result.summary["steps"])
    return result, online_summary(result, count_params(result.model), seconds)


def online_train_and_evaluate(build: Callable[[ml_collections.ConfigDict, Study], Surrogate]):
    """A task's `train_and_evaluate(config, workdir) -> summary`: one
    [`run_online`][experiments.tasks.online_common.run_online] of `build`'s surrogate."""

    def train_and_evaluate(config: ml_collections.ConfigDict, workdir) -> dict[str, Any]:
        return run_online(config, Path(workdir), build)[1]

    return train_and_evaluate


def online_task(
    build: Callable[[ml_collections.ConfigDict, Study], Surrogate],
    validate: Callable[[ml_collections.ConfigDict], None],
) -> Task:
    """The [`Task`][sciml.experiment.Task] of an online study of `build`'s
    surrogate: one [`run_online`][experiments.tasks.online_common.run_online],
    judged by the online headline, on one or several trainer processes, with
    the online tasks' renamed key."""
    return Task(
        online_train_and_evaluate(build),
        validate=validate,
        headline=ONLINE_HEADLINE,
        data_parallel=True,
        renamed_keys=ONLINE_RENAMED_KEYS,
    )


def sampler_from_config(cfg: ml_collections.ConfigDict, n_runs: int, seed: int):
    """`study.sampler`: `"monte_carlo"`, `"latin_hypercube"`, `"halton"` or `"sobol"`."""
    name = cfg.sampler
    if name == "monte_carlo":
        return MonteCarlo(seed=seed)
    if name == "latin_hypercube":
        return LatinHypercube(block=n_runs, seed=seed)
    if name == "halton":
        return Halton(seed=seed)
    if name == "sobol":
        return Sobol(seed=seed)
    raise ValueError(
        "config.study.sampler must be 'monte_carlo', 'latin_hypercube', 'halton' or 'sobol', "
        f"got {name!r}."
    )


def study_from_config(config: ml_collections.ConfigDict) -> Study:
    """The [`Study`][sciml.online.Study] of `config.study` (seeded by `config.seed`)."""
    cfg = config.study
    space = ParameterSpace({name: tuple(spec) for name, spec in cfg.space.items()})
    return Study(
        simulation=cfg.simulation,
        space=space,
        n_runs=int(cfg.n_runs),
        n_steps=int(cfg.n_steps),
        settings=cfg.settings.to_dict(),
        sampler=sampler_from_config(cfg, int(cfg.n_runs), int(config.seed)),
        concurrency=int(cfg.concurrency),
        runs_per_job=int(cfg.runs_per_job),
        n_validation=int(cfg.n_validation),
        seed=int(config.seed),
        max_attempts=int(cfg.max_attempts),
        timeout=float(cfg.timeout),
        # a run written before the key existed: the class's default
        start_timeout=float(
            cfg.get("start_timeout", class_defaults(Study, "start_timeout")["start_timeout"])
        ),
        address=cfg.address or None,
    )


def buffer_from_config(cfg: ml_collections.ConfigDict):
    """`config.buffer`: `kind` `"reservoir"`, `"firo"` or `"fifo"`, and its sizes."""
    common = {"capacity": int(cfg.capacity), "min_new_per_batch": int(cfg.min_new_per_batch)}
    if cfg.kind == "reservoir":
        return Reservoir(watermark=int(cfg.watermark), **common)
    if cfg.kind == "firo":
        return FIRO(reads=int(cfg.reads), watermark=int(cfg.watermark), **common)
    if cfg.kind == "fifo":
        return FIFO(**common)
    raise ValueError(f"config.buffer.kind must be 'reservoir', 'firo' or 'fifo', got {cfg.kind!r}.")


def launcher_from_config(cfg: ml_collections.ConfigDict):
    """`config.launcher`: `kind` `"local"` (solver processes on this machine) or
    `"slurm"` (one Slurm job per solver job; `partition`, `time`, `mem` may be
    `""` for the cluster's defaults)."""
    if cfg.kind == "local":
        return LocalLauncher(threads=int(cfg.threads))
    if cfg.kind == "slurm":
        return SlurmLauncher(
            partition=cfg.get("partition") or None,
            time=cfg.get("time") or None,
            cpus_per_task=int(cfg.get("cpus_per_task", 1)),
            mem=cfg.get("mem") or None,
            sbatch_args=list(cfg.get("sbatch_args", ())),
            setup=list(cfg.get("setup", ())),
            threads=int(cfg.threads) or None,
            poll_interval=float(cfg.get("poll_interval", 5.0)),
        )
    raise ValueError(f"config.launcher.kind must be 'local' or 'slurm', got {cfg.kind!r}.")


def plot_study(metrics_path: Path, plot_dir: Path, *, run_name: str) -> None:
    """`validation.png` (validation error against samples received and steps)
    and `buffer.png` (samples received and trained, buffer fill, reuse)."""
    records = read_metrics(metrics_path)
    train = [r for r in records if r.get("split") == "train" and "received" in r]
    evals = [r for r in records if r.get("split") == "eval"]
    if evals and "val_rel_l2" in evals[0]:
        title = f"Surrogate's validation error on held-out solver runs (run {run_name})"
        axes = plot_validation(evals, {r["step"]: r["received"] for r in train}, title=title)
        save_figure(axes[0], plot_dir / "validation.png", dpi=110)
    if train:
        axes = plot_buffer(train, title=f"Samples and training buffer (run {run_name})")
        save_figure(axes[0], plot_dir / "buffer.png", dpi=110)


def online_summary(result: Any, n_params: int, seconds: float) -> dict[str, Any]:
    """The summary keys of every online task."""
    summary = dict(result.summary)
    summary.update(
        {
            "final_loss": result.fit.metrics.get("loss"),
            "n_params": n_params,
            "train_seconds": seconds,
        }
    )
    summary.update(
        {k[len("eval_") :]: v for k, v in result.fit.metrics.items() if k.startswith("eval_")}
    )
    return summary


def validate_online_config(config) -> None:
    """The study, buffer and launcher blocks of an online config, checked by
    the runner before anything is written (its tasks' `validate`): by building
    the `Study`, buffer and launcher they describe, each of which checks
    itself, and the buffer against `train.batch_size`."""
    check_config(
        config,
        choices={
            "study.sampler": ("monte_carlo", "latin_hypercube", "halton", "sobol"),
            "buffer.kind": ("reservoir", "firo", "fifo"),
            "launcher.kind": ("local", "slurm"),
        },
        non_negative=("launcher.threads",),
    )
    _check_simulation(config.study)
    for name, spec in config.study.space.items():  # each parameter's range checks itself
        try:
            ParameterSpace({name: tuple(spec)})
        except (ValueError, TypeError) as error:
            raise ConfigError(f"config key 'study.space.{name}': {error}") from None
    address = config.study.address
    if address and not str(address).startswith(("tcp://", "ipc://")):
        raise ConfigError(
            f"config key 'study.address' must be '' (a loopback port), 'tcp://HOST:PORT' or "
            f"'ipc://PATH', got {address!r}."
        )
    build_block(config, "study", lambda: study_from_config(config))
    buffer = build_block(config, "buffer", lambda: buffer_from_config(config.buffer))
    build_block(config, "launcher", lambda: launcher_from_config(config.launcher))
    try:
        buffer.check_batch_size(config.train.batch_size)
    except ValueError as error:
        raise ConfigError(
            f"config key 'train.batch_size' does not suit the buffer ('buffer.capacity' = "
            f"{config.buffer.capacity}): {error}"
        ) from None


def _check_simulation(study: ml_collections.ConfigDict) -> None:
    """`study.simulation` names an importable callable `package.module.function`."""
    path = study.get("simulation")
    module_name, _, function = str(path).rpartition(".")
    if not isinstance(path, str) or not module_name:
        raise ConfigError(
            f"config key 'study.simulation' must be a dotted path 'package.module.function', "
            f"got {path!r}."
        )
    try:
        module = importlib.import_module(module_name)
    except ImportError as error:
        raise ConfigError(
            f"config key 'study.simulation' is {path!r}, but {module_name!r} cannot be imported ({error})."
        ) from None
    if not callable(getattr(module, function, None)):
        raise ConfigError(
            f"config key 'study.simulation' is {path!r}, but {module_name!r} has no function "
            f"{function!r}."
        )
