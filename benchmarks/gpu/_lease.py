"""The lease profile: what runs first, and the offline install from the carry folder.

A lent GPU machine gives 15 minutes of device time in all, machine start
included, at most 10 minutes a command. `python -m benchmarks.gpu --lease
--carry .gpu-carry --out DIR` is one command that installs the carried wheels
and runs the rows inside `LEASE_LIMIT_S`, those with no GPU result yet first.

**Order.** The results of every GPU run are committed under
`benchmarks/gpu/results/<date>-<device>/results.jsonl`. Each row is ranked by
what they hold of it (`progress`): nothing (never measured, or only skipped,
stopped or failed), a partial result (a sweep cut short, a stop, or a record
without the row's `complete` keys, such as the stronger baselines added after
the run), or a complete one. Rows run in that order, the suite's order within
each rank, the environment row first; so successive leases fill the table
instead of repeating it.

**Install.** The carried wheels (exact versions, `carry.py`) are installed
with `pip --no-index --no-deps` in three groups: the pure-Python wheels
(ml-collections and its requirements) on their own first, so a binary wheel
that does not fit the machine cannot take them down; then the binary wheels;
then neuraloperator. A group that fails is retried wheel by wheel, so each
failure is named: in `install` record of `results.jsonl`, and in the note of
every row that imports the failed distribution or something requiring it.
"""

from __future__ import annotations

import email.parser
import json
import os
import re
import subprocess
import sys
import time
import zipfile
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from benchmarks.gpu._rows import Row


ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "benchmarks" / "gpu" / "results"
# the whole command, its install included: 540 s of the 600 a command may run,
# and with the machine's start inside the 15 minutes of a lease
LEASE_LIMIT_S = 540.0
# installed after the others, without its requirements (`carry.py`)
INSTALL_LAST = ("neuraloperator",)
NOTHING, PARTIAL, COMPLETE = 0, 1, 2


def canonical(name: str) -> str:
    """The normalised distribution name (PEP 503)."""
    return re.sub(r"[-_.]+", "-", name).lower()


def wheel_name(path: Path) -> str:
    return canonical(path.name.split("-")[0])


def committed(results: Path = RESULTS) -> list[dict[str, Any]]:
    """The records of every committed GPU run (a run whose environment row
    reports the CPU backend, such as a smoke run, is left out)."""
    records = []
    for path in sorted(results.glob("*/results.jsonl")):
        run = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
        env = next((r for r in run if r.get("row") == "environment" and "backend" in r), {})
        if env.get("backend", "gpu") != "cpu":
            records += run
    return records


def progress(row: Row, records: Iterable[dict[str, Any]]) -> int:
    """`NOTHING`, `PARTIAL` or `COMPLETE`: how far the committed `records` measured `row`."""
    mine = [r for r in records if r.get("row") == row.name]
    measured = [r for r in mine if "status" not in r]
    if not measured:
        return NOTHING
    cut = any(str(r.get("note", "")).startswith("skipped") for r in measured)
    stopped = any(r["status"] != "ok" for r in mine if "status" in r)
    missing = any(not any(key in r for r in measured) for key in row.complete)
    return PARTIAL if cut or stopped or missing else COMPLETE


def lease_order(rows: Sequence[Row], records: Sequence[dict[str, Any]]) -> list[Row]:
    """`rows` with the environment first, then by `progress` (least first), stable."""
    rank = {row.name: progress(row, records) for row in rows}
    return sorted(rows, key=lambda row: (row.name != "environment", rank[row.name]))


def _pip(wheels: Sequence[Path], log, python: str) -> bool:
    command = [python, "-m", "pip", "install", "--quiet", "--no-index", "--no-deps"]
    log.write(f"$ pip install {' '.join(w.name for w in wheels)}\n")
    log.flush()
    # the variable lets pip install into a system Python marked externally
    # managed (PEP 668); an older pip ignores it
    env = {**os.environ, "PIP_BREAK_SYSTEM_PACKAGES": "1", "PIP_DISABLE_PIP_VERSION_CHECK": "1"}
    done = subprocess.run(
        [*command, *map(str, wheels)], stdout=log, stderr=subprocess.STDOUT, env=env
    )
    return done.returncode == 0


def install(folder: Path, log, python: str = sys.executable) -> dict[str, Any]:
    """Installs every wheel in `folder` offline into `python` (see the module
    docstring), pip's output to the file `log`; returns the `install` record:
    `installed`, `failed` (names) and `seconds`."""
    start = time.monotonic()
    wheels = sorted(folder.glob("*.whl"))
    last = [w for w in wheels if wheel_name(w) in INSTALL_LAST]
    pure = [w for w in wheels if w.name.endswith("-none-any.whl") and w not in last]
    binary = [w for w in wheels if w not in pure and w not in last]
    failed = []
    for group in (pure, binary, last):
        if group and not _pip(group, log, python):
            failed += [wheel_name(w) for w in group if not _pip([w], log, python)]
    return {
        "installed": sorted(wheel_name(w) for w in wheels if wheel_name(w) not in failed),
        "failed": sorted(failed),
        "seconds": time.monotonic() - start,
    }


def requires(wheel: Path) -> list[str]:
    """The distribution names a wheel requires (markers ignored: an extra name
    only widens a note); none for a file that is not a readable wheel."""
    try:
        with zipfile.ZipFile(wheel) as archive:
            meta = next(n for n in archive.namelist() if n.endswith(".dist-info/METADATA"))
            message = email.parser.Parser().parsestr(archive.read(meta).decode())
    except (zipfile.BadZipFile, StopIteration, OSError):
        return []
    lines = message.get_all("Requires-Dist") or []
    return [canonical(re.match(r"[A-Za-z0-9._-]+", line.strip()).group()) for line in lines]


def failed_for(row: Row, failed: Iterable[str], folder: Path) -> list[str]:
    """The failed distributions `row` imports, directly or through their requirements."""
    failed = set(failed)
    if not failed:
        return []
    graph = {wheel_name(w): requires(w) for w in folder.glob("*.whl")}
    seen, queue = set(), [canonical(p) for p in row.packages]
    while queue:
        name = queue.pop()
        if name not in seen:
            seen.add(name)
            queue += graph.get(name, [])
    return sorted(seen & failed)
