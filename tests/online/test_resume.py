"""Server kill and resume: the trainer is SIGKILLed between two checkpoints and
started again on the same run directory. Every planned sample id ends up
accepted exactly once, no finished run is run again, and in the deterministic
mode (one solver job at a time, FIFO) the final parameters are those of an
uninterrupted run."""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from sciml.training import Checkpointer

from .resume_trainer import N_RUNS, N_STEPS


REPO = Path(__file__).resolve().parents[2]
PLANNED = {(r, k) for r in range(N_RUNS) for k in range(N_STEPS)}


def start_trainer(
    workdir: Path, buffer: str, concurrency: int, kill: tuple[int, int] | None = None
) -> subprocess.Popen:
    """Starts the trainer; `kill=(step, k)` makes it SIGKILL itself after a
    checkpoint (from step `step` on) that holds exactly `k` accepted steps of an
    unfinished run (see `resume_trainer`)."""
    command = [sys.executable, "-m", "tests.online.resume_trainer", str(workdir), buffer]
    command += [str(concurrency), *map(str, kill or ())]
    log = open(workdir.parent / f"{workdir.name}.log", "ab")
    with log:
        return subprocess.Popen(command, cwd=REPO, stdout=log, stderr=subprocess.STDOUT)


def finish(proc: subprocess.Popen, workdir: Path) -> dict:
    assert proc.wait(timeout=300) == 0, (workdir.parent / f"{workdir.name}.log").read_text()
    return json.loads((workdir / "summary.json").read_text())


def checkpoint_steps(workdir: Path) -> list[int]:
    """Finished checkpoints (orbax writes to a temporary name, then renames)."""
    path = workdir / "checkpoints"
    return sorted(int(p.name) for p in path.iterdir() if p.name.isdigit()) if path.exists() else []


def killed(proc: subprocess.Popen, workdir: Path) -> int:
    """Waits for the trainer to SIGKILL itself; returns the checkpoint it will
    resume from."""
    log = (workdir.parent / f"{workdir.name}.log").read_text
    assert proc.wait(timeout=240) == -signal.SIGKILL, log()
    assert "holding the receiver" in log() and not (workdir / "summary.json").exists()
    return checkpoint_steps(workdir)[-1]


def processes_using(path: Path) -> list[int]:
    """Ids of live processes whose command line mentions `path` (the solver jobs)."""
    pids = []
    for entry in Path("/proc").iterdir():
        try:
            if entry.name.isdigit() and str(path) in (entry / "cmdline").read_text():
                pids.append(int(entry.name))
        except OSError:  # ended meanwhile
            pass
    return pids


def saved_state(workdir: Path, step: int | None = None):
    checkpointer = Checkpointer(workdir / "checkpoints")
    try:
        return checkpointer.restore_extra(step)
    finally:
        checkpointer.close()


def check_resumed_exactly_once(workdir: Path, resumed_from: int, k: int) -> None:
    at_kill = saved_state(workdir, resumed_from)
    # the checkpoint holds k accepted steps of a run that still had steps to
    # send: they are resent after the restart, and only the accepted ids tell
    # the receiver to drop them (a resume that forgot them fails every time)
    runs = at_kill.data["runs"]
    assert any(n == k and s != "done" for n, s in zip(runs["received"], runs["status"]))
    final = saved_state(workdir)
    ids = [tuple(map(int, i)) for i in final.arrays["accepted"]]
    assert len(ids) == len(PLANNED) and set(ids) == PLANNED
    # what was accepted before the checkpoint is kept, in order
    before = [tuple(map(int, i)) for i in at_kill.arrays["accepted"]]
    assert 0 < len(before) < len(PLANNED) and ids[: len(before)] == before
    # no run that was done at the checkpoint is run again after the restart
    done = {r for r, status in enumerate(runs["status"]) if status == "done"}
    first_new_job = at_kill.data["counters"]["jobs_started"]
    jobs = workdir / "online" / "jobs"
    rerun = set()
    for spec in jobs.glob("job-*.json"):
        if int(spec.stem.split("-")[1]) >= first_new_job:
            rerun |= {r["run"] for r in json.loads(spec.read_text())["runs"]}
    assert rerun and not rerun & done, (sorted(rerun), sorted(done))
    assert all(status == "done" for status in final.data["runs"]["status"])


