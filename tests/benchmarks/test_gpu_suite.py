"""The GPU suite's driver (`benchmarks.gpu`): budgets, stops, skips, results.

The driver is tested with the rows of `gpu_test_rows.py` (no JAX, each starts
in under a second); the suite's own rows run end to end in the `--smoke`
test, and with budgets too small for any of them in the tiny-budget test.
"""

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from benchmarks.gpu import _suite
from benchmarks.gpu._rows import ROWS, Row, rows_of, sweep
from benchmarks.gpu._suite import RESERVE_S, Suite


ROOT = Path(__file__).resolve().parents[2]


def make_row(function, budget, needs=None):
    return Row(
        function,
        "speed",
        f"tests.benchmarks.gpu_test_rows:{function}",
        budget,
        budget,
        "a test row",
        "-",
        ("value",),
        needs_s=needs,
    )


def read(out: Path) -> list[dict]:
    return [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]


def alive(pid: int) -> bool:
    """Whether `pid` runs (a zombie, dead but not yet reaped, counts as ended)."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().split(")")[-1].split()[0] != "Z"
    except FileNotFoundError:
        return False


@pytest.fixture
def suite(tmp_path):
    s = Suite(tmp_path, part="speed", smoke=True, limit=RESERVE_S + 60, scale=1.0)
    yield s
    s.close()


class FakeClock:
    def __init__(self, left):
        self._left = left

    def left(self):
        return self._left


def test_sweep_measures_what_fits_and_skips_the_rest(monkeypatch):
    # each measurement of value v "takes" v seconds on a fake perf_counter; the
    # cost of the next is predicted as the last one's seconds × (next / last)
    now = [0.0]
    monkeypatch.setattr("benchmarks.gpu._rows.time.perf_counter", lambda: now[0])
    measured, skipped = [], []

    def measure(v):
        measured.append(v)
        now[0] += v

    sweep(
        (10, 40, 160, 20),
        measure,
        FakeClock(100.0),
        lambda a, b: b / a,
        lambda v, note: skipped.append((v, note)),
    )
    # 10 fits; 40 predicted 10 × 4 = 40 ≤ 100; 160 predicted 40 × 4 = 160 > 100;
    # after a skip every later value is skipped (a sweep grows)
    assert measured == [10, 40]
    assert [v for v, _ in skipped] == [160, 20]
    assert "predicted 160 s, 100 s left" in skipped[0][1]


def test_row_that_measures(suite, tmp_path):
    status = suite.run(make_row("measures", 60))
    assert status["status"] == "ok" and status["note"] == ""
    records = read(tmp_path)
    assert records[0]["row"] == "measures" and records[0]["value"] == 1.5
    assert records[0]["smoke"] is True
    # the row is told its deadline: 0.9 × its timeout from its start
    assert 0 < records[0]["left_s"] <= 0.9 * 60
    assert records[-1]["status"] == "ok"
    table = (tmp_path / "results.md").read_text()
    assert "| value |" in table and "| 1.5 |" in table


def test_overrunning_row_is_stopped_with_its_processes(suite, tmp_path, monkeypatch):
    monkeypatch.setattr(_suite, "STOP_GRACE_S", 1.0)
    start = time.monotonic()
    status = suite.run(make_row("hangs", 3))
    elapsed = time.monotonic() - start
    assert status["status"] == "timeout"
    assert status["note"] == "stopped at its budget of 3 s; 2 measurement(s) kept"
    # stopped, not hung: its budget, the grace period, process start-up
    assert elapsed < 3 + 1 + 10
    records = read(tmp_path)
    assert records[0]["value"] == 1.0  # what it printed before hanging is kept
    pid = records[1]["grandchild_pid"]
    deadline = time.monotonic() + 10
    while alive(pid) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not alive(pid), "the row's own process survived the stop"


def test_row_is_skipped_when_the_limit_leaves_too_little(tmp_path):
    suite = Suite(tmp_path, part="speed", smoke=False, limit=RESERVE_S + 4, scale=1.0)
    try:
        status = suite.run(make_row("measures", 20, needs=10))
    finally:
        suite.close()
    assert status["status"] == "skipped" and status["seconds"] == 0.0
    assert status["note"].startswith("skipped: needs about 10 s, ")
    assert [r.get("status") for r in read(tmp_path)] == ["skipped"]  # nothing ran


def test_failed_row_says_why(suite, tmp_path):
    status = suite.run(make_row("crashes", 60))
    assert status["status"] == "failed"
    assert status["note"].startswith("exit code 1: ")
    assert "RuntimeError: broken on purpose" in status["note"]
    assert read(tmp_path)[0]["value"] == 2.0


def test_row_that_cannot_run_here_is_skipped_with_its_note(suite, tmp_path):
    status = suite.run(make_row("cannot_run", 60))
    assert status["status"] == "skipped"
    assert status["note"] == "not run: the package it needs is not here"
    assert len(read(tmp_path)) == 1


def test_parts_hold_every_row_once():
    names = [row.name for row in ROWS]
    assert len(set(names)) == len(names)
    speed, paper = rows_of("speed"), rows_of("paper")
    assert speed[0].name == paper[0].name == "environment"
    assert {r.name for r in speed} | {r.name for r in paper} == set(names)
    assert [r.name for r in rows_of("all")] == names
    for row in ROWS:  # each full part fits its default limit row by row
        assert row.needs(False) <= row.budget(False) <= _suite.DEFAULT_LIMIT_S[False]


def run_suite(out: Path, *args: str, timeout: float) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    command = [sys.executable, "-m", "benchmarks.gpu", "--out", str(out), *args]
    return subprocess.run(
        command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout
    )


def statuses(out: Path) -> dict[str, dict]:
    found = {}
    for record in read(out):
        if "status" in record:
            assert record["row"] not in found, f"two status lines for {record['row']}"
            found[record["row"]] = record
    return found


@pytest.mark.slow
def test_tiny_budgets_skip_or_stop_every_row_with_a_note(tmp_path):
    """Budgets 1/50 of the smoke ones (3 s a row) and a 30 s limit: rows are
    stopped at their budget or skipped when the limit is spent, each with a
    note, and the suite ends inside its limit."""
    start = time.monotonic()
    done = run_suite(tmp_path, "--smoke", "--limit", "30", "--budget-scale", "0.02", timeout=120)
    elapsed = time.monotonic() - start
    assert done.returncode == 0, done.stderr
    assert elapsed < 30 + 5  # the limit, plus the driver's own start-up
    found = statuses(tmp_path)
    assert list(found) == [row.name for row in rows_of("all")]
    assert {s["status"] for s in found.values()} <= {"ok", "timeout", "skipped"}
    for name, status in found.items():
        assert status["status"] == "ok" or status["note"], name
    assert any(s["status"] == "timeout" for s in found.values())
    assert any(s["note"].startswith("skipped: needs about") for s in found.values())


@pytest.mark.slow
def test_smoke_run_writes_every_row_of_both_parts(tmp_path):
    """`--smoke`: every row of both parts runs at tiny sizes and writes its
    measurements and a status line; the table names the device and jax."""
    # doubled budgets: a shared CI machine may run a row at a fraction of a core
    args = ("--smoke", "--part", "all", "--limit", "840", "--budget-scale", "2")
    done = run_suite(tmp_path, *args, timeout=880)
    assert done.returncode == 0, done.stderr[-3000:]
    found = statuses(tmp_path)
    assert list(found) == [row.name for row in rows_of("all")]
    records = read(tmp_path)
    try:
        import neuralop  # noqa: F401
        import torch  # noqa: F401

        comparable = True
    except ImportError:
        comparable = False
    for row in ROWS:
        status = found[row.name]
        if row.name == "tfno_vs_neuraloperator" and not comparable:
            assert status["status"] == "skipped" and "neuralop" in status["note"]
            continue
        assert status["status"] == "ok", (row.name, status)
        measured = [r for r in records if r["row"] == row.name and "status" not in r]
        assert measured, row.name
        # every row shows at least one of its table columns, and no sweep was cut
        assert any(c in r for r in measured for c in row.columns), row.name
        assert not any(str(r.get("note", "")).startswith("skipped") for r in measured)
    table = (tmp_path / "results.md").read_text()
    assert "- device: cpu" in table and "- jax " in table
    for row in ROWS:
        assert f"## {row.name}" in table
