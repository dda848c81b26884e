"""The training loop: jitted steps, checkpoints, metrics, progress, NaN guard."""

from __future__ import annotations

import dataclasses
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

import jax
import numpy as np
import optax

from .._checks import check_key
from .._deprecated import settings_module_only
from ..distributed import ProcessGroup
from ._checkpoint import Checkpointer, Extra
from ._interrupts import deferred_interrupts
from ._metrics import MetricsWriter
from ._progress import progress_bar
from ._settings import TrainSettings, check_settings
from ._step import LossFn, init_opt_state, make_train_step


class EndOfData(Exception):
    """Raised by a `batch_fn` when its stream has ended: no batch will come again.

    `fit` then stops before `steps`, as after the last step: it logs, evaluates
    and writes the final checkpoint. An online trainer raises it once every
    solver run has finished and its buffer is drained.
    """


@runtime_checkable
class ExtraState(Protocol):
    """More training state that `fit` checkpoints with the model.

    `save()` returns an [`Extra`][sciml.training.Extra] (arrays and JSON data)
    that is written with each checkpoint; on resume `restore(extra)` receives
    the one saved with the checkpoint resumed from (None if it holds none).
    """

    def save(self) -> Extra: ...

    def restore(self, extra: Extra | None) -> None: ...


class NonFiniteLossError(FloatingPointError):
    """Training produced a NaN or Inf loss or gradient."""


class ResumePastEndError(ValueError):
    """`fit` was asked for fewer `steps` than its run directory's checkpoint
    already holds: a run cannot train back, and returning the later model as
    if it had `steps` steps would mislabel it. Carries `steps`,
    `checkpoint_step` and `directory` (the checkpoint folder)."""

    def __init__(self, steps: int, checkpoint_step: int, directory: Path):
        self.steps, self.checkpoint_step, self.directory = steps, checkpoint_step, directory
        super().__init__(
            f"`steps` is {steps}, but {directory} holds a checkpoint at step "
            f"{checkpoint_step}: a run cannot train back to fewer steps. To train on, give "
            f"`steps` > {checkpoint_step}; to use the model as it is, read it with "
            "`sciml.training.restore_model`; to train anew, use another `workdir`."
        )


class NonFiniteBatchError(NonFiniteLossError, ValueError):
    """`batch_fn` returned a batch holding NaN or Inf (a `ValueError` about the
    data, and a `NonFiniteLossError` for code that guards training as a whole)."""


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


def _resumed_metrics(writer: MetricsWriter, start: int) -> dict[str, float]:
    """The last training and evaluation metrics logged up to `start`."""
    from ._metrics import read_metrics

    metrics: dict[str, float] = {}
    for record in read_metrics(writer.path):
        if record.get("step", 0) > start:
            continue
        values = {k: v for k, v in record.items() if k != "split"}
        if record.get("split") == "eval":
            values.pop("step", None)
            metrics.update({f"eval_{k}": v for k, v in values.items()})
        else:
            metrics.update(values)
    return metrics


_split3 = jax.jit(lambda key: tuple(jax.random.split(key, 3)))


def _as_float(x: Any) -> float:
    return float(np.asarray(x))


class _Pending:
    """Losses of dispatched steps, read back only at log / checkpoint boundaries.

    Reading a loss forces the device to finish the step, so the loop keeps the
    arrays and checks them in batches; a checkpoint is only written after every
    step before it has been checked, so a non-finite step never reaches disk.
    """

    def __init__(self):
        self.items: list[tuple[int, jax.Array, dict[str, jax.Array]]] = []

    def add(self, step: int, loss: jax.Array, aux: dict[str, jax.Array]) -> None:
        self.items.append((step, loss, aux))

    def flush(self) -> dict[str, float | int] | None:
        """Checks every pending step; returns the metrics of the last one."""
        last = None
        for step, loss, aux in self.items:
            if "batch_finite" in aux and not bool(aux["batch_finite"]):
                self.items = []
                raise NonFiniteBatchError(
                    f"`batch_fn` returned a batch with NaN or infinite entries at step {step} "
                    f"(`batch_fn({step - 1}, key)`); training stopped. Clean or mask the "
                    "data, or set `TrainSettings(check_batch=False)` if non-finite entries are intended. "
                    "The last checkpoint written before this step is intact."
                )
            if not bool(aux["finite"]):
                self.items = []
                raise NonFiniteLossError(
                    f"Non-finite loss or gradient at step {step} (loss={_as_float(loss)}, "
                    f"grad_norm={_as_float(aux['grad_norm'])}); training stopped. "
                    "The last checkpoint written before this step is intact."
                )
            last = {"step": step, "loss": _as_float(loss)}
            last.update(
                {k: _as_float(v) for k, v in aux.items() if k not in ("finite", "batch_finite")}
            )
        self.items = []
        return last


