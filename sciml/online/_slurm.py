"""The Slurm launcher: each solver job is one Slurm batch job.

`submit` writes a short batch script beside the job's spec (the `setup` lines,
then `exec python -m sciml.transport.worker JOB.json`) and hands it to
`sbatch --parsable --export=ALL`, run with the solver's environment: the
study's secret reaches the job through that environment only, never through
the command line or the script. `poll` asks `squeue` for the states of all of
this launcher's jobs at once (at most every `poll_interval` seconds); an ended
job's exit status comes from `scontrol show job`, else from `sacct`, and a job
that none of them knows any more counts as failed. `cancel` is `scancel`.

**Why `sbatch` and not submitit.** submitit learns a job's state from
`sacct` only, which needs the cluster's accounting database (slurmdbd): on a
cluster without one (the single-node test cluster has
`AccountingStorageType=accounting_storage/none`) every job reads `UNKNOWN`,
with neither its end nor its exit status, and a cancelled job cannot be told
from a finished one. It also runs a pickled callable, where a solver job here
is a plain command (`worker_command`) whose spec is JSON. `squeue` and
`scontrol` answer on every cluster; `sacct` is used when it works.
"""

from __future__ import annotations

import dataclasses
import logging
import re
import shlex
import shutil
import signal
import subprocess
import time
from collections.abc import Sequence
from pathlib import Path

from .._checks import check_positive_finite, check_positive_int
from ..transport import SolverJob
from ._launch import AbstractLauncher, solver_environment, worker_command


_log = logging.getLogger(__name__)

#: Slurm's states of a job that has ended (any other state: queued or running).
ENDED_STATES = frozenset(
    {
        "BOOT_FAIL",
        "CANCELLED",
        "COMPLETED",
        "DEADLINE",
        "FAILED",
        "NODE_FAIL",
        "OUT_OF_MEMORY",
        "PREEMPTED",
        "REVOKED",
        "SPECIAL_EXIT",
        "TIMEOUT",
    }
)
#: States of a job that has not started yet.
QUEUED_STATES = frozenset({"PENDING", "REQUEUED", "REQUEUE_FED", "REQUEUE_HOLD", "RESV_DEL_HOLD"})
# The status a job that did not complete gets when Slurm reports exit code 0:0
# (cancelled while pending, for instance): never 0, negative for the signal
# Slurm sends (SIGTERM on cancel, time limit, preemption; SIGKILL by the
# out-of-memory killer or with a lost node), 1 otherwise.
_UNSUCCESSFUL = {
    "CANCELLED": -signal.SIGTERM,
    "DEADLINE": -signal.SIGTERM,
    "PREEMPTED": -signal.SIGTERM,
    "TIMEOUT": -signal.SIGTERM,
    "OUT_OF_MEMORY": -signal.SIGKILL,
    "NODE_FAIL": -signal.SIGKILL,
}
#: The state given to a job that `squeue`, `scontrol` and `sacct` no longer know.
LOST = "LOST"
_SBATCH_TIMEOUT = 60
_LOST_AFTER = 2  # refreshes in a row that miss a job before it counts as lost
_COMMANDS = ("sbatch", "squeue", "scontrol", "scancel")
_TIME = re.compile(r"^(\d+-\d+(:\d+){0,2}|\d+(:\d+){0,2})$")
_MEMORY = re.compile(r"^\d+[KMGT]?$")


def check_time(value: str | int | None) -> str | None:
    """A Slurm time limit (`--time`): minutes, `MM:SS`, `HH:MM:SS`,
    `D-HH[:MM[:SS]]` or `"UNLIMITED"`; None leaves the partition's default."""
    if value is None:
        return None
    if isinstance(value, int) and not isinstance(value, bool) and value > 0:
        return str(value)
    if isinstance(value, str) and (_TIME.match(value) or value in ("UNLIMITED", "INFINITE")):
        return value
    raise ValueError(
        "`time` must be a Slurm time limit: minutes (an int or '30'), 'MM:SS', 'HH:MM:SS', "
        f"'D-HH', 'D-HH:MM', 'D-HH:MM:SS' or 'UNLIMITED', got {value!r}."
    )


