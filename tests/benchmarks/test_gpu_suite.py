"""The GPU suite's driver (`benchmarks.gpu`): budgets, stops, skips, results.

The driver is tested with the rows of `gpu_test_rows.py` (no JAX, each starts
in under a second); the suite's own rows run end to end in the `--lease
--smoke` test, and with budgets too small for any of them (and a carry folder
whose wheels cannot install) in the tiny-budget lease test.
"""

import json
import os
import shutil
import subprocess
import sys
import time
import zipfile
from pathlib import Path

import pytest

from benchmarks.gpu import _lease, _suite
from benchmarks.gpu._rows import ROWS, Row, h200, rows_of, sweep
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


def test_sweep_predicts_without_compilation(monkeypatch):
    # each measurement compiles for 50 s and runs for v s; the next one is
    # predicted as 50 + v × (next / last), not (50 + v) × (next / last)
    now = [0.0]
    monkeypatch.setattr("benchmarks.gpu._rows.time.perf_counter", lambda: now[0])
    measured, skipped = [], []

    def measure(v):
        measured.append(v)
        now[0] += 50 + v
        return 50.0

    sweep(
        (1, 4, 16, 64),
        measure,
        FakeClock(100.0),
        lambda a, b: b / a,
        lambda v, _: skipped.append(v),
    )
    # 4: 50 + 1 × 4 = 54; 16: 50 + 4 × 4 = 66; 64: 50 + 16 × 4 = 114 > 100
    # (with compilation scaled, 16 would have been predicted 216 and skipped)
    assert measured == [1, 4, 16] and skipped == [64]


def a_row(name, complete=()):
    return Row(name, "speed", "x:y", 10, 10, "-", "-", ("value",), complete=complete)


def test_lease_order_puts_rows_without_a_gpu_result_first():
    rows = [
        a_row("measured"),
        a_row("without_keys", complete=("best",)),
        a_row("environment"),
        a_row("never"),
        a_row("stopped"),
        a_row("cut"),
    ]
    records = [
        {"row": "measured", "value": 1, "best": 2},
        {"row": "measured", "status": "ok"},
        {"row": "without_keys", "value": 1},  # a result from before its baselines
        {"row": "without_keys", "status": "ok"},
        {"row": "stopped", "value": 1},
        {"row": "stopped", "status": "timeout"},
        {"row": "cut", "value": 1},
        {"row": "cut", "note": "skipped: predicted 9 s, 3 s left"},
        {"row": "cut", "status": "ok"},
        {"row": "never", "status": "failed"},
    ]
    assert [_lease.progress(r, records) for r in rows] == [2, 1, 0, 0, 1, 1]
    order = [r.name for r in _lease.lease_order(rows, records)]
    # the environment first, then nothing, partial, complete; stable inside each
    assert order == ["environment", "never", "without_keys", "stopped", "cut", "measured"]


def test_committed_gpu_results_order_the_lease(tmp_path):
    # the first H200 run's records alone (later leases fill the table in)
    results = tmp_path / "results"
    shutil.copytree(_lease.RESULTS / "2026-11-27-h200", results / "2026-11-27-h200")
    # a CPU run (a smoke run committed by mistake) counts for nothing
    cpu = results / "2026-01-01-cpu"
    cpu.mkdir()
    lines = [{"row": "environment", "backend": "cpu"}, {"row": "insr_step", "n_params": 1}]
    lines.append({"row": "insr_step", "status": "ok"})
    (cpu / "results.jsonl").write_text("".join(json.dumps(r) + "\n" for r in lines))
    order = [r.name for r in _lease.lease_order(ROWS, _lease.committed(results))]
    assert sorted(order) == sorted(r.name for r in ROWS)
    # never measured on the H200: the dense GRU failed, the INSR rows, the
    # online row and the 3-D DCDM were stopped or skipped
    never = {"pararnn_dense_gru", "insr_step", "online_ingestion", "dcdm_3d", "insr_elasticity"}
    assert order[0] == "environment" and set(order[1:6]) == never
    # measured there against the per-token scan only: before the complete rows
    assert order.index("pararnn_newton") < order.index("ns_turbulent")


