"""Config blocks shared by the online-training configs (not a config itself)."""

from __future__ import annotations

from typing import Any

import ml_collections

from experiments.configs._operators import OPTIMIZER, TRAIN
from sciml.experiment import defaults
from sciml.online import Study


def online_config(
    name: str,
    task: str,
    *,
    steps: int,
    batch_size: int,
    learning_rate: float,
    simulation: str,
    space: dict[str, tuple],
    n_runs: int,
    n_steps: int,
    settings: dict[str, Any],
) -> ml_collections.ConfigDict:
    """The run, `train`, `optimizer`, `study`, `buffer` and `launcher` blocks.

    - `study.*`: the [`Study`][sciml.online.Study] (`simulation`, the function that
      runs one simulation, by dotted path;
      `space` as `{name: (low, high[, "log"])}`, `sampler` one of
      `"monte_carlo"`, `"latin_hypercube"`, `"halton"`, `"sobol"`, ...).
    - `buffer.*`: `kind` (`"reservoir"`, `"firo"`, `"fifo"`), `capacity`,
      `watermark`, `reads` (FIRO), `min_new_per_batch` (rate limit, 0 = off).
    - `launcher.*`: `kind` (`"local"` or `"slurm"`), `threads` per solver
      process (0: one per CPU of a Slurm job); for `"slurm"` also `partition`,
      `time`, `cpus_per_task`, `mem` (`""` = the cluster's default),
      `sbatch_args` and `setup` (tuples of strings), `poll_interval` (see
      [`SlurmLauncher`][sciml.online.SlurmLauncher]).
    """
    config = defaults.base_config(
        name,
        task,
        steps=steps,
        batch_size=batch_size,
        learning_rate=learning_rate,
        train={"loss": "l2", **TRAIN},
        optimizer=OPTIMIZER,
    )
    study = ml_collections.ConfigDict()
    study.simulation = simulation
    study.space = ml_collections.ConfigDict({k: list(v) for k, v in space.items()})
    study.sampler = "monte_carlo"
    study.n_runs = n_runs
    # The simulation's own `n_steps` setting (when it has one) follows the study's.
    steps_ref = ml_collections.FieldReference(n_steps)
    study.n_steps = steps_ref
    study.settings = ml_collections.ConfigDict(settings)
    if "n_steps" in settings:
        study.settings.n_steps = steps_ref
    study.update(
        defaults.class_defaults(
            Study, "concurrency", "n_validation", "max_attempts", "timeout", "start_timeout"
        )
    )
    study.runs_per_job = 10
    study.address = ""  # "" = a free loopback TCP port
    config.study = study

    buffer = ml_collections.ConfigDict()
    buffer.kind = "reservoir"
    buffer.capacity = 1000
    buffer.watermark = 100
    buffer.reads = 4
    buffer.min_new_per_batch = 0
    config.buffer = buffer

    launcher = ml_collections.ConfigDict()
    launcher.kind = "local"
    launcher.threads = 1
    launcher.partition = ""
    launcher.time = ""
    launcher.cpus_per_task = 1
    launcher.mem = ""
    launcher.sbatch_args = ()
    launcher.setup = ()
    launcher.poll_interval = 5.0
    config.launcher = launcher
    return config


def shrink_online(
    config: ml_collections.ConfigDict,
    *,
    n_runs: int,
    n_steps: int,
    runs_per_job: int,
    settings: dict[str, Any],
    capacity: int,
) -> None:
    """A seconds-long variant: `n_runs` runs of `n_steps` (2 held out), the
    solver `settings` overridden, a FIRO buffer of `capacity` samples read 8
    times each, and 40 training steps of batch 4 at learning rate 1e-2."""
    config.study.n_runs = n_runs
    config.study.n_steps = n_steps
    config.study.n_validation = 2
    config.study.runs_per_job = runs_per_job
    config.study.settings.update(settings)
    config.buffer.kind = "firo"
    config.buffer.capacity = capacity
    config.buffer.watermark = 8
    config.buffer.reads = 8
    config.optimizer.learning_rate = 1e-2
    defaults.shrink_training(
        config,
        steps=40,
        batch_size=4,
        log_every=10,
        eval_every=20,
        checkpoint_every=20,
        warmup_steps=5,
    )
