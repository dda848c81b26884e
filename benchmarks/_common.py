"""Shared timing helpers for the benchmark scripts.

Every benchmark times our code and a baseline in the same process and prints one
JSON line per measurement, so results are ratios on one machine rather than
absolute seconds copied between machines.

Ratios are only results on a quiet machine: PyTorch's and XLA's CPU threads slow
down differently when another job shares the cores. So every record carries the
machine's load (`load`: the 1-minute load average, and the cores that *other*
processes kept busy since the benchmark started), and the run ends with a
warning on stderr and a `machine_load` record when anything else was running.
"""

from __future__ import annotations

import atexit
import json
import os
import platform
import sys
import time
from collections.abc import Callable
from typing import Any

import jax
import numpy as np


def block(tree: Any) -> Any:
    """Waits for every array in `tree` (jax or numpy) to be computed."""
    return jax.tree_util.tree_map(
        lambda x: x.block_until_ready() if isinstance(x, jax.Array) else x, tree
    )


def time_fn(
    fn: Callable[..., Any],
    *args: Any,
    warmup: int = 2,
    repeats: int = 5,
    min_seconds: float = 0.2,
) -> dict[str, float]:
    """Times `fn(*args)` after `warmup` calls (compilation happens there).

    Each of `repeats` measurements runs `fn` as many times as needed to last at
    least `min_seconds` and records the mean time of one call.

    **Returns:** `{"median_s": ..., "min_s": ..., "compile_s": ...}` where
    `compile_s` is the wall time of the first (warm-up) call.
    """
    start = time.perf_counter()
    block(fn(*args))
    compile_s = time.perf_counter() - start
    for _ in range(max(warmup - 1, 0)):
        block(fn(*args))
    samples = []
    for _ in range(repeats):
        calls = 0
        start = time.perf_counter()
        while True:
            block(fn(*args))
            calls += 1
            elapsed = time.perf_counter() - start
            if elapsed >= min_seconds:
                break
        samples.append(elapsed / calls)
    return {
        "median_s": float(np.median(samples)),
        "min_s": float(np.min(samples)),
        "compile_s": compile_s,
    }


# Other processes may use this many cores on average (from /proc/stat) before a
# run is reported as not quiet: a shell, an editor and the kernel stay well
# below it; one other single-threaded job is 1.0.
QUIET_OTHER_CORES = 0.15


def _busy_cpu_seconds() -> float | None:
    """CPU seconds all processes spent busy since boot (Linux), else None."""
    try:
        with open("/proc/stat") as stat:
            fields = [int(v) for v in stat.readline().split()[1:9]]
    except (OSError, ValueError):
        return None
    idle = fields[3] + fields[4]  # idle + iowait
    return (sum(fields) - idle) / os.sysconf("SC_CLK_TCK")


def _own_cpu_seconds() -> float:
    """CPU seconds of this process and its waited-for children."""
    t = os.times()
    return t.user + t.system + t.children_user + t.children_system


_START = (time.perf_counter(), _busy_cpu_seconds(), _own_cpu_seconds(), os.getloadavg()[0])


def machine_load() -> dict[str, Any]:
    """How busy the machine was while this benchmark ran.

    **Returns:** `loadavg_1m` now and `loadavg_1m_at_start` (which includes
    whatever ran just before), `other_cores` (average number of cores kept busy
    by other processes since this module was imported; None where /proc/stat is
    missing) and `quiet` (`other_cores` below `QUIET_OTHER_CORES`, or, without
    /proc/stat, a start load average below 0.5).
    """
    wall0, busy0, own0, load0 = _START
    wall = time.perf_counter() - wall0
    busy = _busy_cpu_seconds()
    other = None
    if busy is not None and busy0 is not None and wall > 0:
        other = max(0.0, (busy - busy0) - (_own_cpu_seconds() - own0)) / wall
    quiet = other < QUIET_OTHER_CORES if other is not None else load0 < 0.5
    return {
        "loadavg_1m": round(os.getloadavg()[0], 2),
        "loadavg_1m_at_start": round(load0, 2),
        "other_cores": None if other is None else round(other, 3),
        "quiet": bool(quiet),
    }


def _report_load() -> None:
    load = machine_load()
    emit({"benchmark": "machine_load", "load": load})
    if not load["quiet"]:
        print(
            f"WARNING: the machine was not quiet during this benchmark (other processes "
            f"kept {load['other_cores']} cores busy on average; 1-minute load average "
            f"{load['loadavg_1m_at_start']} at the start, {load['loadavg_1m']} at the end). "
            "Ratios taken beside another job are not results: rerun with nothing else "
            "running.",
            file=sys.stderr,
        )


def cpu_model() -> str:
    """The host CPU's model name (Linux's /proc/cpuinfo; the platform's name elsewhere)."""
    try:
        with open("/proc/cpuinfo") as cpuinfo:
            for line in cpuinfo:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def environment() -> dict[str, str]:
    """Backend and device description, printed with every benchmark run.

    The first call also arranges for the machine's load to be reported when
    the run ends (`machine_load`).
    """
    atexit.unregister(_report_load)  # once per run, however often this is called
    atexit.register(_report_load)
    device = jax.devices()[0]
    return {
        "backend": jax.default_backend(),
        "device": getattr(device, "device_kind", str(device)),
        "cpu": cpu_model(),
        "cpu_count": os.cpu_count(),
        "jax": jax.__version__,
        "python": platform.python_version(),
    }


def emit(record: dict[str, Any], stream=None) -> None:
    """Prints one benchmark record as a JSON line (to `sys.stdout` as it is
    now: a caller may have replaced it), with the machine's load so far."""
    record = record if "load" in record else {"load": machine_load(), **record}
    stream = sys.stdout if stream is None else stream
    stream.write(json.dumps(record, sort_keys=True, default=float) + "\n")
    stream.flush()
