"""Rows for the suite's own tests: one that hangs, one that crashes, one that
cannot run here, one that measures. They print JSON lines directly (no JAX, so
each starts in well under a second)."""

import json
import signal
import subprocess
import sys
import time

from benchmarks.gpu._rows import RowSkipped


def _emit(record):
    print(json.dumps(record), flush=True)


def measures(smoke, clock):
    _emit({"value": 1.5, "smoke": smoke, "left_s": clock.left()})


def hangs(smoke, clock):
    """Measures once, starts a process of its own, then both ignore SIGTERM
    and sleep: only the suite's SIGKILL of the process group ends them."""
    _emit({"value": 1.0})
    ignore = "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(600)"
    child = subprocess.Popen([sys.executable, "-c", ignore])
    _emit({"grandchild_pid": child.pid})
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    while True:
        time.sleep(1)


def crashes(smoke, clock):
    _emit({"value": 2.0})
    raise RuntimeError("broken on purpose")


def cannot_run(smoke, clock):
    raise RowSkipped("not run: the package it needs is not here")
