"""Runs one row of the suite in this process (started by `_suite.py`).

usage: python -m benchmarks.gpu._child PACKAGE.MODULE:FUNCTION --deadline EPOCH [--smoke]

Measurements go to stdout as JSON lines. A row that cannot run here exits
with `SKIPPED_EXIT` after printing `{"skipped": note}`. SIGTERM (the suite's
stop when the row overruns its budget) raises `SystemExit`, so `finally`
blocks and context managers run (the online row's solver processes are
cancelled) before the suite's SIGKILL follows.
"""

from __future__ import annotations

import argparse
import json
import signal
import sys


SKIPPED_EXIT = 3


def _stop(signum, frame):
    raise SystemExit(128 + signum)


def main(argv=None) -> int:
    from benchmarks.gpu._rows import Clock, RowSkipped, load

    parser = argparse.ArgumentParser()
    parser.add_argument("run", help="the row function, package.module:function")
    parser.add_argument("--deadline", type=float, required=True)
    parser.add_argument("--smoke", action="store_true")
    args = parser.parse_args(argv)
    signal.signal(signal.SIGTERM, _stop)
    try:
        load(args.run)(args.smoke, Clock(args.deadline))
    except RowSkipped as skipped:
        print(json.dumps({"skipped": str(skipped)}), flush=True)
        return SKIPPED_EXIT
    return 0


if __name__ == "__main__":
    sys.exit(main())
