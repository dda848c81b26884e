"""The training loop: jitted steps, checkpoints, metrics, progress, NaN guard.

`fit` is the loop's outline; each of its rules (resume and checkpoints, the
metrics, progress and evaluation of the main process, the batches and the
processes' agreement before each) is owned by one collaborator in `_loop.py`.
"""

from __future__ import annotations

import dataclasses
import inspect
from collections.abc import Callable
from typing import Any, Protocol, runtime_checkable

import jax
import optax

from .._checks import check_key
from .._deprecated import settings_module_only
from ..distributed import ProcessGroup
from ._checkpoint import Extra
from ._interrupts import deferred_interrupts
from ._loop import Batches, Checkpoints, Log, State
from ._settings import TrainSettings, check_settings
from ._step import LossFn, init_opt_state, make_train_step


@runtime_checkable
class ExtraState(Protocol):
    """More training state that `fit` checkpoints with the model.

    `save()` returns an [`Extra`][sciml.training.Extra] (arrays and JSON data)
    that is written with each checkpoint; on resume `restore(extra)` receives
    the one saved with the checkpoint resumed from (None if it holds none).
    """

    def save(self) -> Extra: ...

    def restore(self, extra: Extra | None) -> None: ...


@dataclasses.dataclass
class FitResult:
    """What `fit` returns.

    - `model`, `opt_state`: the trained model and optimiser state;
    - `step`: the number of steps done in total (including resumed ones);
    - `metrics`: the last logged training metrics and the last evaluation;
    - `start_step`: the step this call resumed from (0 for a fresh run);
    - `ended_early`: `batch_fn` raised [`EndOfData`][sciml.training.EndOfData]
      before `steps`.
    """

    model: Any
    opt_state: Any
    step: int
    metrics: dict[str, float | int]
    key: jax.Array | None = None
    start_step: int = 0
    ended_early: bool = False


_split3 = jax.jit(lambda key: tuple(jax.random.split(key, 3)))


def _check_batch_fn(batch_fn: Callable) -> None:
    """`batch_fn` can be called as `batch_fn(step, key)` (a signature Python
    cannot read is taken on trust)."""
    try:
        signature = inspect.signature(batch_fn)
    except (TypeError, ValueError):
        return
    try:
        signature.bind(0, None)
    except TypeError:
        raise TypeError(
            f"`batch_fn` is called as `batch_fn(step, key)` (the step, an int, and a PRNG "
            f"key), but its signature is `{signature}`; define it as `def batch_fn(step, "
            "key): ...` (ignore `key` when the batches are not random)."
        ) from None


def _check_fit_arguments(model, loss_fn, batch_fn, optimizer, key, eval_fn) -> None:
    for name, fn in (("loss_fn", loss_fn), ("batch_fn", batch_fn)):
        if not callable(fn):
            raise TypeError(f"`{name}` must be a function, got {type(fn).__name__}.")
    _check_batch_fn(batch_fn)
    if eval_fn is not None and not callable(eval_fn):
        raise TypeError(
            f"`eval_fn` must be a function `model -> dict` or None, got {type(eval_fn).__name__}."
        )
    if not isinstance(optimizer, optax.GradientTransformation):
        fix = (
            " Build one from a config with `sciml.training.make_optimizer(config)`."
            if hasattr(optimizer, "keys")
            else ""
        )
        raise TypeError(
            f"`optimizer` must be an `optax.GradientTransformation`, got "
            f"{type(optimizer).__name__}.{fix}"
        )
    check_key("key", key)


