"""The mutation audit: one-line breaks of the package and the tests that must catch them.

Each `Break` names a file, one line of it as it is and as broken, the tests
that must fail under the break, and the margin they caught it by when it was
last run (the value a broken line gives against the test's tolerance). The
script applies each break in a temporary copy of the checkout and runs its
tests there (one process, no workers):

    .venv/bin/python tests/mutations.py --list          # the breaks, one a line
    .venv/bin/python tests/mutations.py                 # every break: a Markdown table
    .venv/bin/python tests/mutations.py pararnn-window  # the breaks whose name holds a word

A break whose tests all pass is "MISSED" and the script exits 1; a break whose
original line is no longer in its file is "STALE" (update the list with the
code). Not collected by pytest (not a `test_*.py` file) and not run in CI:
each break runs its tests afresh, minutes in all.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path


ROOT = Path(__file__).resolve().parent.parent


@dataclasses.dataclass(frozen=True)
class Break:
    name: str
    file: str
    original: str  # one line (without its indentation), found exactly once in `file`
    mutated: str  # the line that replaces it (the indentation is kept)
    tests: tuple[str, ...]  # pytest node ids that must fail
    margin: str  # what the tests measured under the break, against their tolerance


BREAKS = [
    # item 1: a windowed solve that reads its result from the last window only
    Break(
        "pararnn-window-last-only",
        "sciml/pararnn/_solve.py",
        "return hs, _worst(results), {k: _WORST[k](v) for k, v in stats.items()}",
        "return hs, results[-1], {k: v[-1] for k, v in stats.items()}",
        ("tests/pararnn/test_newton.py::test_the_worst_window_names_the_result",),
        "first window failed: result `successful`, expected `recurrence_max_steps_reached` "
        "(states 0.038 off, tolerance of the test's reading 0.03)",
    ),
    # item 2: the message MAC compared on part of its bytes, or not in constant time
    Break(
        "transport-mac-first-16-bytes",
        "sciml/transport/_wire.py",
        "if not hmac.compare_digest(_mac(secret, data[: len(data) - MAC_BYTES]), mac):",
        "if not hmac.compare_digest(_mac(secret, data[: len(data) - MAC_BYTES])[:16], mac[:16]):",
        ("tests/online/test_wire.py::test_the_whole_mac_is_compared_in_constant_time",),
        "decode accepts a flip of MAC byte 16 (did not raise; expected `auth`)",
    ),
    Break(
        "transport-mac-first-byte",
        "sciml/transport/_wire.py",
        "if not hmac.compare_digest(_mac(secret, data[: len(data) - MAC_BYTES]), mac):",
        "if not hmac.compare_digest(_mac(secret, data[: len(data) - MAC_BYTES])[:1], mac[:1]):",
        ("tests/online/test_wire.py::test_the_whole_mac_is_compared_in_constant_time",),
        "decode accepts a flip of MAC byte 1 (did not raise; expected `auth`)",
    ),
    Break(
        "transport-mac-not-constant-time",
        "sciml/transport/_wire.py",
        "if not hmac.compare_digest(_mac(secret, data[: len(data) - MAC_BYTES]), mac):",
        "if _mac(secret, data[: len(data) - MAC_BYTES]) != bytes(mac):",
        ("tests/online/test_wire.py::test_the_whole_mac_is_compared_in_constant_time",),
        "`hmac.compare_digest` never called (expected one call with the 32-byte digest)",
    ),
    # item 3: a lease row whose timeout ignores the time left
    Break(
        "gpu-lease-timeout-ignores-time-left",
        "benchmarks/gpu/_suite.py",
        "timeout = min(budget, left)",
        "timeout = budget",
        (
            "tests/benchmarks/test_gpu_suite.py"
            "::test_a_row_longer_than_the_time_left_is_stopped_inside_the_limit",
        ),
        "the row's timeout 30 s (test allows <= 2 s); the lease ran 31 s against a 17-s limit",
    ),
    # item 4: the S4-PTD optimiser keeping the iterate of least condition number
    Break(
        "ssm-ptd-best-by-kappa-alone",
        "sciml/ssm/_ptd.py",
        'value = aux["kappa"] + gamma * aux["size"] + transfer_weight * aux["transfer"]',
        'value = aux["kappa"]',
        ("tests/ssm/test_ptd.py::test_sizes_not_shipped_are_computed_and_cached",),
        "N = 6 transfer distance 0.0827 against the bound 0.07 (measured 0.0629)",
    ),
    # item 5: solver jobs that stop setting the BLAS thread variables
    Break(
        "online-jobs-blas-threads-unset",
        "sciml/online/_launch.py",
        "out[var] = str(threads)",
        "pass",
        (
            "tests/online/test_worker.py::test_local_jobs_get_their_thread_count_and_the_secret",
            "tests/online/test_slurm.py"
            "::test_submit_passes_options_and_keeps_the_secret_off_the_command_line",
        ),
        "local: OMP/OPENBLAS/MKL_NUM_THREADS '16' (the trainer's), expected '1' and '3'; "
        "Slurm: '16', expected '2'; exact check",
    ),
    Break(
        "online-jobs-blas-threads-not-overriding",
        "sciml/online/_launch.py",
        "out[var] = str(threads)",
        "out.setdefault(var, str(threads))",
        (
            "tests/online/test_worker.py::test_local_jobs_get_their_thread_count_and_the_secret",
            "tests/online/test_slurm.py"
            "::test_submit_passes_options_and_keeps_the_secret_off_the_command_line",
        ),
        "the trainer's '16' kept, expected the launcher's count; exact check",
    ),
    Break(
        "online-jobs-xla-threads",
        "sciml/online/_launch.py",
        'out["XLA_FLAGS"] = f"--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads={threads}"',
        'out["XLA_FLAGS"] = "--xla_cpu_multi_thread_eigen=false"',
        (
            "tests/online/test_worker.py::test_local_jobs_get_their_thread_count_and_the_secret",
            "tests/online/test_slurm.py"
            "::test_submit_passes_options_and_keeps_the_secret_off_the_command_line",
        ),
        "`intra_op_parallelism_threads=N` missing from XLA_FLAGS; exact check",
    ),
]


def apply(root: Path, brk: Break) -> bool:
    """Applies `brk` under `root`; False if its original line is not found exactly once."""
    path = root / brk.file
    lines = path.read_text().splitlines(keepends=True)
    found = [i for i, line in enumerate(lines) if line.strip() == brk.original.strip()]
    if len(found) != 1:
        return False
    (i,) = found
    indent = lines[i][: len(lines[i]) - len(lines[i].lstrip())]
    lines[i] = indent + brk.mutated.strip() + "\n"
    path.write_text("".join(lines))
    return True


def checkout_copy(target: Path) -> None:
    """The tracked and untracked-but-not-ignored files of the checkout, copied to `target`."""
    names = subprocess.run(
        ["git", "ls-files", "-co", "--exclude-standard", "-z"],
        cwd=ROOT,
        check=True,
        capture_output=True,
    ).stdout.split(b"\0")
    for name in filter(None, names):
        source = ROOT / os.fsdecode(name)
        if source.is_file():
            (target / os.fsdecode(name)).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target / os.fsdecode(name))


def run(brk: Break, scratch: Path) -> tuple[str, str]:
    """`(verdict, failing tests)` of one break, in a fresh copy under `scratch`."""
    root = scratch / brk.name
    checkout_copy(root)
    if not apply(root, brk):
        return "STALE", ""
    env = dict(os.environ, PYTHONPATH=str(root), PYTHONDONTWRITEBYTECODE="1")
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-n", "0", "-p", "no:cacheprovider", *brk.tests],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
    )
    shutil.rmtree(root, ignore_errors=True)
    failed = [line.split()[1] for line in proc.stdout.splitlines() if line.startswith("FAILED ")]
    if proc.returncode == 1 and failed:
        return "caught", ", ".join(name.split("::")[-1] for name in failed)
    if proc.returncode == 0:
        return "MISSED", ""
    return f"error (pytest exit {proc.returncode})", proc.stdout[-300:].replace("\n", " ")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("words", nargs="*", help="run only the breaks whose name holds a word")
    parser.add_argument("--list", action="store_true", help="list the breaks and exit")
    args = parser.parse_args(argv)
    chosen = [b for b in BREAKS if not args.words or any(w in b.name for w in args.words)]
    if not chosen:
        parser.error(f"no break's name holds any of {args.words}")
    if args.list:
        for brk in chosen:
            print(f"{brk.name}: {brk.file}: {brk.original!r} -> {brk.mutated!r}")
        return 0
    print("| break | file | verdict | failing tests | margin |")
    print("| --- | --- | --- | --- | --- |")
    missed = False
    with tempfile.TemporaryDirectory(prefix="sciml-mutations-") as scratch:
        for brk in chosen:
            verdict, failing = run(brk, Path(scratch))
            missed |= verdict != "caught"
            print(f"| {brk.name} | {brk.file} | {verdict} | {failing} | {brk.margin} |", flush=True)
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main())
