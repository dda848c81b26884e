"""The suite's driver: one subprocess per row, each inside its time budget.

usage: python -m benchmarks.gpu --out DIR [--part speed|paper|all | --lease]
           [--carry FOLDER] [--smoke] [--limit SECONDS] [--rows NAME ...]
           [--budget-scale F]

`--lease` runs every row, those with no committed GPU result first, inside
540 s (`_lease.py`); `--carry FOLDER` first installs the wheels there
(`DIR/pip.txt` is its log), and the time counts in the limit.

For every row in turn: if less than the time it needs is left of `--limit`,
it is skipped with a note; otherwise it runs in `python -m
benchmarks.gpu._child` with a timeout of `min(its budget, time left)`; on
timeout the row's process group gets SIGTERM, then SIGKILL. Its JSON lines are
appended to `DIR/results.jsonl` while it runs (with `row` and `part` added),
then one status line (`status`: `ok`, `skipped`, `timeout` or `failed`,
`seconds`, `budget_s`, `note`, and `cpu_s`, the CPU seconds of the row's
processes that were waited for), and `DIR/results.md` is rewritten. Standard
error of every row goes to `DIR/log.txt`. The driver itself never imports
JAX, so the device is free for each row.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import resource
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from benchmarks.gpu import _lease
from benchmarks.gpu._child import SKIPPED_EXIT
from benchmarks.gpu._rows import ROWS, Row, rows_of
from benchmarks.gpu._table import markdown


ROOT = Path(__file__).resolve().parents[2]
STOP_GRACE_S = 10.0  # between SIGTERM and SIGKILL
RESERVE_S = STOP_GRACE_S + 5.0  # kept back from the limit: stopping a row, writing the table
# full size: 7 minutes, so both parts and a machine start fit 15 minutes of GPU time; --smoke: about 2 minutes on a quiet 2-core CPU
DEFAULT_LIMIT_S = {False: 420.0, True: 600.0}


# --smoke: the same programs, compiled by XLA's CPU backend without its costly
# optimisations (a third less compile time; smoke numbers are not results)
SMOKE_XLA_FLAGS = "--xla_backend_optimization_level=0 --xla_llvm_disable_expensive_passes=true"


def child_environment(fast_compile: bool) -> dict[str, str]:
    """The rows' environment: the checkout first on the path, JAX allocating on
    demand (PyTorch shares the device in the neuraloperator row) up to 95 % of
    the device's memory (jax's default cap, 75 %, left the H200's INSR stretch
    at 105 of 140 GiB and out of memory), no plots shown; `SMOKE_XLA_FLAGS`
    with `fast_compile`."""
    env = dict(os.environ)
    if fast_compile:
        env["XLA_FLAGS"] = f"{env.get('XLA_FLAGS', '')} {SMOKE_XLA_FLAGS}".strip()
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    env.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")
    if not ({"XLA_CLIENT_MEM_FRACTION", "XLA_PYTHON_CLIENT_MEM_FRACTION"} & env.keys()):
        env["XLA_CLIENT_MEM_FRACTION"] = "0.95"  # jaxlib refuses both names at once
    env.setdefault("MPLBACKEND", "Agg")
    env.setdefault("TF_CPP_MIN_LOG_LEVEL", "1")
    env["PYTHONUNBUFFERED"] = "1"
    return env


class Suite:
    """Runs rows one after the other and writes their results under `out`."""

    def __init__(self, out: Path, *, part: str, smoke: bool, limit: float, scale: float):
        self.out, self.part, self.smoke, self.limit, self.scale = out, part, smoke, limit, scale
        self.started = time.monotonic()
        self.records: list[dict[str, Any]] = []
        self.rows: list[Row] = []
        self.carry: Path | None = None
        self.failed_installs: list[str] = []
        out.mkdir(parents=True, exist_ok=True)
        self.results = open(out / "results.jsonl", "a", encoding="utf-8")
        self.log = open(out / "log.txt", "a", encoding="utf-8")

    def close(self) -> None:
        self.results.close()
        self.log.close()

    def left(self) -> float:
        return self.limit - (time.monotonic() - self.started) - RESERVE_S

    def install(self, carry: Path) -> dict[str, Any]:
        """Installs the carried wheels (`_lease.install`, log in `pip.txt`) and
        writes the `install` record; rows that import a failed one say so."""
        with open(self.out / "pip.txt", "a", encoding="utf-8") as log:
            record = _lease.install(carry, log)
        self.carry, self.failed_installs = carry, record["failed"]
        record = {"row": "install", "part": self.part, **record}
        self.records.append(record)
        self.results.write(json.dumps(record, sort_keys=True) + "\n")
        self.results.flush()
        failed = ", ".join(record["failed"]) or "none"
        print(f"install: {record['seconds']:.0f} s, failed: {failed}", file=sys.stderr, flush=True)
        return record

    def write(self, row: Row, record: dict[str, Any]) -> None:
        record = {"row": row.name, "part": row.part, **record}
        self.records.append(record)
        self.results.write(json.dumps(record, sort_keys=True, default=str) + "\n")
        self.results.flush()

    def run(self, row: Row) -> dict[str, Any]:
        """Runs `row` (or skips it) and writes its status line; returns the status."""
        budget = row.budget(self.smoke) * self.scale
        needs = row.needs(self.smoke) * self.scale
        left = self.left()
        if left < needs:
            note = f"skipped: needs about {needs:.0f} s, {max(left, 0):.0f} s of the limit left"
            return self.status(row, "skipped", budget, note, seconds=0.0, cpu_s=0.0)
        timeout = min(budget, left)
        # the row plans its sweeps to end a little before it would be stopped
        deadline = time.time() + 0.9 * timeout
        command = [sys.executable, "-m", "benchmarks.gpu._child", row.run]
        command += ["--deadline", f"{deadline:.3f}"] + (["--smoke"] if self.smoke else [])
        self.log.write(f"\n===== {row.name} (budget {timeout:.0f} s) =====\n")
        self.log.flush()
        start, cpu = time.monotonic(), _children_cpu_seconds()
        process = subprocess.Popen(
            command,
            cwd=ROOT,
            env=child_environment(self.smoke and row.smoke_fast_compile),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=self.log,
            text=True,
            start_new_session=True,  # its own process group, stopped as a whole
        )
        notes: list[str] = []
        # a daemon: a process outside the group holding the pipe cannot keep the suite alive
        reader = threading.Thread(target=self._read, args=(row, process.stdout, notes), daemon=True)
        reader.start()
        try:
            code = process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            code = None
        _stop(process)  # after a finished row: whatever it left in its group
        reader.join(timeout=STOP_GRACE_S)
        done = dict(seconds=time.monotonic() - start, cpu_s=_children_cpu_seconds() - cpu)
        measured = sum(1 for r in self.records if r["row"] == row.name and "status" not in r)
        if code is None:
            note = f"stopped at its budget of {timeout:.0f} s; {measured} measurement(s) kept"
            return self.status(row, "timeout", timeout, note, **done)
        if code == SKIPPED_EXIT:
            return self.status(row, "skipped", timeout, " ".join(notes), **done)
        if code != 0:
            note = f"exit code {code}: {_last_error(self.out / 'log.txt')}"
            return self.status(row, "failed", timeout, note, **done)
        return self.status(row, "ok", timeout, "" if measured else "no measurement", **done)

    def _read(self, row: Row, stream, notes: list[str]) -> None:
        """Writes each JSON line of the row as it arrives; other lines go to the log."""
        for line in stream:
            try:
                record = json.loads(line)
            except json.JSONDecodeError:
                record = None
            if not isinstance(record, dict):
                self.log.write(line)
            elif "skipped" in record:
                notes.append(str(record["skipped"]))
            else:
                self.write(row, record)
        stream.close()

    def status(
        self, row: Row, status: str, budget: float, note: str, *, seconds: float, cpu_s: float
    ) -> dict:
        if self.carry is not None:
            failed = _lease.failed_for(row, self.failed_installs, self.carry)
            if failed:
                install = f"install failed: {', '.join(failed)} (see pip.txt)"
                note = f"{install}; {note}" if note else install
        record = {
            "status": status,
            "seconds": seconds,
            "cpu_s": cpu_s,
            "budget_s": budget,
            "note": note,
        }
        self.write(row, record)
        self.rows.append(row)
        print(f"{row.name}: {status} ({seconds:.0f} s) {note}", file=sys.stderr, flush=True)
        (self.out / "results.md").write_text(
            markdown(self.records, self.rows, part=self.part, smoke=self.smoke), encoding="utf-8"
        )
        return record


def _children_cpu_seconds() -> float:
    """User + system CPU seconds of the finished (waited-for) child processes."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _stop(process: subprocess.Popen) -> None:
    """SIGTERM to the row's process group, SIGKILL to what is left after a grace period."""
    try:
        os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=STOP_GRACE_S)
        except subprocess.TimeoutExpired:
            pass
        os.killpg(process.pid, signal.SIGKILL)
    except ProcessLookupError:  # the group is gone
        pass
    process.wait()


