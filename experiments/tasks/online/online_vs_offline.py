"""Online vs offline training of the same surrogate with the same number of steps.

The comparison of the online-learning paper (Meyer et al., ICML 2023), on the
heat equation (an MLP, `online_heat`) or 2-D Navier–Stokes (a TFNO,
`online_ns`), chosen by `config.problem`:

- **offline** (`offline/`): the study's first `offline.n_runs` = M runs, solved
  once and written to `offline/data.h5` (`sciml.online.offline_data`:
  resumable, the same solver and parameter sampler as the stream), then
  `train.steps` = S steps of random batches from them, i.e. many epochs
  (`sciml.experiment.train_experiment`);
- **online** (`online/`): the same model, initialisation, optimiser, batch size
  and S steps, fed by the study's `study.n_runs` ≫ M runs through the
  configured buffer (`sciml.online.train_online`);
- both are evaluated every `train.eval_every` steps, and at the end, on the
  **same** held-out runs: the study's validation runs (parameters and seeds
  from a stream no training run uses), solved once into
  `online/validation.h5`.

Each part runs in its own folder and resumes from its checkpoints; a finished
part (its `summary.json` written) is not run again. The summary has
`offline_test_rel_l2`, `online_test_rel_l2`, `improvement_percent`
(`100 · (offline − online) / offline`), the runs each part trained on, and the
online part's stream counters; `plots/online_vs_offline.png` shows both
validation errors and training losses against the step.

On several trainer processes (`--processes N`) the offline part's batches
are split over them and the online part runs one stream per process (see
`sciml.online.train_online`); process 0 alone solves the offline and the
validation runs into their files (the others read them back) and writes
the files.
"""

from __future__ import annotations

import functools
import json
from pathlib import Path
from typing import Any

import h5py
import jax
import jax.numpy as jnp
import numpy as np

from experiments.tasks.online import online_heat, online_ns
from experiments.tasks.online.online_common import (
    ONLINE_RENAMED_KEYS,
    Surrogate,
    run_online,
    study_from_config,
    validate_online_config,
)
from experiments.tasks.online.online_plots import plot_online_vs_offline
from sciml.distributed import ProcessGroup, is_main_process
from sciml.experiment import Experiment, Headline, Task, check_config, save_figure, train_experiment
from sciml.online import Study, offline_data, validation_data
from sciml.training import read_metrics


#: `config.problem` → (its surrogate builder, the simulation it needs).
PROBLEMS = {
    "heat": (online_heat.surrogate, "solvers.streams.heat_fields"),
    "navier_stokes": (online_ns.surrogate, "solvers.streams.navier_stokes_pairs"),
}


def surrogate_builder(config):
    """The surrogate builder of `config.problem`, checked against `config.study.simulation`."""
    if config.problem not in PROBLEMS:
        raise ValueError(
            f"config.problem must be one of {sorted(PROBLEMS)}, got {config.problem!r}."
        )
    build, simulation = PROBLEMS[config.problem]
    if config.study.simulation != simulation:
        raise ValueError(
            f"config.problem = {config.problem!r} needs config.study.simulation = {simulation!r}, "
            f"got {config.study.simulation!r}; pick the problem with the config's variant "
            "(online_vs_offline.py or online_vs_offline.py:navier_stokes) rather than by override."
        )
    return build


def make_batch_fn(data: dict[str, np.ndarray], batch_size: int):
    """`batch_fn(step, key)`: `batch_size` samples drawn uniformly from `data` (a
    pure function of the key, so a resumed run sees the same batches)."""
    arrays = {k: jnp.asarray(v) for k, v in data.items() if k not in ("run", "step")}
    n = arrays["params"].shape[0]

    @jax.jit
    def batch_fn(step, key):
        index = jax.random.randint(key, (batch_size,), 0, n)
        return {k: v[index] for k, v in arrays.items()}

    return batch_fn


def _read_offline(path: Path) -> dict[str, np.ndarray]:
    """What `offline_data` returned on process 0, read back from its file."""
    with h5py.File(path, "r") as f:
        return {name: f[name][...] for name in f if name != "done"}


