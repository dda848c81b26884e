"""`--processes N`: one run trained by N processes of this machine.

The command becomes a parent that checks the config, settles the run
directory and starts N children, each the same command without
`--processes` and with the run directory fixed (`--workdir W`, or
`--resume W`). The children join JAX's multi-process runtime through their
environment (`SCIML_PROCESSES`, `SCIML_PROCESS_ID` and
`JAX_COORDINATOR_ADDRESS`; see `sciml.training.initialize_processes`) and
train together; process 0 writes the files and prints the verdict.

The children run in sessions of their own, so a Ctrl-C at the terminal
reaches them only through the parent, which forwards every SIGINT or SIGTERM
it gets once to each child still running (a child takes a second one as
"stop at once"). When a child fails, the others' next collective fails within
milliseconds; the parent gives them `GRACE_SECONDS` to end on their own, then
sends SIGTERM and, `GRACE_SECONDS` later, SIGKILL. Once every child has
ended, the simulation processes that a killed child left behind (recorded in
the `jobs` folders under `W/online/`) are killed too. On a machine with
GPUs, each child takes an equal block of them (`JAX_LOCAL_DEVICE_IDS`) when
N divides their number.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from types import ModuleType

import ml_collections

from ._errors import ConfigError


FLAG = "--processes"
GRACE_SECONDS = 5.0
_POLL_SECONDS = 0.05


def split_processes(argv: list[str]) -> tuple[int, list[str]]:
    """Takes `--processes N` (or `--processes=N`) out of `argv`.

    **Returns:** the number of processes (1 when not given) and the other
    arguments, in their order.

    **Raises:** [`ConfigError`][sciml.experiment.ConfigError] for a value that
    is not a whole number of at least 1.
    """
    count, rest, i = None, [], 0
    while i < len(argv):
        arg = argv[i]
        if arg == FLAG:
            if i + 1 >= len(argv):
                raise ConfigError(f"{FLAG}: missing value (a number of processes, at least 1).")
            count, i = argv[i + 1], i + 2
        elif arg.startswith(FLAG + "="):
            count, i = arg[len(FLAG) + 1 :], i + 1
        else:
            rest.append(arg)
            i += 1
    if count is None:
        return 1, rest
    try:
        number = int(count)
    except ValueError:
        number = 0
    if number < 1:
        raise ConfigError(f"{FLAG} takes a whole number of processes, at least 1; got {count!r}.")
    return number, rest


def check_processes(config: ml_collections.ConfigDict, task: ModuleType, count: int) -> None:
    """Refuses to train `config` on `count` > 1 processes when its task
    does not declare `DATA_PARALLEL = True`, or when `train.batch_size` is not
    a multiple of `count` (each process trains on an equal share of it).

    **Raises:** [`ConfigError`][sciml.experiment.ConfigError].
    """
    if count <= 1:
        return
    if getattr(task, "DATA_PARALLEL", False) is not True:
        raise ConfigError(
            f"task {config.task} cannot train on {count} processes: it does not declare "
            "DATA_PARALLEL = True (only tasks that train through "
            "sciml.experiment.train_experiment or the online trainer split their batches "
            "over processes; this one runs a loop of its own). Run it on one process "
            f"(drop {FLAG})."
        )
    batch_size = config.get("train", {}).get("batch_size")
    if batch_size is not None and int(batch_size) % count:
        raise ConfigError(
            f"train.batch_size = {batch_size} is not a multiple of {FLAG} {count}: each "
            f"process trains on an equal share of the batch; choose a batch size divisible "
            f"by {count} (--config.train.batch_size=...)."
        )


def child_arguments(argv: list[str], workdir: Path) -> list[str]:
    """The children's arguments: `argv` (without `--processes`) with the run
    directory fixed to `workdir`, unless `--resume` already names it (a
    `--workdir` in `argv` is overridden by the last one, its resolved value)."""
    for arg in argv:  # `--resume` as argparse reads it: any prefix from `--r`
        name = arg.split("=", 1)[0]
        if len(name) >= 3 and "--resume".startswith(name):
            return list(argv)
    return [*argv, "--workdir", str(workdir)]


@contextlib.contextmanager
def quiet_stdout():
    """Sends what is written to file descriptor 1 to /dev/null: the first
    collective of a process connects JAX's CPU collectives (gloo), which
    announce it on stdout, where only process 0's verdict or `--json` goes."""
    sys.stdout.flush()
    saved, devnull = os.dup(1), os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 1)
    try:
        yield
    finally:
        os.dup2(saved, 1)
        os.close(saved)
        os.close(devnull)


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
    argv: list[str], count: int, workdir: Path, *, grace: float = GRACE_SECONDS
) -> int:
    """Runs `python -m sciml.experiment *argv` as `count` processes training
    together, and waits for them (see the module's description).

    **Returns:** 130 when interrupted (SIGINT or SIGTERM), else the exit
    status of a child killed by a signal s from outside (128 + s), else the
    first non-zero exit status of a child, else 0.
    """
    from sciml.training._processes import ENV_COORDINATOR, ENV_PROCESS_ID, ENV_PROCESSES

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
            env = {
                **os.environ,
                ENV_PROCESSES: str(count),
                ENV_PROCESS_ID: str(index),
                ENV_COORDINATOR: address,
            }
            share = gpu_share(index, count, gpus)
            if share is not None:  # a workstation's GPUs, shared out
                env["JAX_LOCAL_DEVICE_IDS"] = share
            command = [sys.executable, "-m", "sciml.experiment", *argv]
            children.append(subprocess.Popen(command, env=env, start_new_session=True))
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
        _reap_simulations(workdir)
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


def _reap_simulations(workdir: Path) -> None:
    """Kills the simulation processes recorded under `workdir/online` that
    still run (left behind by a killed trainer process)."""
    online = Path(workdir) / "online"
    folders = sorted(p for p in online.rglob("jobs") if p.is_dir()) if online.is_dir() else []
    if not folders:
        return
    from sciml.online import LocalLauncher

    killed = sum(len(LocalLauncher().reap_orphans(folder)) for folder in folders)
    if killed:
        print(
            f"killed {killed} simulation process{'es' if killed != 1 else ''} "
            "left behind by a stopped trainer process.",
            file=sys.stderr,
        )
