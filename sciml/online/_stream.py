"""The trainer's side of a study: solver jobs in, batches out.

[`SampleStream`][sciml.online.SampleStream] owns the three moving parts and the
one lock between them:

- the **receiver** thread ([`SampleReceiver`][sciml.online.SampleReceiver])
  authenticates, checks and de-duplicates each message and puts the sample
  (its fields plus the run's parameters) into the buffer, waiting while the
  buffer is full (ZeroMQ then holds the solvers back); a sample with a NaN or
  an infinity never reaches the buffer: the attempt that sent it is retired
  and its run resubmitted, or failed and redrawn after `max_attempts` (so no
  checkpoint can hold a non-finite sample);
- the **scheduler** thread keeps `concurrency` solver jobs running, notices a
  job that exited or went silent for `timeout` seconds (then kills it), and
  hands its unfinished runs back to the run table (resubmit, or redraw after
  `max_attempts`);
- the **training loop** calls [`batch`][sciml.online.SampleStream.batch], which
  waits until the buffer can serve a batch and raises
  [`EndOfData`][sciml.training.EndOfData] once every run has finished and the
  buffer is drained.

The stream is an [`ExtraState`][sciml.training.ExtraState] of `fit`: each
checkpoint holds the buffer's arrays and counters, the accepted-id log, the run
table and the counters, taken under the lock so they agree with each other. A
restarted trainer restores them before its first batch, then starts the
receiver (with the accepted ids, so nothing is accepted twice) and the
solvers (finished runs are not run again).
"""

from __future__ import annotations

import dataclasses
import json
import threading
import time
from pathlib import Path
from typing import Any

import jax
import numpy as np

from ..training import EndOfData, Extra
from ._buffers import AbstractBuffer
from ._launch import AbstractLauncher, SolverJob
from ._runs import DONE, FAILED, RUNNING, RunTable
from ._status import CloseStatus, JobEnd
from ._study import Study
from ._transport import SampleReceiver, connect_address
from ._wire import REJECT_REASONS, Message, Schema, new_secret


# Seconds a job that failed is given for its last messages to arrive before
# its unfinished runs count as failed (re-sent steps are dropped anyway). A job
# that exited with status 0 had all its messages delivered (the worker exits
# only after `SolverClient.close` did), however long they wait behind a full
# buffer: its runs are waited for up to the study's `timeout` since its last
# message, not solved again.
_EXIT_GRACE = 5.0
_TICK = 0.05

_COUNTERS = ("received", "trained", "batches", "jobs_started", "jobs_failed", "jobs_hung")


@dataclasses.dataclass
class _Job:
    id: int
    runs: list[int]
    handle: Any
    last_activity: float
    heard: bool = False  # a message arrived (until then, start-up time is allowed too)
    exit_code: int | JobEnd | None = None
    exited_at: float | None = None