def wheel(folder: Path, name: str, requires: list[str]) -> Path:
    path = folder / f"{name}-1.0-py3-none-any.whl"
    meta = "".join(f"Requires-Dist: {r}\n" for r in requires)
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr(f"{name}-1.0.dist-info/METADATA", f"Name: {name}\n{meta}")
    return path


def test_failed_install_reaches_the_rows_that_import_it_through_requirements(tmp_path):
    wheel(tmp_path, "neuraloperator", ["tensorly>=0.8", "torch; extra == 'all'"])
    wheel(tmp_path, "tensorly", ["numpy"])
    wheel(tmp_path, "ml_collections", ["absl-py"])
    (tmp_path / "absl_py-1.0-py3-none-any.whl").write_text("not a zip")  # no requirements read
    row = Row("r", "speed", "x:y", 10, 10, "-", "-", (), packages=("neuraloperator",))
    assert _lease.failed_for(row, ["tensorly", "absl-py"], tmp_path) == ["tensorly"]
    assert _lease.failed_for(row, ["absl-py"], tmp_path) == []
    other = Row("s", "speed", "x:y", 10, 10, "-", "-", (), packages=("ml-collections",))
    assert _lease.failed_for(other, ["absl-py"], tmp_path) == ["absl-py"]


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


def test_a_row_longer_than_the_time_left_is_stopped_inside_the_limit(tmp_path, monkeypatch):
    """A 30-s row with about 2 s of the limit left runs (it needs 1 s) and is
    stopped when the limit is spent, not at its own budget: its timeout is
    the time left, so the rows after it are not lost."""
    monkeypatch.setattr(_suite, "STOP_GRACE_S", 1.0)
    suite = Suite(tmp_path, part="speed", smoke=False, limit=RESERVE_S + 2, scale=1.0)
    try:
        status = suite.run(make_row("hangs", 30, needs=1))
        elapsed = time.monotonic() - suite.started
    finally:
        suite.close()
    assert status["status"] == "timeout"
    # its timeout is what was left (2 s less set-up); the row's own budget gives 30
    assert status["budget_s"] <= 2, status
    # measured 3-4 s (timeout, grace 1 s, the stop); its budget would give 31 s
    assert elapsed < RESERVE_S + 2, elapsed


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


def test_the_documented_limits_and_budgets():
    """The numbers `docs/benchmarks.md` and the module docstrings give: a
    lease runs 540 s (a command may run 600, the machine's start comes out of
    the rest), a part 420 s (a smoke run 600); a row's budget is its H200
    seconds × 1.3 (an H100 has about 0.7× the H200's bandwidth); a row that
    overruns gets SIGTERM, then SIGKILL 10 s later, and the limit keeps 15 s
    back for that and the table."""
    assert _lease.LEASE_LIMIT_S == 540.0
    assert _suite.DEFAULT_LIMIT_S == {False: 420.0, True: 600.0}
    assert h200(100) == 130.0
    assert (_suite.STOP_GRACE_S, RESERVE_S) == (10.0, 15.0)


def test_rows_may_take_95_percent_of_the_device_memory_unless_told_otherwise(monkeypatch):
    # jax's default cap (75 %) left the INSR stretch out of memory on an H200
    for name in ("XLA_CLIENT_MEM_FRACTION", "XLA_PYTHON_CLIENT_MEM_FRACTION"):
        monkeypatch.delenv(name, raising=False)
    assert _suite.child_environment(False)["XLA_CLIENT_MEM_FRACTION"] == "0.95"
    # a user's own setting, under either name, stays the only one (jaxlib
    # refuses both names at once)
    monkeypatch.setenv("XLA_PYTHON_CLIENT_MEM_FRACTION", "0.5")
    env = _suite.child_environment(False)
    assert env["XLA_PYTHON_CLIENT_MEM_FRACTION"] == "0.5"
    assert "XLA_CLIENT_MEM_FRACTION" not in env


