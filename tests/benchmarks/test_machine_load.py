"""The load record every benchmark line carries (benchmarks/_common.py)."""

import json
import subprocess
import sys
import time

import pytest


pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="reads /proc/stat")

# A measuring process that sleeps `sleep` seconds and prints its load record.
_MEASURE = """
import json, time
from benchmarks._common import machine_load
time.sleep({sleep})
print(json.dumps(machine_load()))
"""


def _measure(sleep):
    code = _MEASURE.format(sleep=sleep)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return json.loads(out.stdout.splitlines()[0])  # then the exit record


def _spin(seconds):
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        pass


def test_proc_stat_counts_at_least_our_own_work():
    from benchmarks import _common

    busy0, own0 = _common._busy_cpu_seconds(), _common._own_cpu_seconds()
    deadline = time.perf_counter() + 30
    while _common._own_cpu_seconds() - own0 < 0.5 and time.perf_counter() < deadline:
        _spin(0.05)
    busy, own = _common._busy_cpu_seconds() - busy0, _common._own_cpu_seconds() - own0
    # The machine's busy time includes ours (clock ticks of 10 ms: 0.1 s slack).
    assert own >= 0.5
    assert busy > own - 0.1


def test_own_work_is_not_counted_as_other_load(monkeypatch):
    from benchmarks import _common

    # A machine where this process is the only one working: its busy time is
    # exactly ours, so other processes kept 0 cores busy (measured 0.000);
    # forgetting to subtract our own work gives about 1.0.
    monkeypatch.setattr(_common, "_busy_cpu_seconds", _common._own_cpu_seconds)
    wall = time.perf_counter()
    monkeypatch.setattr(
        _common, "_START", (wall, _common._own_cpu_seconds(), _common._own_cpu_seconds(), 0.0)
    )
    _spin(0.5)
    load = _common.machine_load()
    assert load["other_cores"] < 0.05
    assert load["quiet"] is True


def test_another_process_is_counted_and_the_run_is_not_quiet():
    # A sibling spins one core while the measuring process sleeps: other_cores
    # about 1.0 (measured 0.97-1.0), far above the quiet threshold of 0.15.
    spinner = subprocess.Popen(
        [sys.executable, "-c", "import time\nt = time.time()\nwhile time.time() - t < 4: pass"]
    )
    try:
        time.sleep(0.5)
        load = _measure(sleep=1.5)
    finally:
        spinner.kill()
        spinner.wait()
    assert load["other_cores"] > 0.6
    assert load["quiet"] is False


def test_each_record_and_the_end_of_a_run_carry_the_load():
    code = (
        "from benchmarks._common import emit, environment\n"
        "environment()\n"
        "emit({'benchmark': 'b', 'x': 1})"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    records = [json.loads(line) for line in out.stdout.splitlines()]
    assert [r["benchmark"] for r in records] == ["b", "machine_load"]
    assert set(records[0]["load"]) == {"loadavg_1m", "loadavg_1m_at_start", "other_cores", "quiet"}
