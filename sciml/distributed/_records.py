"""OS processes recorded where they work, so that whoever comes next can end them.

A process that starts others which may outlive it (a trainer starting solver
processes) records each in the folder it works in, in one `processes.jsonl`;
the next trainer of the run, or the `--processes` supervisor once its
children have ended, reaps what is still running. The supervisor looks at
every records file under the run directory, so it needs to know nothing of
who wrote them.

A process is named by its id *and* its start time (field 22 of
`/proc/<pid>/stat`, clock ticks since boot): a process id that was reused by
an unrelated process after the recorded one ended has another start time and
is left alone. Nothing is ever found or killed by name. Where `/proc` does
not exist (macOS, Windows) no start time can be read, nothing is recorded and
nothing is reaped; there a solver process's parent watchdog is the only guard.
"""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path


#: The file, in the folder a process works in, that lists the processes it started.
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


def record_process(folder: Path, pid: int, **about: int) -> None:
    """Appends process `pid` (and `about` it, e.g. `job=3`) to `folder`'s list."""
    started = start_time(pid)
    if started is None:
        return
    entry = {**{k: int(v) for k, v in about.items()}, "pid": int(pid), "start": started}
    with open(Path(folder) / PROCESSES_FILE, "a") as file:
        file.write(json.dumps(entry) + "\n")


def reap_processes(folder: Path) -> list[int]:
    """SIGKILLs each process recorded in `folder` that still runs with its
    recorded start time (its whole process group when it leads one: a solver
    job is started in a session of its own), then forgets the list.

    **Returns:** the ids of the processes killed.
    """
    path = Path(folder) / PROCESSES_FILE
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


def reap_all(root: Path) -> list[int]:
    """[`reap_processes`][sciml.distributed.reap_processes] for every records
    file under `root` (a run directory).

    **Returns:** the ids of the processes killed.
    """
    root = Path(root)
    folders = sorted(p.parent for p in root.rglob(PROCESSES_FILE)) if root.is_dir() else []
    return [pid for folder in folders for pid in reap_processes(folder)]
