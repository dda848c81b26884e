"""`train_online`: `sciml.training.fit` driven by a study's stream of samples.

The loop is `fit`'s own (the jitted step, checkpoints, metrics, progress, NaN
guard, Ctrl-C / SIGTERM handling); this module only supplies what differs:

- the batches come from a [`SampleStream`][sciml.online.SampleStream] (solver
  jobs → receiver thread → buffer), and the run ends early with
  [`EndOfData`][sciml.training.EndOfData] once every run has finished and the
  buffer is drained;
- the stream's state (buffer, accepted ids, run table) is checkpointed with the
  model, so a killed trainer resumes without accepting a sample twice or
  re-running a finished run;
- validation runs are solved once at the start (cached to HDF5; a diverging
  one is replaced by a new draw, and the study stops before training if that
  fails `max_attempts` times) and evaluated every `eval_every` steps in the
  training thread, while the receiver thread keeps receiving;
- batches are split over all local devices (`jax.sharding`, data parallel:
  the model is replicated, the batch axis sharded), when there is more than one;
- on several processes (`jax.process_count() > 1`: `fit` on a
  [`ProcessGroup`][sciml.distributed.ProcessGroup]) each trainer process has
  a stream of its own: its share of the runs, its receiver, buffer and solver
  jobs in `online/process-<r>/` (see `_shared.py`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from pathlib import Path
from typing import Any

import jax
import numpy as np
import optax
from jax.sharding import Mesh, NamedSharding, PartitionSpec

from .._deprecated import settings_module_only
from ..distributed import ProcessGroup, equal_share
from ..training import FitResult, TrainSettings, fit
from ..training._settings import check_settings
from ._buffers import AbstractBuffer
from ._launch import AbstractLauncher, LocalLauncher
from ._shared import merged_monitor, merged_summary, process_folder, shared_validation
from ._stream import SampleStream
from ._study import Study, validation_runs


#: Keys of the validation data that are not solver fields.
BOOKKEEPING = ("params", "run", "step")


@dataclasses.dataclass
class OnlineResult:
    """What [`train_online`][sciml.online.train_online] returns.

    - `model`: the trained model;
    - `fit`: the [`FitResult`][sciml.training.FitResult] of the loop;
    - `summary`: samples received and trained, duplicates dropped, messages
      rejected (in total and, under `"rejections"`, by reason), runs done and
      failed (with their parameters), runs that diverged (`runs_diverged`,
      and under `diverged_runs` each with its parameters and first non-finite
      step), validation draws that diverged and were replaced (likewise,
      `validation_runs_diverged` and `validation_diverged_runs`), jobs
      started, failed and hung, and the fraction of the loop spent waiting
      for data; with several trainer processes, the sums over processes (the
      wait fraction: the mean, and each process's in
      `wait_fraction_by_process`) and `processes`;
    - `validation`: the validation data (`{name: array}`).
    """

    model: Any
    fit: FitResult
    summary: dict[str, Any]
    validation: dict[str, np.ndarray]


def data_sharding(batch_size: int, devices: list | None = None) -> NamedSharding | None:
    """Sharding of a batch's leading axis over `devices` (default: all local
    devices); None for a single device."""
    devices = jax.local_devices() if devices is None else list(devices)
    if len(devices) == 1:
        return None
    equal_share(batch_size, len(devices), "`batch_size`", among="devices")
    return NamedSharding(Mesh(np.array(devices), ("data",)), PartitionSpec("data"))


@settings_module_only(TrainSettings, "settings", "train_online(..., settings={module})")
def train_online(
    study: Study,
    model: Any,
    loss_fn: Callable,
    *,
    buffer: AbstractBuffer,
    optimizer: optax.GradientTransformation,
    batch_size: int,
    key: jax.Array,
    settings: TrainSettings,
    launcher: AbstractLauncher | None = None,
    evaluate: Callable[[Any, dict[str, np.ndarray]], dict[str, float]] | None = None,
    devices: list | None = None,
) -> OnlineResult:
    """Trains `model` on samples streamed by the study's solver runs.

    **Arguments:**

    - `study`: the [`Study`][sciml.online.Study] (solver, parameters, runs).
    - `model`, `optimizer`, `key`: as in [`fit`][sciml.training.fit].
    - `loss_fn(model, batch, key) -> (loss, aux)`: `batch` is a dict of the
      solver's fields `(batch_size, *shape)` plus `"params"`
      `(batch_size, n_params)`, the parameters of each sample's run.
    - `buffer`: the training buffer module.
    - `batch_size`: samples per step (a multiple of the number of devices;
      with several trainer processes, each draws `batch_size / processes` of
      them from its own buffer).
    - `launcher`: default [`LocalLauncher`][sciml.online.LocalLauncher]`()`.
    - `evaluate(model, validation) -> dict of scalars`: the validation metric,
      run every `eval_every` steps and at the end on the validation data
      (same layout as a batch, all validation steps at once).
    - `devices`: the devices a batch is split over (default: all local ones;
      with several processes, every process's devices, and `devices` must
      stay None).
    - `settings`: the loop's [`TrainSettings`][sciml.training.TrainSettings],
      as in `fit` (`settings=TrainSettings(steps=2500, workdir=...)`).
      Training stops at `steps` or earlier, when the stream has ended.
      `workdir` is required: the run directory of checkpoints,
      `metrics.jsonl`, `validation.h5`, and `online/` (job specs, solver logs,
      `events.jsonl`). A directory with checkpoints is resumed.

    On several processes (`jax.process_count() > 1`) process `r` of `P` runs
    its share of the study's runs (global runs `r, r + P, …`) with its own
    receiver (see `Study.address`), buffer and solver jobs, in
    `online/process-<r>/`. Process 0 solves the validation runs, the others
    read them from `validation.h5`. Every step takes `batch_size / P` samples
    from each process's buffer and waits for every process: a process waiting
    for data holds the step up, and its wait fraction shows it. The job ends
    when any process's stream has ended (samples left in the other processes'
    buffers stay untrained), so give every process the same number of runs
    (`n_runs` a multiple of `P`). A checkpoint holds every process's stream
    and is resumed by as many processes.

    **Returns:** an [`OnlineResult`][sciml.online.OnlineResult].
    """
    settings = check_settings(settings)
    if settings.workdir is None:
        raise ValueError("`workdir` is required: online training keeps its run directory.")
    workdir = Path(settings.workdir)
    group = ProcessGroup.current()
    if group.single:
        sharding = data_sharding(batch_size, devices)
        validation, diverged = validation_runs(study, workdir / "validation.h5")
        online = workdir / "online"
    else:
        if devices is not None:
            raise ValueError(
                f"`devices` must be None on {group.count} processes: a batch is split over "
                "every process's devices."
            )
        batch_size, sharding = equal_share(batch_size, group.count, "`batch_size`"), None
        validation, diverged = shared_validation(study, workdir / "validation.h5", group)
        online = process_folder(workdir / "online", group.index)
    example = {name: x[0] for name, x in validation.items() if name not in BOOKKEEPING}
    stream = SampleStream(
        study,
        buffer,
        example,
        batch_size=batch_size,
        launcher=LocalLauncher() if launcher is None else launcher,
        workdir=online,
        process=group.index,
        processes=group.count,
    )

    def batch_fn(step: int, batch_key: jax.Array) -> dict[str, jax.Array]:
        if not group.single:  # each process's buffer draws with its own key
            batch_key = jax.random.fold_in(batch_key, group.index)
        batch = stream.batch(batch_key)
        return jax.device_put(batch, sharding) if sharding is not None else batch

    eval_fn = None if evaluate is None else (lambda m: evaluate(m, validation))
    try:
        result = fit(
            model,
            loss_fn,
            batch_fn,
            optimizer=optimizer,
            key=key,
            settings=settings,
            eval_fn=eval_fn,
            extra_state=stream,
            monitor=lambda: merged_monitor(stream.monitor(), group),
        )
    finally:
        stream.close()  # also when another process died: no solver outlives its trainer
    summary = merged_summary(stream.summary(), group)
    summary["validation_runs_diverged"] = len(diverged)
    summary["validation_diverged_runs"] = diverged
    summary["steps"] = result.step
    summary["ended_early"] = result.ended_early
    return OnlineResult(model=result.model, fit=result, summary=summary, validation=validation)
