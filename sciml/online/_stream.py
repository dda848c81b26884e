"""The trainer's side of a study: solver jobs in, batches out.

[`SampleStream`][sciml.online.SampleStream] wires three parts, each in its own
module, around one lock (a `threading.Condition`):

- **receiving** (this module): the receiver thread
  ([`SampleReceiver`][sciml.transport.SampleReceiver]) authenticates, checks and
  de-duplicates each message and calls the stream back; the stream puts the
  sample (its fields plus the run's parameters) into the buffer, waiting while
  the buffer is full (ZeroMQ then holds the solvers back). A sample with a NaN
  or an infinity never reaches the buffer: the attempt that sent it is retired
  and its run resubmitted, or failed and redrawn after `max_attempts` (so no
  checkpoint can hold a non-finite sample);
- **scheduling** (`_scheduler.py`): the scheduler thread keeps `concurrency`
  solver jobs running, notices a job that exited or went silent for `timeout`
  seconds (then kills it), and hands its unfinished runs back to the run table
  (resubmit, or redraw after `max_attempts`);
- **buffering** (`_buffered.py`): the buffer, its state and the accepted-id
  log; the training loop calls [`batch`][sciml.online.SampleStream.batch],
  which waits until the buffer can serve a batch (one buffer call per try) and
  raises [`EndOfData`][sciml.training.EndOfData] once every run has finished
  and the buffer is drained.

The stream is an [`ExtraState`][sciml.training.ExtraState] of `fit`: each
checkpoint holds the buffer's arrays and counters, the accepted-id log, the run
table and the counters, taken under the lock so they agree with each other. A
restarted trainer restores them before its first batch, then starts the
receiver (with the accepted ids, so nothing is accepted twice) and the
solvers (finished runs are not run again).
"""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

import jax
import numpy as np

from ..distributed import is_main_process
from ..training import EndOfData, Extra
from ..training._progress import show_status
from ..transport import (
    REJECT_REASONS,
    CloseStatus,
    Message,
    SampleReceiver,
    Schema,
    connect_address,
    new_secret,
)
from ._buffered import BufferedSamples
from ._buffers import AbstractBuffer
from ._launch import AbstractLauncher
from ._runs import DONE, FAILED, RunTable
from ._scheduler import TICK, EventLog, JobScheduler
from ._study import Study


