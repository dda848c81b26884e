"""The local supervisor: one run as N processes of this machine.

[`run_processes`][sciml.distributed.run_processes] starts N children, each
the given command with the environment of its place in the run
(`SCIML_PROCESSES`, `SCIML_PROCESS_ID` and `JAX_COORDINATOR_ADDRESS`; see
[`initialize_processes`][sciml.distributed.initialize_processes]), and waits
for them; the runner's `--processes N` is this supervisor around its own
command.

The children run in sessions of their own, so a Ctrl-C at the terminal
reaches them only through the supervisor, which forwards every SIGINT or
SIGTERM it gets once to each child still running (a child takes a second one
as "stop at once"). When a child fails, the others' next collective fails
within milliseconds; the supervisor gives them `GRACE_SECONDS` to end on
their own, then sends SIGTERM and, `GRACE_SECONDS` later, SIGKILL. Once
every child has ended, the processes a killed child left behind are killed
too: every process recorded under the run directory (see
[`record_process`][sciml.distributed.record_process]), whoever recorded it.
On a machine with GPUs, each child takes an equal block of them
(`JAX_LOCAL_DEVICE_IDS`) when N divides their number.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

from ._records import reap_all
from ._runtime import ENV_COORDINATOR, ENV_PROCESS_ID, ENV_PROCESSES


GRACE_SECONDS = 5.0
_POLL_SECONDS = 0.05


def gpu_share(index: int, count: int, gpus: int) -> str | None:
    """The GPUs process `index` of `count` takes on a machine with `gpus`
    (`JAX_LOCAL_DEVICE_IDS`, e.g. `"2,3"`): an equal block each when `count`
    divides `gpus`; None otherwise (no GPU, or shares that would not be
    equal: every process then sees every GPU, and JAX's own error says so)."""
    if gpus == 0 or gpus % count:
        return None
    share = gpus // count
    return ",".join(str(i) for i in range(index * share, (index + 1) * share))


def _count_gpus() -> int:
    """NVIDIA GPUs this machine has (`nvidia-smi -L`; 0 without it)."""
    try:
        listed = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return 0
    return sum(line.startswith("GPU ") for line in listed.stdout.splitlines())


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _exit_status(code: int) -> int:
    """A child's exit status as a shell shows it (a death by signal `s` as 128 + s)."""
    return 128 - code if code < 0 else code


def run_processes(
    command: list[str],
    count: int,
    workdir: Path,
    *,
    grace: float = GRACE_SECONDS,
    env: dict[str, str] | None = None,
) -> int:
    """Runs `command` (a program and its arguments) as `count` processes of one
    run in `workdir`, and waits for them (see the module's description); `env`
    adds to the environment each process is given.

    **Returns:** 130 when interrupted (SIGINT or SIGTERM), else the exit
    status of a child killed by a signal s from outside (128 + s), else the
    first non-zero exit status of a child, else 0.
    """
    received: list[int] = []

    def on_signal(signum, frame):
        received.append(signum)

    handlers = {s: signal.signal(s, on_signal) for s in (signal.SIGINT, signal.SIGTERM)}
    children: list[subprocess.Popen] = []
    forwarded: list[int] = []  # how many of `received` each child was sent
    failed: tuple[int, int] | None = None  # (process, exit status) of the first failure
    failed_at = terminated_at = None
    try:
        address = f"127.0.0.1:{_free_port()}"
        gpus = 0 if "JAX_LOCAL_DEVICE_IDS" in os.environ else _count_gpus()
        for index in range(count):
            given = {
                **os.environ,
                **(env or {}),
                ENV_PROCESSES: str(count),
                ENV_PROCESS_ID: str(index),
                ENV_COORDINATOR: address,
            }
            share = gpu_share(index, count, gpus)
            if share is not None:  # a workstation's GPUs, shared out
                given["JAX_LOCAL_DEVICE_IDS"] = share
            children.append(subprocess.Popen(command, env=given, start_new_session=True))
            forwarded.append(0)
        while True:
            for index, child in enumerate(children):
                while forwarded[index] < len(received) and child.poll() is None:
                    forwarded[index] += 1
                    child.send_signal(received[forwarded[index] - 1])
            codes = [child.poll() for child in children]
            for index, code in enumerate(codes):
                if failed is None and code not in (None, 0):
                    failed, failed_at = (index, _exit_status(code)), time.monotonic()
            if all(code is not None for code in codes):
                break
            now = time.monotonic()
            if failed_at is not None and terminated_at is None and now > failed_at + grace:
                _signal_all(children, signal.SIGTERM)
                terminated_at = now
            if terminated_at is not None and now > terminated_at + grace:
                _signal_all(children, signal.SIGKILL)
            time.sleep(_POLL_SECONDS)
    finally:
        _signal_all(children, signal.SIGKILL)  # only when the parent itself failed
        for child in children:
            child.wait()
        for signum, handler in handlers.items():
            signal.signal(signum, handler)
        _reap_left_behind(workdir)
    killed = [i for i, child in enumerate(children) if child.returncode < 0]
    if failed is not None and terminated_at is None and killed:
        # a process killed from outside is the cause, whichever the parent saw
        # end first: the others failed at their next collective with it
        failed = (killed[0], _exit_status(children[killed[0]].returncode))
    if failed is not None and not received:
        index, status = failed
        stopped = "; the others were stopped" if terminated_at is not None else ""
        print(
            f"process {index} of {count} ended with exit status {status}{stopped}.", file=sys.stderr
        )
    if received:
        return 130
    return 0 if failed is None else failed[1]


def _signal_all(children: list[subprocess.Popen], signum: int) -> None:
    for child in children:
        if child.poll() is None:
            child.send_signal(signum)


def _reap_left_behind(workdir: Path) -> None:
    """Kills the processes recorded under `workdir` that still run (left
    behind by a killed child: a trainer's solver processes, say)."""
    killed = len(reap_all(workdir))
    if killed:
        print(
            f"killed {killed} process{'es' if killed != 1 else ''} left behind by a stopped "
            f"process of the run (recorded under {workdir}).",
            file=sys.stderr,
        )
