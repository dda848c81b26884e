import json
import pathlib
import subprocess
import sys

import numpy as np
import pytest


SCRIPT = pathlib.Path(__file__).with_name("_host_memory_script.py")


def _run(*args):
    run = subprocess.run(
        [sys.executable, str(SCRIPT), *args],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    return json.loads(run.stdout.strip().splitlines()[-1])


def test_reuse_host_memory_stops_the_page_faults_of_large_buffers():
    """A 64 MB result allocated per call: by default glibc maps fresh pages for
    it every call (16,384 pages of 4 KB; measured 16,385 faults on every
    call); with `reuse_host_memory` the freed block is reused (measured 0 on
    most calls; now and then a call finds its predecessor's block not yet
    freed, jax frees asynchronously, and the heap grows once more: one call
    in ten faulted under CI's load). Compared by the median call."""
    reused = _run("reuse")
    if not reused["applied"]:
        pytest.skip("the C library is not glibc")
    default = _run()
    assert np.median(default["faults_per_call"]) > 10_000, default
    assert np.median(reused["faults_per_call"]) < 1_000, reused