def _last_error(log: Path, chars: int = 600) -> str:
    """The end of the log (the failed row's traceback), on one line."""
    text = log.read_text(encoding="utf-8", errors="replace")[-chars:]
    return " ".join(text.split())


def select(rows: Sequence[Row], names: Sequence[str] | None) -> list[Row]:
    """The `rows` named in `names` (all of them for `None`), in their order, and
    the environment row wherever it is among `rows`: every run's records then
    say which device and versions they come from (7 s on the H200)."""
    return [row for row in rows if names is None or row.name in names or row.name == "environment"]


def _check_arguments(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """One line and exit status 2 for a mistaken argument, before anything is
    installed, run or written (a lease cannot be repeated)."""

    def error(message: str) -> None:
        parser.exit(2, f"{parser.prog}: error: {message}\n")

    if args.out.exists() and not args.out.is_dir():
        error(f"--out: {str(args.out)!r} is a file; give a results directory (new or existing)")
    if args.carry is not None:
        if not args.carry.is_dir():
            what = "is not a directory" if args.carry.exists() else "does not exist"
            error(f"--carry: {str(args.carry)!r} {what}; give the folder of wheels to install")
        if not any(args.carry.glob("*.whl")):
            error(
                f"--carry: {str(args.carry)!r} holds no wheels (*.whl); prepare it with "
                "`python -m benchmarks.gpu.carry`"
            )
    for option, value in (("--limit", args.limit), ("--budget-scale", args.budget_scale)):
        if value is not None and not (math.isfinite(value) and value > 0):
            error(f"{option} must be a positive number, got {value}")


def main(argv=None) -> int:
    import benchmarks.gpu

    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.gpu",
        description=(benchmarks.gpu.__doc__ or "").splitlines()[0],
    )
    parser.add_argument("--out", type=Path, required=True, help="results directory")
    parser.add_argument("--part", choices=("speed", "paper", "all"), default="all")
    parser.add_argument(
        "--lease",
        action="store_true",
        help="every row, those with no committed GPU result first, inside 540 s (install included)",
    )
    parser.add_argument(
        "--carry", type=Path, default=None, help="install the wheels of this folder first"
    )
    parser.add_argument("--smoke", action="store_true", help="tiny sizes, same code paths")
    parser.add_argument(
        "--limit",
        type=float,
        default=None,
        help="seconds for the whole run (420 a part, 840 for all, 540 --lease; smoke 600)",
    )
    parser.add_argument(
        "--rows",
        nargs="+",
        default=None,
        choices=[row.name for row in ROWS],
        metavar="ROW",
        help="run only these rows (and the environment row): "
        + ", ".join(row.name for row in ROWS),
    )
    parser.add_argument(
        "--budget-scale", type=float, default=1.0, help="multiplies every row's budget"
    )
    args = parser.parse_args(argv)
    _check_arguments(parser, args)
    limit = args.limit
    if limit is None and args.lease and not args.smoke:
        limit = _lease.LEASE_LIMIT_S
    elif limit is None:  # `--part all` at full size: both parts' time
        limit = DEFAULT_LIMIT_S[args.smoke] * (2 if args.part == "all" and not args.smoke else 1)
    part = "lease" if args.lease else args.part
    rows = _lease.lease_order(ROWS, _lease.committed()) if args.lease else rows_of(args.part)
    rows = select(rows, args.rows)
    suite = Suite(args.out, part=part, smoke=args.smoke, limit=limit, scale=args.budget_scale)
    try:
        if args.carry is not None:
            suite.install(args.carry)
        statuses = [suite.run(row) for row in rows]
    finally:
        suite.close()
    failed = [row.name for row, s in zip(rows, statuses) if s["status"] == "failed"]
    print(f"results in {args.out}; failed rows: {failed or 'none'}", file=sys.stderr)
    return 1 if failed else 0
