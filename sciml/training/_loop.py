"""The training loop's collaborators, each owning one rule of `fit`.

`fit` reads as the outline of its loop (as optimistix's `iterative_solve`
calls `init` / `step` / `terminate` / `postprocess`); what each step needs
done is done here:

- [`Checkpoints`][sciml.training._loop.Checkpoints]: resume from the latest
  checkpoint (refusing one past the last step), save one at a step (never cut
  by a signal, never twice at one step), with the extra state;
- [`Log`][sciml.training._loop.Log]: the losses of dispatched steps, read back
  at log boundaries; `metrics.jsonl` and its TensorBoard events, the progress
  display and the evaluations, all of them the main process's (the others
  take the evaluation's results);
- [`Batches`][sciml.training._loop.Batches]: each step's batch, and the
  processes' agreement before it on a signal or the end of the data, so that
  all of them stop at the same step.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, NamedTuple

import jax
import numpy as np

from ..distributed import ProcessGroup
from ._checkpoint import Checkpointer
from ._errors import EndOfData, NonFiniteBatchError, NonFiniteLossError, ResumePastEndError
from ._events import event_writer
from ._interrupts import Interrupts
from ._metrics import MetricsWriter
from ._progress import progress_bar
from ._settings import TrainSettings


class State(NamedTuple):
    """The whole training state, replaced by a single assignment, so an
    interrupt never sees a model and a step counter that disagree."""

    model: Any
    opt_state: Any
    key: jax.Array
    step: int


class Checkpoints:
    """`workdir/checkpoints` of a run (nothing without a `workdir`)."""

    def __init__(self, settings: TrainSettings, extra_state: Any):
        self.extra_state, self.every = extra_state, settings.checkpoint_every
        self.checkpointer = None
        if settings.workdir is not None:
            self.checkpointer = Checkpointer(
                Path(settings.workdir) / "checkpoints",
                keep=settings.keep_checkpoints,
                fingerprint=settings.fingerprint,
                run_config=settings.run_config,
                remove_unfinished=True,
            )

    def resume(self, state: State, steps: int) -> tuple[State, bool]:
        """`state` from the latest checkpoint (and the extra state restored),
        and whether there was one; a checkpoint past `steps` raises
        `ResumePastEndError`: a run cannot train back."""
        latest = None if self.checkpointer is None else self.checkpointer.latest_step()
        if latest is None:
            return state, False
        if latest > steps:
            self.close()
            raise ResumePastEndError(steps, latest, self.checkpointer.directory)
        state = State(*self.checkpointer.restore(state.model, state.opt_state))
        if self.extra_state is not None:
            self.extra_state.restore(self.checkpointer.restore_extra(state.step))
        return state, True

    def due(self, step: int) -> bool:
        return bool(self.every) and step % self.every == 0

    def save(self, state: State, interrupts: Interrupts) -> None:
        """Checkpoints `state` unless its step is saved already; a signal
        during the write waits for it."""
        if self.checkpointer is None or self.checkpointer.latest_step() == state.step:
            return
        with interrupts.writing():
            extra = self.extra_state.save() if self.extra_state is not None else None
            self.checkpointer.save(state.step, state.model, state.opt_state, state.key, extra)

    def close(self) -> None:
        if self.checkpointer is not None:
            self.checkpointer.close()


class Log:
    """Losses, metrics, progress and evaluation of one `fit` call.

    The main process alone writes `metrics.jsonl` (and each of its records
    into the directory's TensorBoard events), shows progress, prints and runs
    `eval_fn` (on its own copy of the model; the results go to every
    process). `monitor()` is called on every process at the same steps.
    """

    def __init__(
        self,
        settings: TrainSettings,
        group: ProcessGroup,
        eval_fn: Callable[[Any], Any] | None,
        monitor: Callable[[], dict[str, float]] | None,
    ):
        self.settings, self.group, self.eval_fn, self.monitor = settings, group, eval_fn, monitor
        workdir = settings.workdir
        self.writer = self.events = None
        if workdir is not None:
            self.writer = MetricsWriter(Path(workdir) / "metrics.jsonl", main=group.main)
            self.events, self.owns_events = event_writer(workdir, main=group.main)
        self.pending: list[tuple[int, jax.Array, dict[str, jax.Array]]] = []
        self.metrics: dict[str, float] = {}
        self.last_eval: dict[str, float] = {}
        self.last_monitored: dict[str, float | int] = {}
        self.start = 0
        self.bar = None

    def begin(self, start: int, resumed: bool) -> None:
        """Starts the display at `start`; a resumed run drops the lines logged
        after its checkpoint (they are recomputed) and says where it is."""
        steps, description = self.settings.steps, self.settings.description
        self.start = start
        if resumed:
            if self.writer is not None:
                self.metrics.update(_resumed_metrics(self.writer.truncate_after(start)))
                self.events.resume_after(start)
            note = (
                ": the run is finished, nothing is left to train (the saved model is evaluated "
                "again); give a larger `steps` to train on"
                if start == steps
                else ""
            )
            self.say(f"{description}: resuming from step {start} of {steps}{note}")
        self.last_eval = {k[5:]: v for k, v in self.metrics.items() if k.startswith("eval_")}
        shown = self.settings.progress and self.group.main
        self.bar = progress_bar(steps, initial=start, desc=description, disable=not shown)
        self.last_time, self.last_step = time.perf_counter(), start

    def say(self, line: str) -> None:
        if self.group.main:
            print(line, file=sys.stderr)

    def add(self, step: int, loss: jax.Array, aux: dict[str, jax.Array]) -> None:
        """A dispatched step's loss, read back at the next log boundary."""
        self.pending.append((step, loss, aux))

    def due(self, step: int, at_checkpoint: bool) -> bool:
        return step % self.settings.log_every == 0 or at_checkpoint or step == self.settings.steps

    def flush(self, step: int) -> None:
        """Checks every pending step (a non-finite one raises), then logs the
        last one with the rate and `monitor()`'s values."""
        pending, self.pending = self.pending, []
        record = _check_pending(pending)
        if record is None:
            return
        now = time.perf_counter()
        record["steps_per_s"] = (step - self.last_step) / max(now - self.last_time, 1e-9)
        self.last_time, self.last_step = now, step
        self.last_monitored = self.monitor() if self.monitor is not None else {}
        record.update(self.last_monitored)
        self.metrics.update(record)
        if self.writer is not None:
            self.writer.write({"split": "train", **record})
            self.events.scalars("train", step, record)
        self._show()

    def eval_due(self, step: int) -> bool:
        every = self.settings.eval_every
        return self.eval_fn is not None and bool(every) and step % every == 0

    def evaluate(self, model: Any, step: int) -> None:
        """`eval_fn` once, by the main process, on its own copy of the model;
        the results go to every process."""
        main = self.group.main
        results = _eval_results(self.eval_fn(self.group.local(model))) if main else None
        self.last_eval = self.group.broadcast(results)
        self.metrics.update({f"eval_{k}": v for k, v in self.last_eval.items()})
        self._show()
        if self.writer is not None and step > self.start:  # a finished run re-run logs nothing
            self.writer.write({"split": "eval", "step": step, **self.last_eval})
            self.events.scalars("eval", step, self.last_eval)

    def finish(self, model: Any, step: int) -> None:
        """The last log, and an evaluation unless this step had one."""
        self.flush(step)
        if self.eval_fn is not None and not (self.eval_due(step) and step > self.start):
            self.evaluate(model, step)

    def _show(self) -> None:  # the progress display's values, after each log and evaluation
        if "loss" in self.metrics:
            shown = _progress_values(self.metrics["loss"], self.last_eval, self.last_monitored)
            self.bar.set_postfix(shown)

    def advance(self) -> None:
        self.bar.update(1)  # after the step's log: its line shows this step's loss

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()
        if self.events is not None and self.owns_events:
            self.events.close()
        elif self.events is not None:  # the runner's: it writes the figures, then closes
            self.events.flush()


class Batches:
    """Each step's batch from `batch_fn` (global when several processes
    train), or None once the stream has ended.

    The processes agree first (one small all-gather), so all of them stop at
    the same step: on a signal any of them received, or when any `batch_fn`
    raised `EndOfData`; a batch a process had fetched for a step not taken is
    dropped. Waiting for data is given up on the first signal.
    """

    def __init__(self, batch_fn: Callable, group: ProcessGroup, interrupts: Interrupts):
        self.batch_fn, self.group, self.interrupts = batch_fn, group, interrupts

    def next(self, step: int, key: jax.Array) -> Any:
        group, interrupts = self.group, self.interrupts
        if group.single:
            interrupts.check()
        batch, ended = None, False
        if group.single or not interrupts.received:
            try:
                with interrupts.abandonable():
                    batch = self.batch_fn(step, group.local(key))
                if batch is None:
                    raise TypeError(
                        f"`batch_fn({step}, key)` returned None; return the step's batch "
                        "(raise `sciml.training.EndOfData` when a stream has ended)."
                    )
            except EndOfData:
                ended = True
            except KeyboardInterrupt:
                if group.single or interrupts.hard:
                    raise
        interrupted, ended = group.any(bool(interrupts.received), ended)
        if interrupted:
            raise KeyboardInterrupt("signal " + (interrupts.received or ["on another process"])[0])
        return None if ended else group.global_batch(batch)


def _as_float(x: Any) -> float:
    return float(np.asarray(x))


def _check_pending(pending: list) -> dict[str, float | int] | None:
    """Checks the losses of dispatched steps, read back only at log and
    checkpoint boundaries (reading a loss waits for its step): a checkpoint is
    written only after every step before it was checked, so a non-finite step
    never reaches disk. Returns the metrics of the last step."""
    last = None
    for step, loss, aux in pending:
        if "batch_finite" in aux and not bool(aux["batch_finite"]):
            raise NonFiniteBatchError(
                f"`batch_fn` returned a batch with NaN or infinite entries at step {step} "
                f"(`batch_fn({step - 1}, key)`); training stopped. Clean or mask the "
                "data, or set `TrainSettings(check_batch=False)` if non-finite entries are "
                "intended. The last checkpoint written before this step is intact."
            )
        if not bool(aux["finite"]):
            raise NonFiniteLossError(
                f"Non-finite loss or gradient at step {step} (loss={_as_float(loss)}, "
                f"grad_norm={_as_float(aux['grad_norm'])}); training stopped. "
                "The last checkpoint written before this step is intact."
            )
        last = {"step": step, "loss": _as_float(loss)}
        last.update(
            {k: _as_float(v) for k, v in aux.items() if k not in ("finite", "batch_finite")}
        )
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


def _resumed_metrics(records: list[dict[str, Any]]) -> dict[str, float]:
    """The last training and evaluation metrics among the `records` kept on resume."""
    metrics: dict[str, float] = {}
    for record in records:
        values = {k: v for k, v in record.items() if k != "split"}
        if record.get("split") == "eval":
            values.pop("step", None)
            metrics.update({f"eval_{k}": v for k, v in values.items()})
        else:
            metrics.update(values)
    return metrics