class SampleStream:
    """Solver jobs in, batches out (see the module docstring).

    **Arguments:**

    - `study`: the [`Study`][sciml.online.Study].
    - `buffer`: a buffer module ([`FIFO`][sciml.online.FIFO],
      [`FIRO`][sciml.online.FIRO], [`Reservoir`][sciml.online.Reservoir]).
    - `example`: one sample's solver fields `{name: array}` (a validation
      step): fixes the names, shapes and dtypes the receiver accepts.
    - `batch_size`: samples per batch.
    - `launcher`: an [`AbstractLauncher`][sciml.online.AbstractLauncher].
    - `workdir`: where job specs, solver logs and `events.jsonl` go.
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
    ):
        self.study, self.buffer, self.launcher = study, buffer, launcher
        self.batch_size = int(batch_size)
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
        )
        sample = {**fields, "params": np.zeros(study.space.dim, np.float32)}
        self.state = buffer.init(sample)
        self.accepted: list[tuple[int, int]] = []
        self.counters = dict.fromkeys(_COUNTERS, 0)
        self.waiting_seconds = 0.0
        self.secret = new_secret()
        self.lock = threading.Condition()
        self.jobs: dict[int, _Job] = {}
        self.run_job: dict[int, int] = {}
        self.next_job = 0
        self.receiver: SampleReceiver | None = None
        self.thread: threading.Thread | None = None
        self.stopping = False
        self.error: BaseException | None = None
        self.started_at = time.perf_counter()
        self._rate_mark = (self.started_at, 0, 0)
        self._restored_receiver: dict[str, int] = {}

    # -- state for checkpoints (ExtraState) ----------------------------------

    def save(self) -> Extra:
        receiver = self._receiver_totals()  # outside our lock: the receiver has its own
        with self.lock:
            leaves = jax.tree.leaves(self.state)
            arrays = {f"buffer/{i}": np.array(x, copy=True) for i, x in enumerate(leaves)}
            arrays["accepted"] = np.array(self.accepted, np.int64).reshape(-1, 2)
            data = {"runs": self.table.to_json(), "counters": dict(self.counters)}
            data["receiver"] = receiver
            return Extra(arrays, data)

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
        leaves, treedef = jax.tree.flatten(self.state)
        saved = [extra.arrays[f"buffer/{i}"] for i in range(len(leaves))]
        for new, old in zip(saved, leaves):
            if new.shape != old.shape or new.dtype != old.dtype:
                raise ValueError(
                    "the checkpoint's buffer does not match this study's buffer "
                    f"({new.dtype}{list(new.shape)} vs {old.dtype}{list(old.shape)}); "
                    "use another run directory."
                )
        self.state = jax.tree.unflatten(treedef, saved)
        self.accepted = [tuple(map(int, row)) for row in extra.arrays["accepted"]]
        self.table.restore(extra.data["runs"])
        self.counters.update(extra.data["counters"])
        # job ids go on where they stopped (specs and logs of old jobs are kept)
        self.next_job = self.counters["jobs_started"]
        self._restored_receiver = dict(extra.data.get("receiver", {}))

    # -- lifecycle --------------------------------------------------------------

    def start(self) -> None:
        """Starts the receiver and the scheduler (idempotent)."""
        if self.receiver is not None:
            return
        # a previous trainer's solvers must not keep sending (they would be
        # refused as of unknown runs, but cost the machine)
        reaped = self.launcher.reap_orphans(self.workdir / "jobs")
        if reaped:
            self._event("orphans_reaped", pids=reaped)
        self.receiver = SampleReceiver(
            self.schema,
            self.secret,
            on_open=self._on_open,
            on_data=self._on_data,
            on_close=self._on_close,
            is_known_run=self._is_known,
            on_non_finite=self._on_non_finite,
            address=self.study.address,
            accepted=list(self.accepted),
        )
        self.receiver.start()
        self.started_at = time.perf_counter()
        self._rate_mark = (self.started_at, self.counters["received"], self.counters["trained"])
        self.thread = threading.Thread(target=self._schedule_loop, name="scheduler", daemon=True)
        self.thread.start()

    def close(self) -> None:
        """Stops the scheduler, cancels running jobs, stops the receiver."""
        with self.lock:
            self.stopping = True
            self.lock.notify_all()
        if self.thread is not None:
            self.thread.join()
        for job in list(self.jobs.values()):
            self.launcher.cancel(job.handle)
        self.launcher.shutdown()
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

    def _touch(self, msg: Message) -> None:
        """A message of the running attempt of `msg.run` resets its job's hang
        timer (one of an earlier attempt does not)."""
        run = msg.run
        if self.table.status[run] != RUNNING or msg.attempt != self.table.attempts[run] - 1:
            return
        job = self.jobs.get(self.run_job.get(run, -1))
        if job is not None:
            job.last_activity = time.perf_counter()
            job.heard = True

    def _on_open(self, msg: Message) -> None:
        with self.lock:
            self._touch(msg)

    def _on_close(self, msg: Message) -> None:
        with self.lock:
            self._touch(msg)
            if CloseStatus.of(msg.status) is not CloseStatus.OK:
                self._event("run_error", run=msg.run, attempt=msg.attempt, status=msg.status)

    def _on_non_finite(self, msg: Message) -> None:
        with self.lock:
            state = self.table.retire(msg.run, msg.attempt)
            self._event(
                "run_non_finite", run=msg.run, attempt=msg.attempt, step=msg.step, state=state
            )
            self.lock.notify_all()

    def _on_data(self, msg: Message) -> None:
        sample = dict(msg.fields)
        sample["params"] = self.table.params[msg.run].astype(np.float32)
        with self.lock:
            self._touch(msg)
            while not self.buffer.can_put(self.state):
                if self.stopping:
                    return
                self.lock.wait(_TICK)
                self._touch(msg)  # waiting on the trainer is not a hang
            self.state = self.buffer.put(self.state, sample, (msg.run, msg.step))
            self.accepted.append((msg.run, msg.step))
            self.counters["received"] += 1
            self.table.accept(msg.run)
            self.lock.notify_all()

    # -- scheduler thread -------------------------------------------------------------

    def _event(self, kind: str, **fields: Any) -> None:
        record = {"time": time.time(), "event": kind, **fields}
        self.workdir.mkdir(parents=True, exist_ok=True)
        with open(self.workdir / "events.jsonl", "a") as f:
            f.write(json.dumps(record) + "\n")

    def _schedule_loop(self) -> None:
        try:
            while True:
                with self.lock:
                    if self.stopping:
                        return
                    self._schedule()
                    if self.ended:
                        self.lock.notify_all()
                time.sleep(_TICK)
        except BaseException as error:  # surfaced by the training loop
            with self.lock:
                self.error = error
                self.lock.notify_all()

    def _schedule(self) -> None:
        now = time.perf_counter()
        for job in list(self.jobs.values()):
            if job.exit_code is None:
                code = self.launcher.poll(job.handle)
                if code is None and not job.heard and not self.launcher.started(job.handle):
                    job.last_activity = now  # queued: its start-up clock has not begun
                limit = self.study.timeout + (0 if job.heard else self.study.start_timeout)
                if code is None and now - job.last_activity > limit:
                    self.launcher.cancel(job.handle)
                    code = JobEnd.TIMEOUT
                    self.counters["jobs_hung"] += 1
                if code is not None:
                    job.exit_code, job.exited_at = code, now
                    if code != 0:
                        self.counters["jobs_failed"] += 1
                        self._event("job_failed", job=job.id, runs=job.runs, exit=code)
            if job.exited_at is not None:
                # a run retired and resubmitted meanwhile belongs to its new job
                waiting = [
                    r
                    for r in job.runs
                    if self.table.status[r] == RUNNING and self.run_job[r] == job.id
                ]
                if job.exit_code == 0:
                    since, limit = max(job.exited_at, job.last_activity), self.study.timeout
                else:
                    since, limit = job.exited_at, _EXIT_GRACE
                if waiting and now - since < limit:
                    continue
                for run in waiting:
                    state = self.table.ended(run)
                    self._event("run_" + state, run=run, attempts=self.table.attempts[run])
                del self.jobs[job.id]
        pending = self.table.pending()
        while pending and len(self.jobs) < self.study.concurrency:
            runs, pending = pending[: self.study.runs_per_job], pending[self.study.runs_per_job :]
            self._submit(runs)

    def _submit(self, runs: list[int]) -> None:
        specs = self.table.start(runs)
        job_id = self.next_job
        self.next_job += 1
        job = SolverJob(
            job=job_id,
            solver=self.study.solver,
            settings=dict(self.study.settings),
            address=connect_address(self.receiver.address),
            n_steps=self.study.n_steps,
            runs=tuple(specs),
            timeout=self.study.timeout,
        )
        jobs_dir = self.workdir / "jobs"
        spec_path = job.write(jobs_dir / f"job-{job_id}.json")
        handle = self.launcher.submit(job, spec_path, self.secret, jobs_dir / f"job-{job_id}.log")
        self.jobs[job_id] = _Job(job_id, list(runs), handle, time.perf_counter())
        for run in runs:
            self.run_job[run] = job_id
        self.counters["jobs_started"] += 1

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
                if self.error is not None:
                    raise RuntimeError("the solver scheduler failed") from self.error
                if self.receiver.error is not None:
                    raise RuntimeError("receiving samples failed") from self.receiver.error
                ended = self.ended
                if self.buffer.can_get(self.state, self.batch_size, ended=ended):
                    break
                if ended and self.buffer.exhausted(self.state, self.batch_size, ended=True):
                    raise EndOfData
                self.lock.wait(_TICK)
            self.waiting_seconds += time.perf_counter() - waited
            self.state, batch, _ = self.buffer.get(self.state, self.batch_size, key, ended=ended)
            self.counters["trained"] += self.batch_size
            self.counters["batches"] += 1
            self.lock.notify_all()
        return batch

    def monitor(self) -> dict[str, float | int]:
        """Counters and rates for the progress bar and `metrics.jsonl`;
        `rejected_<reason>` once a message was rejected for that reason."""
        receiver = self._receiver_totals()
        with self.lock:
            now = time.perf_counter()
            then, received, trained = self._rate_mark
            span = max(now - then, 1e-9)
            values = {
                "received": self.counters["received"],
                "trained": self.counters["trained"],
                "received_per_s": (self.counters["received"] - received) / span,
                "trained_per_s": (self.counters["trained"] - trained) / span,
                "runs_done": self.table.count(DONE),
                "runs_failed": self.table.count(FAILED),
                "wait_fraction": self.waiting_seconds / max(now - self.started_at, 1e-9),
            }
            self._rate_mark = (now, self.counters["received"], self.counters["trained"])
            stats = self.buffer.stats(self.state)
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
        return {
            "samples_received": self.counters["received"],
            "samples_trained": self.counters["trained"],
            "duplicates_dropped": counts.get("duplicates", 0),
            "messages_rejected": counts.get("rejected", 0),
            "rejections": self._rejections(counts),
            "runs_done": self.table.count(DONE),
            "runs_failed": self.table.count(FAILED),
            "failed_runs": self.table.failed_runs(),
            "jobs_started": self.counters["jobs_started"],
            "jobs_failed": self.counters["jobs_failed"],
            "jobs_hung": self.counters["jobs_hung"],
            "wait_fraction": self.waiting_seconds
            / max(time.perf_counter() - self.started_at, 1e-9),
        }