@settings_module_only(TrainSettings, "settings", "fit(..., settings={module})")
def fit(
    model: Any,
    loss_fn: LossFn,
    batch_fn: Callable[[int, jax.Array], Any],
    *,
    optimizer: optax.GradientTransformation,
    key: jax.Array,
    settings: TrainSettings,
    eval_fn: Callable[[Any], dict[str, float]] | None = None,
    extra_state: ExtraState | None = None,
    monitor: Callable[[], dict[str, float]] | None = None,
) -> FitResult:
    """Trains `model` for `settings.steps` optimiser steps.

    Each step `t` splits the carried PRNG key into a batch key and a loss key,
    draws `batch = batch_fn(t, batch_key)` and applies one jitted step of
    `loss_fn(model, batch, loss_key) -> (loss, aux)`. Given the same `key`, a run
    is deterministic, and a resumed run ends with the same parameters as an
    uninterrupted one. `batch_fn` runs outside the compiled step; wrap it in
    `jax.jit` when it indexes arrays (eager gathers cost about a millisecond).

    With a `workdir`, checkpoints go to `workdir/checkpoints` (every
    `checkpoint_every` steps, at the end, and when interrupted by Ctrl-C or
    SIGTERM), metrics to `workdir/metrics.jsonl` and, as scalars at the same
    steps, to TensorBoard events in `workdir` (`tensorboard --logdir`
    compares runs). If `workdir/checkpoints`
    already holds checkpoints, training resumes from the latest one (printing
    `resuming from step N of M`); the metric lines logged after that checkpoint
    are dropped and recomputed, and a finished run called again (checkpoint at
    `steps`) trains nothing, says so, evaluates and writes no new lines. A
    checkpoint past `steps` raises `ResumePastEndError`: a run cannot train
    back. `fingerprint` names the run; a checkpoint folder written by another
    run is refused. `run_config` (JSON data) is stored in each checkpoint's
    metadata, so the model can be rebuilt from the run directory.

    Ctrl-C and SIGTERM only set a flag: the step in progress finishes (a
    `batch_fn` still waiting for data is given up), its loss is checked, one
    checkpoint is written and `KeyboardInterrupt` is raised. A checkpoint write
    is never cut short; a second signal stops at once, keeping the last
    checkpoint. The temporary folder of a write killed part-way is removed on
    resume.

    A stream of batches drives `fit` the same way: `batch_fn` may wait for data
    and raises [`EndOfData`][sciml.training.EndOfData] when its stream has
    ended; `extra_state` (an [`ExtraState`][sciml.training.ExtraState]) is
    checkpointed with the model and restored on resume; `monitor()` returns
    scalars (samples received, buffer fill, ...) logged with each training
    record. The progress display shows the loss, the first value of the last
    evaluation and the first value of `monitor()`; everything else is in
    `metrics.jsonl`.

    A non-finite loss or gradient raises `NonFiniteLossError` naming the step;
    no checkpoint is written after it. With `check_batch` (the default), a batch
    holding NaN or Inf raises `NonFiniteBatchError` (a `ValueError` and a
    `NonFiniteLossError`) naming `batch_fn` and the step: the
    compiled step reduces the batch to one finite flag, read with the loss at
    the next log or checkpoint boundary, so the check adds no synchronisation
    (its cost is in `docs/benchmarks.md`).

    **On several processes** (after
    [`initialize_processes`][sciml.distributed.initialize_processes]) every
    process calls `fit` with the same arguments; `batch_fn(step, key)` (the
    same `key` everywhere) returns this process's rows of the global batch
    ([`ProcessGroup.rows`][sciml.distributed.ProcessGroup.rows] takes them from
    a global batch). The model is replicated on every device of every
    process and each step's gradient is all-reduced, so the run trains as one
    process would on the global batch, within float32 round-off. Before each
    step the processes agree (one small all-gather) on whether any of them
    received a signal or saw `EndOfData`, so all stop at the same step; a
    batch a process had fetched for a step not taken is dropped. Process 0
    alone writes `metrics.jsonl`, shows progress and runs `eval_fn` (on its
    own copy of the model; the results go to every process); `monitor()` is
    called on every process at the same steps. Every process takes part in
    each checkpoint, which holds every process's `extra_state` (restored to
    each; such a checkpoint is refused on another number of processes, one
    without extra state resumes on any). `FitResult` holds each process's
    own copy of the model.

    **Arguments:** `model`; `loss_fn(model, batch, key) -> (scalar loss, dict of
    scalars)`; `batch_fn(step, key) -> batch`; `optimizer` an
    `optax.GradientTransformation` (build one from a config with
    [`make_optimizer`][sciml.training.make_optimizer]); `key` a PRNG key
    (`jax.random.key(0)`); `settings` the loop's
    [`TrainSettings`][sciml.training.TrainSettings] (`steps`, `workdir`,
    `checkpoint_every`, `keep_checkpoints`, `log_every`, `eval_every`,
    `progress`, `fingerprint`, `description`, `run_config`, `check_batch`);
    `eval_fn(model) -> dict of scalars`; `extra_state` and `monitor` as
    described above. The settings travel as one object only: `fit(...,
    steps=100)` raises a `TypeError` that shows `settings=TrainSettings(steps=100)`.

    **Returns:** a [`FitResult`][sciml.training.FitResult].
    """
    settings = check_settings(settings)
    _check_fit_arguments(model, loss_fn, batch_fn, optimizer, key, eval_fn)
    group = ProcessGroup.current()
    checkpoints = Checkpoints(settings, extra_state)
    log = Log(settings, group, eval_fn, monitor)
    state = State(model, init_opt_state(optimizer, model), key, 0)
    state, resumed = checkpoints.resume(state, settings.steps)
    start = state.step
    log.begin(start, resumed)
    train_step = make_train_step(loss_fn, optimizer, check_batch=bool(settings.check_batch))
    state = State(*group.replicate(state))
    ended_early = False
    with deferred_interrupts(settings.description, "the step in progress") as interrupts:
        batches = Batches(batch_fn, group, interrupts)
        try:
            while state.step < settings.steps:
                key, batch_key, loss_key = _split3(state.key)
                batch = batches.next(state.step, batch_key)
                if batch is None:
                    ended_early = True
                    break
                model, opt_state, loss, aux = train_step(
                    state.model, state.opt_state, batch, loss_key
                )
                state = State(model, opt_state, key, state.step + 1)
                log.add(state.step, loss, aux)
                at_checkpoint = checkpoints.due(state.step)
                if log.due(state.step, at_checkpoint):
                    log.flush(state.step)
                if at_checkpoint:
                    checkpoints.save(state, interrupts)
                if log.eval_due(state.step):
                    log.evaluate(state.model, state.step)
                log.advance()
            log.finish(state.model, state.step)
            checkpoints.save(state, interrupts)
            interrupts.check()
        except KeyboardInterrupt:
            # Keep finished work: check the pending steps, then checkpoint them
            # (once; a second signal gives them up and keeps the last checkpoint).
            if not interrupts.hard:
                log.flush(state.step)
                checkpoints.save(state, interrupts)
            raise
        finally:
            log.close()
            checkpoints.close()
    model, opt_state, key = group.local((state.model, state.opt_state, state.key))
    return FitResult(model, opt_state, state.step, log.metrics, key, start, ended_early)