def test_a_subset_of_rows_keeps_the_environment_row_first():
    # the lease of 2026-11-30 ran two `--rows` subsets whose results.md said
    # "device: unknown"
    names = ["tfno_vs_neuraloperator", "pararnn_newton"]
    chosen = [row.name for row in _suite.select(_lease.lease_order(ROWS, []), names)]
    assert chosen[0] == "environment" and sorted(chosen[1:]) == sorted(names)
    assert _suite.select(list(ROWS), None) == list(ROWS)


def test_parts_hold_every_row_once():
    names = [row.name for row in ROWS]
    assert len(set(names)) == len(names)
    speed, paper = rows_of("speed"), rows_of("paper")
    assert speed[0].name == paper[0].name == "environment"
    assert {r.name for r in speed} | {r.name for r in paper} == set(names)
    assert [r.name for r in rows_of("all")] == names
    for row in ROWS:  # each full part fits its default limit row by row
        assert row.needs(False) <= row.budget(False) <= _suite.DEFAULT_LIMIT_S[False]


def test_mistaken_arguments_are_one_line_and_exit_2_before_anything_runs(tmp_path, capsys):
    """Before: `--out` a file was a `FileExistsError` traceback; a missing,
    non-folder or empty `--carry` "installed" nothing and every row ran
    without its packages; `--limit -5` skipped every row with exit status 0."""
    a_file, empty = tmp_path / "results.jsonl", tmp_path / "empty"
    a_file.write_text("")
    empty.mkdir()
    out = str(tmp_path / "out")
    cases = [
        (["--out", str(a_file)], f"--out: {str(a_file)!r} is a file; give a results directory"),
        (
            ["--carry", str(tmp_path / "gone")],
            f"--carry: {str(tmp_path / 'gone')!r} does not exist",
        ),
        (["--carry", str(a_file)], f"--carry: {str(a_file)!r} is not a directory"),
        (["--carry", str(empty)], f"--carry: {str(empty)!r} holds no wheels (*.whl)"),
        (["--limit", "-5"], "--limit must be a positive number, got -5.0"),
        (["--limit", "nan"], "--limit must be a positive number, got nan"),
        (["--budget-scale", "0"], "--budget-scale must be a positive number, got 0.0"),
    ]
    for args, message in cases:
        argv = ["--out", out, "--lease", "--smoke", *args]
        with pytest.raises(SystemExit) as info:
            _suite.main(argv)
        err = capsys.readouterr().err
        assert info.value.code == 2, args
        assert err.startswith(f"python -m benchmarks.gpu: error: {message}"), (args, err)
        assert err.count("\n") == 1, err
    assert not (tmp_path / "out").exists() and a_file.read_text() == ""  # nothing written


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
def test_lease_with_tiny_budgets_ends_inside_its_limit_and_names_failed_installs(tmp_path):
    """`--lease` with a carry folder whose two wheels cannot install (not
    archives; versions not installed here, so pip reads them and nothing
    changes), budgets 1/50 of the smoke ones (3 s a row) and a 40 s limit:
    the install is tried and its failures named in the notes of the rows that
    import them, rows run in the lease's order and are stopped at their budget
    or skipped when the limit is spent, each with a note, and the whole
    command, install included, ends inside its limit."""
    carry = tmp_path / "carry"
    carry.mkdir()
    (carry / "ml_collections-0.0.1-py3-none-any.whl").write_text("not a wheel")
    (carry / "pyzmq-0.0.1-cp312-cp312-manylinux_2_28_x86_64.whl").write_text("not a wheel")
    out = tmp_path / "out"
    args = ("--lease", "--smoke", "--carry", str(carry), "--limit", "40", "--budget-scale", "0.02")
    start = time.monotonic()
    done = run_suite(out, *args, timeout=150)
    elapsed = time.monotonic() - start
    assert done.returncode == 0, done.stderr
    assert elapsed < 40 + 5  # the limit, plus the driver's own start-up
    install = next(r for r in read(out) if r["row"] == "install")
    assert install["failed"] == ["ml-collections", "pyzmq"]
    assert "ml_collections-0.0.1" in (out / "pip.txt").read_text()
    found = statuses(out)
    assert list(found) == [r.name for r in _lease.lease_order(ROWS, _lease.committed())]
    for row in ROWS:
        failed = sorted({"ml-collections", "pyzmq"} & set(row.packages))
        note = found[row.name]["note"]
        if failed:
            assert note.startswith(f"install failed: {', '.join(failed)} (see pip.txt)"), note
        else:
            assert "install failed" not in note, (row.name, note)
    assert "online_ingestion" in found and "ns_turbulent" in found
    assert {s["status"] for s in found.values()} <= {"ok", "timeout", "skipped"}
    for name, status in found.items():
        assert status["status"] == "ok" or status["note"], name
    assert any(s["status"] == "timeout" for s in found.values())
    assert any("skipped: needs about" in s["note"] for s in found.values())
    assert "failed: ml-collections, pyzmq" in (out / "results.md").read_text()