def _progress_values(
    loss: float, last_eval: dict[str, float], monitored: dict[str, float | int]
) -> dict[str, str]:
    """What the progress display shows: the loss, the first value of the last
    evaluation and the first value `monitor()` returns (all go to `metrics.jsonl`)."""
    shown = {"loss": f"{loss:.4g}"}
    for values in (last_eval, monitored):
        for name, value in list(values.items())[:1]:
            shown[name] = f"{int(value)}" if float(value).is_integer() else f"{value:.4g}"
    return shown


def _check_fit_arguments(model, loss_fn, batch_fn, optimizer, key, eval_fn) -> None:
    for name, fn in (("loss_fn", loss_fn), ("batch_fn", batch_fn)):
        if not callable(fn):
            raise TypeError(f"`{name}` must be a function, got {type(fn).__name__}.")
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


def _eval_results(results: Any) -> dict[str, float]:
    """`eval_fn`'s output as floats; a clear error when it is not a dict of scalars."""
    if not hasattr(results, "items"):
        raise TypeError(
            f"`eval_fn` must return a dict of scalars such as `{{'rel_l2': 0.1}}`, got "
            f"{type(results).__name__}."
        )
    out = {}
    for name, value in results.items():
        if np.ndim(value) != 0:
            raise ValueError(
                f"`eval_fn` must return scalars, but its entry {name!r} has shape "
                f"{np.shape(value)}; reduce it (e.g. `jnp.mean`) or log one entry per value."
            )
        out[str(name)] = _as_float(value)
    return out


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
    SIGTERM), metrics to `workdir/metrics.jsonl`. If `workdir/checkpoints`
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
    steps, workdir, description = settings.steps, settings.workdir, settings.description
    checkpoint_every, eval_every = settings.checkpoint_every, settings.eval_every

    group = ProcessGroup.current()
    opt_state = init_opt_state(optimizer, model)
    start = 0
    checkpointer = writer = None
    metrics: dict[str, float] = {}
    if workdir is not None:
        workdir = Path(workdir)
        checkpointer = Checkpointer(
            workdir / "checkpoints",
            keep=settings.keep_checkpoints,
            fingerprint=settings.fingerprint,
            run_config=settings.run_config,
            remove_unfinished=True,
        )
        writer = MetricsWriter(workdir / "metrics.jsonl") if group.main else None
        latest = checkpointer.latest_step()
        if latest is not None and latest > steps:
            checkpointer.close()
            raise ResumePastEndError(steps, latest, workdir / "checkpoints")
        if latest is not None:
            model, opt_state, key, start = checkpointer.restore(model, opt_state)
            if extra_state is not None:
                extra_state.restore(checkpointer.restore_extra(start))
            if writer is not None:
                writer.truncate_after(start)
                metrics.update(_resumed_metrics(writer, start))
            note = (
                ": the run is finished, nothing is left to train (the saved model is evaluated "
                "again); give a larger `steps` to train on"
                if start == steps
                else ""
            )
            if group.main:
                message = f"{description}: resuming from step {start} of {steps}{note}"
                print(message, file=sys.stderr)

    train_step = make_train_step(loss_fn, optimizer, check_batch=bool(settings.check_batch))
    pending = _Pending()
    model, opt_state, key = group.replicate((model, opt_state, key))
    show_progress = settings.progress and group.main
    bar = progress_bar(steps, initial=start, desc=description, disable=not show_progress)
    last_time, last_step = time.perf_counter(), start
    last_eval = {k[len("eval_") :]: v for k, v in metrics.items() if k.startswith("eval_")}
    last_monitored: dict[str, float | int] = {}

    def show() -> None:  # the progress display's values, after each log and evaluation
        if "loss" in metrics:
            bar.set_postfix(_progress_values(metrics["loss"], last_eval, last_monitored))

    def log(step: int) -> None:
        nonlocal last_time, last_step
        record = pending.flush()
        if record is None:
            return
        now = time.perf_counter()
        record["steps_per_s"] = (step - last_step) / max(now - last_time, 1e-9)
        last_time, last_step = now, step
        monitored = monitor() if monitor is not None else {}
        record.update(monitored)
        metrics.update(record)
        if writer is not None:
            writer.write({"split": "train", **record})
        last_monitored.clear()
        last_monitored.update(monitored)
        show()

    def evaluate(model: Any, step: int) -> None:
        # once, by process 0, on its own copy of the model; sent to the others
        results = _eval_results(eval_fn(group.local(model))) if group.main else None
        results = group.broadcast(results)
        last_eval.clear()
        last_eval.update(results)
        metrics.update({f"eval_{k}": v for k, v in results.items()})
        show()
        if writer is not None and step > start:  # a finished run re-run logs nothing
            writer.write({"split": "eval", "step": step, **results})

    def save(state: tuple) -> None:
        model, opt_state, key, step = state
        if checkpointer is not None and checkpointer.latest_step() != step:
            with interrupts.writing():  # never cut: a signal waits for the write
                extra = extra_state.save() if extra_state is not None else None
                checkpointer.save(step, model, opt_state, key, extra)

    def next_batch(step: int, batch_key: jax.Array) -> Any:
        """The step's batch (global when several processes train), or None
        once the stream has ended. Processes agree first, so all of them stop
        at the same step: on a signal any of them received, or when any
        `batch_fn` raised `EndOfData`."""
        batch, ended = None, False
        if group.single or not interrupts.received:
            try:
                with interrupts.abandonable():  # waiting for data is given up
                    batch = batch_fn(step, group.local(batch_key))
            except EndOfData:
                ended = True
            except KeyboardInterrupt:
                if group.single or interrupts.hard:
                    raise
        interrupted, ended = group.any(bool(interrupts.received), ended)
        if interrupted:
            raise KeyboardInterrupt("signal " + (interrupts.received or ["on another process"])[0])
        return None if ended else group.global_batch(batch)

    # The whole training state is one tuple, replaced by a single assignment, so
    # an interrupt never sees a model and a step counter that disagree.
    state = (model, opt_state, key, start)
    ended_early = False
    with deferred_interrupts(description, "the step in progress") as interrupts:
        try:
            while state[3] < steps:
                if group.single:
                    interrupts.check()
                model, opt_state, key, step = state
                key, batch_key, loss_key = _split3(key)
                batch = next_batch(step, batch_key)
                if batch is None:
                    ended_early = True
                    break
                model, opt_state, loss, aux = train_step(model, opt_state, batch, loss_key)
                step += 1
                pending.add(step, loss, aux)
                state = (model, opt_state, key, step)
                at_checkpoint = checkpoint_every and step % checkpoint_every == 0
                if step % settings.log_every == 0 or at_checkpoint or step == steps:
                    log(step)
                if at_checkpoint:
                    save(state)
                if eval_fn is not None and eval_every and step % eval_every == 0:
                    evaluate(model, step)
                bar.update(1)  # after the step's log: its line shows this step's loss
            model, opt_state, key, step = state
            log(step)
            if eval_fn is not None and not (eval_every and step % eval_every == 0 and step > start):
                evaluate(model, step)
            save(state)
            interrupts.check()
        except KeyboardInterrupt:
            # Keep finished work: check the pending steps, then checkpoint them
            # (once; a second signal gives them up and keeps the last checkpoint).
            if not interrupts.hard:
                log(state[3])
                save(state)
            raise
        finally:
            bar.close()
            if checkpointer is not None:
                checkpointer.close()
    model, opt_state, key = group.local((model, opt_state, key))
    return FitResult(
        model=model,
        opt_state=opt_state,
        step=step,
        metrics=metrics,
        key=key,
        start_step=start,
        ended_early=ended_early,
    )
