"""Tables of where the test suite's time goes, from the per-test records that
`SCIML_TEST_TIMES=<file>` makes the suite write (see `tests/conftest.py`).

    SCIML_TEST_TIMES=times.jsonl make test
    .venv/bin/python tests/durations.py times.jsonl [--slowest 30]

Prints Markdown: the totals (wall, XLA compilation, tracing), the seconds per
test directory, and the slowest tests with their compile share. Each record's
`seconds` covers the test's setup, call and teardown, so a module-scoped
fixture is charged to the first test that uses it. Under several workers the
seconds add up to more than the wall time of the run.
"""

import argparse
import collections
import json
from pathlib import Path


def load(paths: list[Path]) -> list[dict]:
    """The records of every file, the last one kept where a test ran twice."""
    records = {}
    for path in paths:
        for line in path.read_text().splitlines():
            if line.strip():
                record = json.loads(line)
                records[record["nodeid"]] = record
    return list(records.values())


def table(header: list[str], rows: list[list]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + " --- |" * len(header)]
    lines += ["| " + " | ".join(str(cell) for cell in row) + " |" for row in rows]
    return "\n".join(lines)


def report(records: list[dict], slowest: int) -> str:
    wall = sum(r["seconds"] for r in records)
    compile_s = sum(r["compile_seconds"] for r in records)
    trace_s = sum(r["trace_seconds"] for r in records)
    out = [
        f"{len(records)} tests, {wall:.0f} s in tests: XLA compilation {compile_s:.0f} s "
        f"({compile_s / wall:.0%}), tracing and lowering {trace_s:.0f} s ({trace_s / wall:.0%}).",
        "",
    ]
    by_dir = collections.defaultdict(lambda: [0, 0.0, 0.0])
    for r in records:
        folder = r["nodeid"].split("::")[0].rsplit("/", 1)[0]
        by_dir[folder][0] += 1
        by_dir[folder][1] += r["seconds"]
        by_dir[folder][2] += r["compile_seconds"]
    rows = [
        [folder, n, f"{s:.0f}", f"{c:.0f}"]
        for folder, (n, s, c) in sorted(by_dir.items(), key=lambda item: -item[1][1])
    ]
    out += [table(["folder", "tests", "seconds", "compile s"], rows), ""]
    top = sorted(records, key=lambda r: -r["seconds"])[:slowest]
    rows = [
        [i + 1, f"`{r['nodeid']}`", f"{r['seconds']:.1f}", f"{r['compile_seconds']:.1f}"]
        for i, r in enumerate(top)
    ]
    out += [table(["#", "test", "seconds", "compile s"], rows)]
    return "\n".join(out)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("files", nargs="+", type=Path, help="JSON-lines files of test records")
    parser.add_argument("--slowest", type=int, default=30, help="how many slowest tests to list")
    args = parser.parse_args()
    print(report(load(args.files), args.slowest))


if __name__ == "__main__":
    main()