def exit_status(state: str, exit_code: str | None) -> int | None:
    """A job's status in the `poll` convention: None while `state` is not an
    ended state; else 0 for `COMPLETED`, and for any other end the signal
    (negative) or the exit code of Slurm's `ExitCode` `"code:signal"`, never 0.

    **Arguments:** `state` (`"RUNNING"`, `"CANCELLED by 0"`, ...), `exit_code`
    (`"3:0"`, `"0:15"`, or None when unknown).
    """
    state = state.split()[0] if state.strip() else state
    state = state.rstrip("+")  # sacct's "CANCELLED+" (cut to the column width)
    if state == LOST:
        return 1
    if state not in ENDED_STATES:
        return None
    code, sig = 0, 0
    if exit_code and re.fullmatch(r"\d+:\d+", exit_code):
        code, sig = map(int, exit_code.split(":"))
    sig = sig if sig < 65 else 0  # Slurm writes 0:125 for some out-of-memory ends
    if state == "COMPLETED":
        return -sig if sig else code
    if sig:
        return -sig
    return code or _UNSUCCESSFUL.get(state, 1)


def parse_squeue(text: str) -> dict[str, str]:
    """`squeue -h -o "%i|%T"` lines → `{job id: state}`."""
    states = {}
    for line in text.splitlines():
        job_id, sep, state = line.strip().partition("|")
        if sep:
            states[job_id.strip()] = state.strip()
    return states


def parse_scontrol(text: str) -> tuple[str, str | None] | None:
    """`scontrol show job -o ID` → `(JobState, ExitCode)`, None without a `JobState`."""
    state = re.search(r"(?:^|\s)JobState=(\S+)", text)
    code = re.search(r"(?:^|\s)ExitCode=(\d+:\d+)", text)
    if state is None:
        return None
    return state.group(1), None if code is None else code.group(1)


def parse_sacct(text: str, job_id: str) -> tuple[str, str | None] | None:
    """`sacct -n -P -X -o JobID,State,ExitCode -j ID` → `(State, ExitCode)` of
    the job's last record, None when it has none."""
    found = None
    for line in text.splitlines():
        parts = line.strip().split("|")
        if len(parts) >= 3 and parts[0] == job_id:
            found = (parts[1], parts[2] or None)
    return found


@dataclasses.dataclass
class SlurmJob:
    """The handle of a submitted job: Slurm's job id, its last known state and
    (once ended) its exit status."""

    job_id: str
    name: str
    state: str = "PENDING"
    exit_status: int | None = None
    misses: int = 0