@pytest.mark.slow
def test_lease_smoke_run_writes_every_row_with_its_baselines(tmp_path):
    """`--lease --smoke`: every row runs at tiny sizes, in the lease's order,
    and writes its measurements and a status line; the rows with stronger
    baselines record them; the table names the device, jax and the precision."""
    # doubled budgets and a limit of 20 minutes: a shared CI machine may run a
    # row at a fraction of a core (under a load of 14 on 2 cores, 12 minutes)
    args = ("--lease", "--smoke", "--limit", "1200", "--budget-scale", "2")
    done = run_suite(tmp_path, *args, timeout=1260)
    assert done.returncode == 0, done.stderr[-3000:]
    found = statuses(tmp_path)
    assert list(found) == [r.name for r in _lease.lease_order(ROWS, _lease.committed())]
    records = read(tmp_path)
    for row in ROWS:
        status = found[row.name]
        assert status["status"] == "ok", (row.name, status)
        measured = [r for r in records if r["row"] == row.name and "status" not in r]
        assert measured, row.name
        # every row shows at least one of its table columns, and no sweep was cut
        assert any(c in r for r in measured for c in row.columns), row.name
        assert not any(str(r.get("note", "")).startswith("skipped") for r in measured)

    def rows_of_(name):
        return [r for r in records if r["row"] == name and "status" not in r]

    try:
        import torch  # noqa: F401

        has_torch = True
    except ImportError:
        has_torch = False
    for name in ("pararnn_newton", "pararnn_dense_gru"):
        for r in rows_of_(name):
            assert r["best_unroll_fwd"] in (1, 8) and r["speedup_fwd"] > 0, r
            # Newton against the scan, float32 at T = 64: measured 1.8e-7 and 5.6e-7
            assert r["max_abs_difference"] < 1e-5, r
            if name == "pararnn_dense_gru" and not has_torch:
                assert r["note"].startswith("torch absent"), r
    summaries = [r for r in rows_of_("ssm_layers") if "best_baseline" in r]
    assert {(r["layer"], r["pass"]) for r in summaries} == {
        (layer, kind)
        for layer in ("S4D (FFT conv)", "S5 (assoc. scan)")
        for kind in ("fwd", "fwd+bwd")
    }
    paths = {r["path"] for r in rows_of_("ssm_layers") if "path" in r}
    assert paths == {"parallel", "unroll1", "unroll8", "chunked"}
    for r in summaries:
        # every baseline's outputs against the layer's, float32, L = 64:
        # measured 1.7e-7 (S4D) and 6.0e-8 (S5)
        assert r["max_rel_error"] < 1e-5 and r["matmul_precision"] == "default", r
    dense = [r for r in rows_of_("tfno_vs_neuraloperator") if r.get("model") == "fno-dense"]
    assert {r["precision"] for r in dense} == {"float32", "tf32"}
    assert all(r["ours_median_s"] > 0 for r in dense)
    table = (tmp_path / "results.md").read_text()
    assert "- device: cpu" in table and "- jax " in table
    assert "- precision: jax default matmul default" in table
    for row in ROWS:
        assert f"## {row.name}" in table
