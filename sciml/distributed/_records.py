"""Solver processes recorded by a trainer, so that the next one can reap them.

A process is named by its id *and* its start time (field 22 of
`/proc/<pid>/stat`, clock ticks since boot): a process id that was reused by
an unrelated process after the solver ended has another start time and is
left alone. Nothing is ever found or killed by name. Where `/proc` does not
exist (macOS, Windows) no start time can be read, nothing is recorded and
nothing is reaped; there the worker's parent watchdog is the only guard.
"""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path


#: The file in a study's jobs directory that lists its local solver processes.
PROCESSES_FILE = "processes.jsonl"


def start_time(pid: int) -> int | None:
    """The start time of process `pid` in clock ticks since boot, or `None`
    if it does not exist (or the platform has no `/proc`)."""
    try:
        stat = Path(f"/proc/{int(pid)}/stat").read_text()
    except OSError:
        return None
    # the command name (field 2) may hold spaces and parentheses: cut after the last ')'
    fields = stat[stat.rindex(")") + 2 :].split()
    return int(fields[19])  # field 22 of the whole line


def record(jobs_dir: Path, job: int, pid: int) -> None:
    """Appends process `pid` (running job `job`) to the jobs directory's list."""
    started = start_time(pid)
    if started is None:
        return
    with open(Path(jobs_dir) / PROCESSES_FILE, "a") as file:
        file.write(json.dumps({"job": int(job), "pid": int(pid), "start": started}) + "\n")


def reap(jobs_dir: Path) -> list[int]:
    """SIGKILLs each recorded process that still runs with its recorded start
    time (its whole process group when it leads one: a job is started in a
    session of its own), then forgets the list. Returns the ids of the
    processes killed."""
    path = Path(jobs_dir) / PROCESSES_FILE
    if not path.exists():
        return []
    killed = []
    for line in path.read_text().splitlines():
        try:
            entry = json.loads(line)
            pid, started = int(entry["pid"]), int(entry["start"])
        except (ValueError, KeyError, TypeError):
            continue  # a line cut by a crash while it was written
        if pid <= 1 or pid == os.getpid() or start_time(pid) != started:
            continue
        try:
            if os.getpgid(pid) == pid:
                os.killpg(pid, signal.SIGKILL)
            else:
                os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            continue
        killed.append(pid)
    path.unlink()
    return killed