class SlurmLauncher(AbstractLauncher):
    """Solver jobs as Slurm batch jobs (one `sbatch` per job, see the module docstring).

    The trainer must run where `sbatch`, `squeue`, `scontrol` and `scancel`
    reach the cluster (a login node, or a job of the cluster itself), and the
    compute nodes must see the same Python environment and run directory
    (a shared file system) and reach the study's address.

    **Arguments:**

    - `partition`: `--partition` (None: the cluster's default).
    - `time`: `--time`, the wall-time limit of one job (minutes or Slurm's
      `D-HH:MM:SS` forms; None: the partition's default). A job that hits it
      is killed and its unfinished runs are resubmitted.
    - `cpus_per_task`: `--cpus-per-task` (default 1).
    - `mem`: `--mem` per node (`"4G"`, `"500M"`, or megabytes as an int; None:
      the cluster's default).
    - `sbatch_args`: more `sbatch` options, e.g. `["--account=proj",
      "--qos=short", "--gres=gpu:1"]`; they come after this launcher's own, so
      they win.
    - `setup`: shell lines the batch script runs before the solver
      (`["module load cuda", "source venv/bin/activate"]`).
    - `env`: extra environment variables for the solver jobs.
    - `cpu_only`: run JAX solvers on the CPU (`JAX_PLATFORMS=cpu`, default True).
    - `threads`: CPU threads per solver for XLA and BLAS (default `cpus_per_task`).
    - `job_name`: prefix of the Slurm job names (`"{job_name}-{job id}"`).
    - `poll_interval`: seconds between two `squeue` calls (default 5).
    """

    def __init__(
        self,
        *,
        partition: str | None = None,
        time: str | int | None = None,
        cpus_per_task: int = 1,
        mem: str | int | None = None,
        sbatch_args: Sequence[str] = (),
        setup: Sequence[str] = (),
        env: dict[str, str] | None = None,
        cpu_only: bool = True,
        threads: int | None = None,
        job_name: str = "sciml-solver",
        poll_interval: float = 5.0,
    ):
        missing = [c for c in _COMMANDS if shutil.which(c) is None]
        if missing:
            raise RuntimeError(
                f"Slurm's commands {', '.join(missing)} are not on PATH: SlurmLauncher "
                "submits with sbatch, so the trainer must run on a machine of the cluster "
                "(a login node or a job); use LocalLauncher to run solvers on this machine."
            )
        if partition is not None and (not isinstance(partition, str) or not partition.strip()):
            raise ValueError(f"`partition` must be a partition name or None, got {partition!r}.")
        self.time = check_time(time)
        cpus_per_task = check_positive_int("cpus_per_task", cpus_per_task)
        if isinstance(mem, int) and not isinstance(mem, bool) and mem > 0:
            mem = str(mem)
        if mem is not None and not (isinstance(mem, str) and _MEMORY.match(mem)):
            raise ValueError(
                f"`mem` must be a Slurm memory size ('4G', '500M', or megabytes), got {mem!r}."
            )
        for name, value in (("sbatch_args", sbatch_args), ("setup", setup)):
            if isinstance(value, str) or not all(isinstance(v, str) for v in value):
                raise ValueError(f"`{name}` must be a list of strings, got {value!r}.")
        if threads is None:
            threads = cpus_per_task
        threads = check_positive_int("threads", threads)
        if not re.fullmatch(r"[A-Za-z0-9_.-]+", job_name):
            raise ValueError(
                f"`job_name` must be letters, digits, '_', '.', '-', got {job_name!r}."
            )
        check_positive_finite("poll_interval", poll_interval)
        self.partition = partition
        self.cpus_per_task = cpus_per_task
        self.mem = mem
        self.sbatch_args = list(sbatch_args)
        self.setup = list(setup)
        self.env = dict(env or {})
        self.cpu_only = bool(cpu_only)
        self.threads = threads
        self.job_name = job_name
        self.poll_interval = float(poll_interval)
        self._jobs: dict[str, SlurmJob] = {}  # not yet ended
        self._refreshed = -float("inf")
        self._warned_loopback = False

    # -- submission ----------------------------------------------------------------

    def sbatch_command(self, script: Path, log_path: Path, name: str) -> list[str]:
        """The `sbatch` command line of one job (no secret in it)."""
        args = ["sbatch", "--parsable", "--export=ALL", "--no-requeue", f"--job-name={name}"]
        output = str(log_path).replace("%", "%%")  # sbatch reads % as a pattern
        args += [f"--output={output}", "--open-mode=append"]
        if self.partition is not None:
            args.append(f"--partition={self.partition}")
        if self.time is not None:
            args.append(f"--time={self.time}")
        args.append(f"--cpus-per-task={self.cpus_per_task}")
        if self.mem is not None:
            args.append(f"--mem={self.mem}")
        return [*args, *self.sbatch_args, str(script)]

    def batch_script(self, spec_path: Path) -> str:
        """The batch script of one job: the `setup` lines, then the worker."""
        lines = ["#!/bin/bash", "# a sciml.online solver job (the secret is in its environment)"]
        lines += self.setup
        lines.append("exec " + shlex.join(worker_command(spec_path)))
        return "\n".join(lines) + "\n"

    def submit(self, job: SolverJob, spec_path: Path, secret: bytes, log_path: Path) -> SlurmJob:
        spec_path, log_path = Path(spec_path).absolute(), Path(log_path).absolute()
        if not self._warned_loopback and re.match(r"tcp://(127\.|localhost|\[::1\])", job.address):
            self._warned_loopback = True
            _log.warning(
                "the study listens on %s, a loopback address: solver jobs on other nodes "
                "cannot reach it; set the study's address to 'tcp://0.0.0.0:PORT'.",
                job.address,
            )
        log_path.parent.mkdir(parents=True, exist_ok=True)
        script = spec_path.with_suffix(".sh")
        script.write_text(self.batch_script(spec_path))
        name = f"{self.job_name}-{job.job}"
        env = solver_environment(secret, threads=self.threads, cpu_only=self.cpu_only, env=self.env)
        try:
            result = subprocess.run(
                self.sbatch_command(script, log_path, name),
                env=env,
                stdin=subprocess.DEVNULL,
                capture_output=True,
                text=True,
                timeout=_SBATCH_TIMEOUT,
            )
        except subprocess.TimeoutExpired:
            raise RuntimeError(
                f"sbatch did not answer within {_SBATCH_TIMEOUT} s (is slurmctld reachable?)."
            ) from None
        job_id = result.stdout.strip().split(";")[0]  # "ID" or "ID;cluster"
        if result.returncode != 0 or not job_id.isdigit():
            raise RuntimeError(
                f"sbatch failed to submit solver job {job.job} (exit status "
                f"{result.returncode}): {result.stderr.strip() or result.stdout.strip()}"
            )
        handle = SlurmJob(job_id, name)
        self._jobs[job_id] = handle
        return handle

    # -- state -----------------------------------------------------------------------

    def poll(self, handle: SlurmJob) -> int | None:
        if handle.exit_status is None and time.monotonic() - self._refreshed >= self.poll_interval:
            self.refresh()
        return handle.exit_status

    def started(self, handle: SlurmJob) -> bool:
        return handle.state not in QUEUED_STATES

    def refresh(self) -> None:
        """Updates every running job's state: one `squeue` call, and for each job
        that ended (or left the queue) one `scontrol` (or `sacct`) call."""
        self._refreshed = time.monotonic()
        if not self._jobs:
            return
        ids = ",".join(self._jobs)
        result = _run(["squeue", "-h", "-o", "%i|%T", "--states=all", "-j", ids])
        if result is None:
            return
        listed = parse_squeue(result.stdout)
        if result.returncode != 0 and not listed and "Invalid job id" not in result.stderr:
            _log.warning("squeue failed (will retry): %s", result.stderr.strip())
            return
        for job_id, handle in list(self._jobs.items()):
            state = listed.get(job_id)
            if state is not None and exit_status(state, "0:0") is None:
                handle.state, handle.misses = state, 0
                continue
            final = self._final_state(job_id)
            if final is None:
                handle.misses += 1
                if handle.misses < _LOST_AFTER:
                    continue
                final = (LOST, None)
            state, code = final
            status = exit_status(state, code)
            if status is None:  # still completing
                handle.state = state
                continue
            handle.state, handle.exit_status = state.split()[0], status
            del self._jobs[job_id]
            if status != 0:
                _log.info("Slurm job %s (%s) ended: %s, %s", job_id, handle.name, state, code)

    def _final_state(self, job_id: str) -> tuple[str, str | None] | None:
        result = _run(["scontrol", "show", "job", "-o", job_id])
        found = None if result is None or result.returncode else parse_scontrol(result.stdout)
        if found is None and shutil.which("sacct"):
            result = _run(["sacct", "-n", "-P", "-X", "-o", "JobID,State,ExitCode", "-j", job_id])
            if result is not None and result.returncode == 0:
                found = parse_sacct(result.stdout, job_id)
        return found

    # -- stopping ------------------------------------------------------------------

    def cancel(self, handle: SlurmJob) -> None:
        if handle.exit_status is None:
            _run(["scancel", handle.job_id])

    def shutdown(self) -> None:
        if self._jobs:
            _run(["scancel", *self._jobs])


def _run(args: list[str]) -> subprocess.CompletedProcess | None:
    """Runs a Slurm query; None (and a warning) when it cannot run or hangs."""
    try:
        return subprocess.run(
            args, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=30
        )
    except (OSError, subprocess.TimeoutExpired) as error:
        _log.warning("%s failed (will retry): %s", args[0], error)
        return None