def wait_for_orphans_to_exit(workdir: Path) -> None:
    """Solver jobs of the killed trainer give up after the study's timeout (5 s)."""
    deadline = time.monotonic() + 30
    while processes_using(workdir):
        if time.monotonic() > deadline:
            for pid in processes_using(workdir):
                os.kill(pid, signal.SIGKILL)
            pytest.fail("solver jobs of the killed trainer were still running after 30 s")
        time.sleep(0.2)


# k accepted steps of an unfinished run at the kill: the first, the last but one
KILL_AFTER = [1, N_STEPS - 1]


@pytest.mark.slow
@pytest.mark.parametrize("k", KILL_AFTER)
def test_killed_trainer_resumes_to_the_parameters_of_an_uninterrupted_run(tmp_path, k):
    reference_dir, killed_dir = tmp_path / "reference", tmp_path / "killed"
    reference_dir.mkdir()
    killed_dir.mkdir()
    reference = start_trainer(reference_dir, "fifo", 1)
    resumed_from = killed(start_trainer(killed_dir, "fifo", 1, kill=(2, k)), killed_dir)
    expected = finish(reference, reference_dir)
    summary = finish(start_trainer(killed_dir, "fifo", 1), killed_dir)
    check_resumed_exactly_once(killed_dir, resumed_from, k)
    # 60 samples in batches of 4: 15 steps, every sample trained on once
    assert summary["steps"] == expected["steps"] == 15
    assert summary["samples_trained"] == expected["samples_trained"] == 60
    assert summary["samples_received"] == 60 and summary["runs_failed"] == 0
    # Same samples in the same order with the same step keys: the same
    # parameters. Measured: bit-identical; 1e-6 leaves room for reordered sums.
    np.testing.assert_allclose(
        np.load(killed_dir / "final.npy"), np.load(reference_dir / "final.npy"), atol=1e-6
    )
    wait_for_orphans_to_exit(killed_dir)


@pytest.mark.slow
@pytest.mark.parametrize("k", KILL_AFTER)
def test_killed_trainer_with_concurrent_solvers_accepts_each_id_once(tmp_path, k):
    workdir = tmp_path / "killed"
    workdir.mkdir()
    resumed_from = killed(start_trainer(workdir, "firo", 2, kill=(2, k)), workdir)
    summary = finish(start_trainer(workdir, "firo", 2), workdir)
    check_resumed_exactly_once(workdir, resumed_from, k)
    assert summary["samples_received"] == len(PLANNED) and summary["runs_failed"] == 0
    # FIRO reads each of the 60 samples twice: 30 batches of 4, across the restart
    assert summary["steps"] == 30 and summary["samples_trained"] == 120
    wait_for_orphans_to_exit(workdir)


def started(workdir: Path) -> list[Path]:
    """The logs of the solver jobs that have started a run."""
    logs = (workdir / "online" / "jobs").glob("job-*.log")
    return [log for log in logs if ": run " in log.read_text()]


def test_no_solver_outlives_a_killed_trainer_not_even_a_stopped_one(tmp_path):
    workdir = tmp_path / "killed"
    workdir.mkdir()
    proc = start_trainer(workdir, "fifo", 2)
    try:
        deadline = time.monotonic() + 240
        # both solver jobs have started their first run (a job's log says so)
        while len(started(workdir)) < 2:
            assert proc.poll() is None and time.monotonic() < deadline, "no solvers started"
            time.sleep(0.05)
        solvers = [pid for pid in processes_using(workdir) if pid != proc.pid]
        assert len(solvers) == 2
        os.kill(solvers[0], signal.SIGSTOP)  # a hung solver
        proc.send_signal(signal.SIGKILL)
        assert proc.wait(timeout=30) == -signal.SIGKILL
        # the study's timeout is 5 s: a solver that only noticed its trainer was
        # gone by a send timing out would still be here, a stopped one forever
        deadline = time.monotonic() + 3.0
        while processes_using(workdir) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert processes_using(workdir) == []  # measured: gone within 0.1 s
    finally:
        for pid in processes_using(workdir):
            os.kill(pid, signal.SIGKILL)
        if proc.poll() is None:
            proc.kill()
            proc.wait()
