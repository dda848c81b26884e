"""Scheduling a study's solver jobs: keep `concurrency` running, retire the dead.

`JobScheduler` runs one thread that,
every tick, polls each job through the launcher, notices a job that exited or
went silent for `Study.timeout` seconds (then kills it), hands its unfinished
runs back to the [`RunTable`][sciml.online.RunTable] (resubmit, or redraw
after `max_attempts`), and submits pending runs, `runs_per_job` to a job,
until `concurrency` jobs are running. Every message of a run's running attempt
resets its job's hang timer (`touch`).

The scheduler shares the stream's lock (a `threading.Condition`): its tick and
`touch` run under it, so the run table is only ever changed under that lock.
"""

from __future__ import annotations

import dataclasses
import json
import threading
import time
from pathlib import Path
from typing import Any

from ..transport import JobEnd, SolverJob
from ._launch import AbstractLauncher
from ._runs import RUNNING, RunTable
from ._study import Study


# Seconds a job that failed is given for its last messages to arrive before
# its unfinished runs count as failed (re-sent steps are dropped anyway). A job
# that exited with status 0 had all its messages delivered (the worker exits
# only after `SolverClient.close` did), however long they wait behind a full
# buffer: its runs are waited for up to the study's `timeout` since its last
# message, not solved again.
_EXIT_GRACE = 5.0
TICK = 0.05  # seconds between the scheduler's checks (and the stream's waits)

COUNTERS = ("jobs_started", "jobs_failed", "jobs_hung")


class EventLog:
    """Appends one JSON line per event to `workdir / "events.jsonl"`."""

    def __init__(self, workdir: Path):
        self.workdir = Path(workdir)

    def __call__(self, kind: str, **fields: Any) -> None:
        record = {"time": time.time(), "event": kind, **fields}
        self.workdir.mkdir(parents=True, exist_ok=True)
        with open(self.workdir / "events.jsonl", "a") as f:
            f.write(json.dumps(record) + "\n")


@dataclasses.dataclass
class _Job:
    id: int
    runs: list[int]
    handle: Any
    last_activity: float
    heard: bool = False  # a message arrived (until then, start-up time is allowed too)
    exit_code: int | JobEnd | None = None
    exited_at: float | None = None


class JobScheduler:
    """Keeps a study's solver jobs running (see the module docstring).

    **Arguments:** the [`Study`][sciml.online.Study], its
    [`RunTable`][sciml.online.RunTable], the launcher, the `lock` shared with
    the stream, the `log` of events, and `workdir` (job specs and solver logs go
    to `workdir / "jobs"`).

    `counters` holds `jobs_started`, `jobs_failed`, `jobs_hung`; `error` the
    exception that stopped the thread, if any.
    """

    def __init__(
        self,
        study: Study,
        table: RunTable,
        launcher: AbstractLauncher,
        *,
        lock: threading.Condition,
        log: EventLog,
        workdir: Path,
    ):
        self.study, self.table, self.launcher = study, table, launcher
        self.lock, self.log = lock, log
        self.jobs_dir = Path(workdir) / "jobs"
        self.counters = dict.fromkeys(COUNTERS, 0)
        self.jobs: dict[int, _Job] = {}
        self.run_job: dict[int, int] = {}
        self.address: str | None = None
        self.secret: bytes | None = None
        self.thread: threading.Thread | None = None
        self.stopping = False
        self.error: BaseException | None = None

    def restore(self, counters: dict[str, int]) -> None:
        """Counters of a checkpoint; job ids go on where they stopped."""
        self.counters.update({name: counters[name] for name in COUNTERS})

    def start(self, address: str, secret: bytes) -> None:
        """Reaps a previous trainer's solvers, then starts the thread; jobs
        connect to `address` with `secret`."""
        # a previous trainer's solvers must not keep sending (they would be
        # refused as of unknown runs, but cost the machine)
        reaped = self.launcher.reap_orphans(self.jobs_dir)
        if reaped:
            self.log("orphans_reaped", pids=reaped)
        self.address, self.secret = address, secret
        self.thread = threading.Thread(target=self._loop, name="scheduler", daemon=True)
        self.thread.start()

    def stop(self) -> None:
        """Stops the thread and cancels every running job."""
        with self.lock:
            self.stopping = True
            self.lock.notify_all()
        if self.thread is not None:
            self.thread.join()
        for job in list(self.jobs.values()):
            self.launcher.cancel(job.handle)
        self.launcher.shutdown()

    def touch(self, run: int, attempt: int) -> None:
        """A message of the running attempt of `run` resets its job's hang
        timer (one of an earlier attempt does not). Call under the lock."""
        if self.table.status[run] != RUNNING or attempt != self.table.attempts[run] - 1:
            return
        job = self.jobs.get(self.run_job.get(run, -1))
        if job is not None:
            job.last_activity = time.perf_counter()
            job.heard = True

    def _loop(self) -> None:
        try:
            while True:
                with self.lock:
                    if self.stopping:
                        return
                    self._tick()
                    if self.table.finished():
                        self.lock.notify_all()
                time.sleep(TICK)
        except BaseException as error:  # surfaced by the training loop
            with self.lock:
                self.error = error
                self.lock.notify_all()

    def _tick(self) -> None:
        now = time.perf_counter()
        for job in list(self.jobs.values()):
            if job.exit_code is None:
                self._poll(job, now)
            if job.exited_at is not None and self._settled(job, now):
                del self.jobs[job.id]
        pending = self.table.pending()
        while pending and len(self.jobs) < self.study.concurrency:
            runs, pending = pending[: self.study.runs_per_job], pending[self.study.runs_per_job :]
            self._submit(runs)

    def _poll(self, job: _Job, now: float) -> None:
        """Notes a job's exit, or kills it once silent past its time limit."""
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
                runs = [self.table.global_run(r) for r in job.runs]
                self.log("job_failed", job=job.id, runs=runs, exit=code)

    def _settled(self, job: _Job, now: float) -> bool:
        """Whether an exited job's runs are settled: its last messages had their
        time to arrive, and each run it left unfinished was ended in the table."""
        # a run retired and resubmitted meanwhile belongs to its new job
        waiting = [
            r for r in job.runs if self.table.status[r] == RUNNING and self.run_job[r] == job.id
        ]
        if job.exit_code == 0:
            since, limit = max(job.exited_at, job.last_activity), self.study.timeout
        else:
            since, limit = job.exited_at, _EXIT_GRACE
        if waiting and now - since < limit:
            return False
        for run in waiting:
            state = self.table.ended(run)
            attempts = self.table.attempts[run]
            self.log("run_" + state, run=self.table.global_run(run), attempts=attempts)
        return True

    def _submit(self, runs: list[int]) -> None:
        specs = self.table.start(runs)
        job_id = self.counters["jobs_started"]
        job = SolverJob(
            job=job_id,
            simulation=self.study.simulation,
            settings=dict(self.study.settings),
            address=self.address,
            n_steps=self.study.n_steps,
            runs=tuple(specs),
            timeout=self.study.timeout,
        )
        spec_path = job.write(self.jobs_dir / f"job-{job_id}.json")
        handle = self.launcher.submit(
            job, spec_path, self.secret, self.jobs_dir / f"job-{job_id}.log"
        )
        self.jobs[job_id] = _Job(job_id, list(runs), handle, time.perf_counter())
        for run in runs:
            self.run_job[run] = job_id
        self.counters["jobs_started"] += 1