def run_offline(
    config, workdir: Path, surrogate: Surrogate, study: Study, test: dict[str, np.ndarray]
) -> dict[str, Any]:
    """Trains `surrogate` for `train.steps` steps on the first `offline.n_runs` runs."""
    n_runs = int(config.offline.n_runs)
    path = workdir / "data.h5"
    group = ProcessGroup.current()
    data = group.on_main(lambda: offline_data(study, n_runs, path), lambda: _read_offline(path))
    experiment = Experiment(
        model=surrogate.model,
        loss_fn=surrogate.loss_fn,
        batch_fn=make_batch_fn(data, int(config.train.batch_size)),
        evaluate=lambda model: surrogate.evaluate(model, test),
        plot=lambda model, plot_dir: surrogate.plot(model, test, plot_dir, int(config.train.steps)),
    )
    trained = train_experiment(
        experiment, config, workdir, tag={"part": "offline"}, description="offline"
    )
    samples = n_runs * study.n_steps
    return {
        **trained.summary,
        "runs": int(np.unique(data["run"]).size),
        "samples": samples,
        "epochs": trained.summary["steps"] * int(config.train.batch_size) / samples,
    }


def _part(workdir: Path, run) -> dict[str, Any]:
    """`run()`'s summary, or the summary a finished earlier run left in
    `workdir` (read by process 0, handed to the others: *collective*)."""
    group = ProcessGroup.current()
    path = workdir / "summary.json"
    done = group.broadcast(json.loads(path.read_text()) if group.main and path.exists() else None)
    if done is not None:
        return done
    if group.main:
        workdir.mkdir(parents=True, exist_ok=True)
    summary = run()
    if group.main:
        path.write_text(json.dumps(summary, indent=2, sort_keys=True, default=float))
    return summary


def plot_comparison(workdir: Path, plot_dir: Path, *, run_name: str) -> None:
    """`online_vs_offline.png`: validation error (held-out runs) and training
    loss against the optimiser step, offline and online."""
    records = {
        part: read_metrics(workdir / part / "metrics.jsonl") for part in ("offline", "online")
    }
    title = f"{run_name}: online vs offline, same model and steps"
    axes = plot_online_vs_offline(records, title=title)
    save_figure(axes[0], plot_dir / "online_vs_offline.png", dpi=110)


def train_and_evaluate(config, workdir) -> dict:
    workdir = Path(workdir)
    build = surrogate_builder(config)
    study = study_from_config(config)
    if int(config.offline.n_runs) >= study.n_runs:
        raise ValueError(
            f"config.offline.n_runs ({config.offline.n_runs}) must be smaller than "
            f"config.study.n_runs ({study.n_runs}): the online part streams more runs."
        )
    # The held-out runs, solved once (by process 0) where the online part reads them back.
    path = workdir / "online" / "validation.h5"
    solve = functools.partial(validation_data, study, path)  # a second call reads the cache
    test = ProcessGroup.current().on_main(solve, solve)
    offline = _part(
        workdir / "offline",
        lambda: run_offline(config, workdir / "offline", build(config, study), study, test),
    )
    online = _part(workdir / "online", lambda: run_online(config, workdir / "online", build)[1])
    if is_main_process():
        plot_dir = workdir / "plots"
        plot_dir.mkdir(parents=True, exist_ok=True)
        plot_comparison(workdir, plot_dir, run_name=str(config.name))
    off, on = offline["val_rel_l2"], online["val_rel_l2"]
    return {
        "problem": str(config.problem),
        "offline_test_rel_l2": off,
        "online_test_rel_l2": on,
        "improvement_percent": 100.0 * (off - on) / off,
        "steps": int(config.train.steps),
        "offline_steps": offline["steps"],
        "online_steps": online["steps"],
        "offline_runs": offline["runs"],
        "offline_epochs": offline["epochs"],
        "online_runs": online["runs_done"],
        "online_runs_planned": study.n_runs,
        "test_runs": study.n_validation,
        "val_rel_l2": on,
        "samples_received": online["samples_received"],
        "samples_trained": online["samples_trained"],
        "duplicates_dropped": online["duplicates_dropped"],
        "runs_failed": online["runs_failed"],
        "runs_diverged": online.get("runs_diverged"),  # None: an online part run before it
        "offline_train_seconds": offline["train_seconds"],
        "online_train_seconds": online["train_seconds"],
        "offline_final_loss": offline["final_loss"],
        "online_final_loss": online["final_loss"],
    }


def validate_config(config) -> None:
    """The online blocks and the model sizes, checked by the runner before
    anything is written."""
    validate_online_config(config)
    check_config(config, positive=("offline.n_runs",))


TASK = Task(
    train_and_evaluate,
    validate=validate_config,
    headline=Headline(
        "online_test_rel_l2", "online test rel. L2", "offline_test_rel_l2", "offline", percent=True
    ),
    data_parallel=True,
    renamed_keys=ONLINE_RENAMED_KEYS,
)