class SampleStream:
    """Solver jobs in, batches out (see the module docstring).

    **Arguments:**

    - `study`: the [`Study`][sciml.online.Study].
    - `buffer`: a buffer module ([`FIFO`][sciml.online.FIFO],
      [`FIRO`][sciml.online.FIRO], [`Reservoir`][sciml.online.Reservoir]).
    - `example`: one sample's solver fields `{name: array}` (a validation
      step): fixes the names, shapes and dtypes the receiver accepts.
    - `batch_size`: samples per batch (checked here against the buffer, once:
      `AbstractBuffer.check_batch_size`).
    - `launcher`: an [`AbstractLauncher`][sciml.online.AbstractLauncher].
    - `workdir`: where job specs, solver logs and `events.jsonl` go.
    - `process` of `processes`: with several trainer processes, the share of the study's
      runs this stream runs and receives (see [`RunTable`][sciml.online.RunTable]).
    """

    def __init__(
        self,
        study: Study,
        buffer: AbstractBuffer,
        example: dict[str, np.ndarray],
        *,
        batch_size: int,
        launcher: AbstractLauncher,
        workdir: str | Path,
        process: int = 0,
        processes: int = 1,
    ):
        self.study, self.buffer, self.launcher = study, buffer, launcher
        self.batch_size = buffer.check_batch_size(batch_size)
        self.workdir = Path(workdir)
        fields = {name: np.asarray(x) for name, x in example.items()}
        self.schema = Schema.from_example(fields, study.n_steps)
        self.table = RunTable(
            study.space,
            study.sampler,
            n_runs=study.n_runs,
            n_steps=study.n_steps,
            seed=study.seed,
            max_attempts=study.max_attempts,
            process=process,
            processes=processes,
        )
        self.address = study.receiver_address(process, processes)
        sample = {**fields, "params": np.zeros(study.space.dim, np.float32)}
        self.samples = BufferedSamples(buffer, sample, self.batch_size)
        self.lock = threading.Condition()
        self.log = EventLog(self.workdir)
        self.scheduler = JobScheduler(
            study, self.table, launcher, lock=self.lock, log=self.log, workdir=self.workdir
        )
        self.secret = new_secret()
        self.receiver: SampleReceiver | None = None
        self.stopping = False
        self.waiting_seconds = 0.0
        self.started_at = time.perf_counter()
        self._rate_mark = (self.started_at, 0, 0)
        self._restored_receiver: dict[str, int] = {}

    @property
    def counters(self) -> dict[str, int]:
        """Samples `received`, `trained`, `batches`; `jobs_started`,
        `jobs_failed`, `jobs_hung` (a copy)."""
        return {**self.samples.counters, **self.scheduler.counters}

    # -- state for checkpoints (ExtraState) ----------------------------------

    def save(self) -> Extra:
        receiver = self._receiver_totals()  # outside our lock: the receiver has its own
        with self.lock:
            data = {"runs": self.table.to_json(), "counters": self.counters}
            data["receiver"] = receiver
            return Extra(self.samples.arrays(), data)

    def _receiver_totals(self) -> dict[str, int]:
        """The receiver's counters, added to those of the runs before a restart."""
        totals = dict(self._restored_receiver)
        if self.receiver is not None:
            for name, value in self.receiver.counters().items():
                totals[name] = totals.get(name, 0) + value
        return totals

    def restore(self, extra: Extra | None) -> None:
        if extra is None:
            return
        self.samples.restore(extra.arrays, extra.data["counters"])
        self.table.restore(extra.data["runs"])
        self.scheduler.restore(extra.data["counters"])
        self._restored_receiver = dict(extra.data.get("receiver", {}))

    # -- lifecycle --------------------------------------------------------------

    def start(self) -> None:
        """Starts the receiver and the scheduler (idempotent)."""
        if self.receiver is not None:
            return
        self.receiver = SampleReceiver(
            self.schema,
            self.secret,
            on_open=self._on_open,
            on_data=self._on_data,
            on_close=self._on_close,
            is_known_run=self._is_known,
            on_non_finite=self._on_non_finite,
            address=self.address,
            accepted=list(self.samples.accepted),
        )
        self.receiver.start()
        self.started_at = time.perf_counter()
        counters = self.samples.counters
        self._rate_mark = (self.started_at, counters["received"], counters["trained"])
        self.scheduler.start(connect_address(self.receiver.address), self.secret)

    def close(self) -> None:
        """Stops the scheduler, cancels running jobs, stops the receiver."""
        with self.lock:
            self.stopping = True
            self.lock.notify_all()
        self.scheduler.stop()
        if self.receiver is not None:
            self.receiver.stop()

    def __enter__(self) -> SampleStream:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    @property
    def ended(self) -> bool:
        """Every run is done or failed: no sample will arrive again."""
        return self.table.finished()

    # -- receiver callbacks (receiver thread) -------------------------------------

    def _is_known(self, run: int, attempt: int) -> bool:
        with self.lock:
            return self.table.is_known(run, attempt)

    def _on_open(self, msg: Message) -> None:
        with self.lock:
            self.scheduler.touch(msg.run, msg.attempt)

    def _on_close(self, msg: Message) -> None:
        with self.lock:
            self.scheduler.touch(msg.run, msg.attempt)
            if CloseStatus.of(msg.status) is not CloseStatus.OK:
                run = self.table.global_run(msg.run)
                self.log("run_error", run=run, attempt=msg.attempt, status=msg.status)

    def _on_non_finite(self, msg: Message) -> None:
        with self.lock:
            state = self.table.retire(msg.run, msg.attempt, msg.step)
            run = self.table.global_run(msg.run)
            self.log("run_non_finite", run=run, attempt=msg.attempt, step=msg.step, state=state)
            self.lock.notify_all()

    def _on_data(self, msg: Message) -> None:
        sample = dict(msg.fields)
        sample["params"] = self.table.params[msg.run].astype(np.float32)
        with self.lock:
            self.scheduler.touch(msg.run, msg.attempt)
            while not self.samples.can_put():
                if self.stopping:
                    return
                self.lock.wait(TICK)
                self.scheduler.touch(msg.run, msg.attempt)  # waiting on the trainer is not a hang
            self.samples.put(sample, (msg.run, msg.step))
            self.table.accept(msg.run)
            self.lock.notify_all()

    # -- training side -----------------------------------------------------------------

    def batch(self, key: jax.Array) -> dict[str, np.ndarray]:
        """The next batch `{name: (batch_size, ...)}` (fields and `"params"`).

        Waits until the buffer can serve one; raises
        [`EndOfData`][sciml.training.EndOfData] when every run has finished
        and the buffer cannot serve another batch.
        """
        self.start()
        with self.lock:
            waited = time.perf_counter()
            while True:
                if self.scheduler.error is not None:
                    raise RuntimeError("the solver scheduler failed") from self.scheduler.error
                if self.receiver.error is not None:
                    raise RuntimeError("receiving samples failed") from self.receiver.error
                ended = self.ended
                batch = self.samples.take(key, ended=ended)
                if batch is not None:
                    break
                if ended:
                    raise EndOfData
                if not self.samples.counters["batches"] and is_main_process(self.table.process):
                    show_status(self._filling())
                self.lock.wait(TICK)
            self.waiting_seconds += time.perf_counter() - waited
            self.lock.notify_all()
        return batch

    def _filling(self) -> str:
        """What the first batch waits for (the samples it needs: a batch, or
        the buffer's watermark)."""
        needed = max(self.batch_size, self.buffer.watermark)
        received = self.samples.counters["received"]
        return f"waiting for simulations to fill the buffer ({received} of {needed} samples)"

    def monitor(self) -> dict[str, float | int]:
        """Counters and rates for the progress bar and `metrics.jsonl`;
        `rejected_<reason>` once a message was rejected for that reason."""
        receiver = self._receiver_totals()
        with self.lock:
            now = time.perf_counter()
            then, received, trained = self._rate_mark
            span = max(now - then, 1e-9)
            counters = self.samples.counters
            values = {
                "received": counters["received"],
                "trained": counters["trained"],
                "received_per_s": (counters["received"] - received) / span,
                "trained_per_s": (counters["trained"] - trained) / span,
                "runs_done": self.table.count(DONE),
                "runs_failed": self.table.count(FAILED),
                "wait_fraction": self.waiting_seconds / max(now - self.started_at, 1e-9),
            }
            self._rate_mark = (now, counters["received"], counters["trained"])
            stats = self.samples.stats()
            values["fill"] = stats["fill"]
            values["reuse"] = stats["mean_seen"]
            values["duplicates"] = receiver.get("duplicates", 0)
            values["rejected"] = receiver.get("rejected", 0)
            # per reason once one occurred (a clean study's progress bar stays short)
            for reason, count in self._rejections(receiver).items():
                if count and reason != "duplicate":
                    values[f"rejected_{reason}"] = count
            return values

    @staticmethod
    def _rejections(receiver: dict[str, int]) -> dict[str, int]:
        """Messages dropped, by reason: each of `REJECT_REASONS` and `"duplicate"`."""
        counts = {reason: receiver.get(f"rejected_{reason}", 0) for reason in REJECT_REASONS}
        counts["duplicate"] = receiver.get("duplicates", 0)
        return counts

    def summary(self) -> dict[str, Any]:
        """Totals for `summary.json`."""
        counts = self._receiver_totals()
        counters = self.counters
        diverged = self.table.diverged_runs()
        return {
            "samples_received": counters["received"],
            "samples_trained": counters["trained"],
            "duplicates_dropped": counts.get("duplicates", 0),
            "messages_rejected": counts.get("rejected", 0),
            "rejections": self._rejections(counts),
            "runs_done": self.table.count(DONE),
            "runs_failed": self.table.count(FAILED),
            "failed_runs": self.table.failed_runs(),
            "runs_diverged": len(diverged),
            "diverged_runs": diverged,
            "jobs_started": counters["jobs_started"],
            "jobs_failed": counters["jobs_failed"],
            "jobs_hung": counters["jobs_hung"],
            "wait_fraction": self.waiting_seconds
            / max(time.perf_counter() - self.started_at, 1e-9),
        }
