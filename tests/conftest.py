"""Shared test setup.

`XLA_FLAGS` is set before jax is imported so that sharding code can be tested on
four virtual CPU devices. float64 is on by default (tests that check float32
behaviour ask for it explicitly with the `float32` fixture or by casting).
"""

import gc
import json
import os
import time


os.environ.setdefault("XLA_FLAGS", "")
if "xla_force_host_platform_device_count" not in os.environ["XLA_FLAGS"]:
    os.environ["XLA_FLAGS"] += " --xla_force_host_platform_device_count=4"
os.environ.setdefault("MPLBACKEND", "Agg")

# JAX's persistent compilation cache is left off (JAX's default); measured on
# two workers, XLA at -O0, it saved nothing: reading a compiled program back
# costs about what compiling it at -O0 does. tests/pararnn took 66 s without
# it, 70 and 73 s with a fresh cache folder per worker; tests/experiments took
# 288 s without it and 331 s with one folder shared by both workers (which
# needs JAX's file lock, set by a size cap: without it a worker once read a
# half-written entry of the other). JAX_COMPILATION_CACHE_DIR=<folder> turns it
# on for a run.

# XLA compiles with most optimizations off (LLVM at -O0), as JAX's own test
# suite does: most tests compile many small programs and run each a few times,
# so optimizing them cost more than it saved (about half the suite's time was
# compilation). Only codegen changes; the programs (HLO) are those users run.
# Tests marked `xla_optimized` (long training runs) compile as users do.
os.environ.setdefault("JAX_DISABLE_MOST_OPTIMIZATIONS", "1")

import jax  # noqa: E402
import matplotlib  # noqa: E402
import pytest  # noqa: E402


matplotlib.use("Agg")
jax.config.update("jax_enable_x64", True)


# Per-test timings: with SCIML_TEST_TIMES=<file>, every test appends one JSON
# line to <file>: "nodeid", "seconds" (setup, call and teardown), "worker",
# "finished" (Unix time), and, in this process only (not in subprocesses a test
# starts), "compile_seconds" (XLA's backend compilation), "trace_seconds"
# (tracing and lowering to MLIR; nested jits may count twice).
# `python tests/durations.py <file>` tables them.
_TIMES_FILE = os.environ.get("SCIML_TEST_TIMES")
_CLOCKS = {
    "/jax/core/compile/backend_compile_duration": "compile_seconds",
    "/jax/core/compile/jaxpr_trace_duration": "trace_seconds",
    "/jax/core/compile/jaxpr_to_mlir_module_duration": "trace_seconds",
}
_counters = dict.fromkeys(_CLOCKS.values(), 0.0)


def _count_duration(event: str, duration: float, **_) -> None:
    if event in _CLOCKS:
        _counters[_CLOCKS[event]] += duration


if _TIMES_FILE:
    jax.monitoring.register_event_duration_secs_listener(_count_duration)

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_protocol(item, nextitem):
        start, before = time.perf_counter(), dict(_counters)
        yield
        record = {
            "nodeid": item.nodeid,
            "seconds": round(time.perf_counter() - start, 3),
            **{name: round(value - before[name], 3) for name, value in _counters.items()},
            "worker": os.environ.get("PYTEST_XDIST_WORKER", "main"),
            "finished": round(time.time(), 1),
        }
        with open(_TIMES_FILE, "a") as f:
            f.write(json.dumps(record) + "\n")


@pytest.fixture
def getkey():
    """Returns a function that gives a fresh PRNG key on every call."""
    key = jax.random.key(0)

    def _getkey():
        nonlocal key
        key, subkey = jax.random.split(key)
        return subkey

    return _getkey


@pytest.fixture
def untyped():
    """Runs the call as a user without the runtime type checker would: the
    suite's jaxtyping/beartype hook would otherwise reject a wrongly typed
    argument (with a `TypeError` of its own) before the package's check can say
    what to do."""
    import jaxtyping

    jaxtyping.config.update("jaxtyping_disable", True)
    try:
        yield
    finally:
        jaxtyping.config.update("jaxtyping_disable", False)


@pytest.fixture
def float32():
    """Runs the test with 64-bit types off, as users run by default."""
    with jax.enable_x64(False):
        yield


@pytest.fixture(autouse=True)
def _xla_optimized(request):
    """Compiles with XLA's optimizations on for tests marked `xla_optimized`
    (fresh programs: the in-memory cache does not know the setting)."""
    if request.node.get_closest_marker("xla_optimized") is None:
        yield
        return
    previous = jax.config.values["jax_disable_most_optimizations"]
    jax.clear_caches()
    jax.config.update("jax_disable_most_optimizations", False)
    try:
        yield
    finally:
        jax.config.update("jax_disable_most_optimizations", previous)
        jax.clear_caches()


@pytest.fixture(autouse=True, scope="module")
def _free_compiled_programs():
    """Drops jax's compiled programs after each test module.

    Every XLA CPU executable holds about 19 memory mappings, and jax keeps the
    executables of every jitted function alive. The whole suite compiles
    thousands of programs; in one process they passed Linux's default limit of
    65,530 mappings per process, and the next compilation crashed the
    interpreter (a segmentation fault inside XLA's compiler). Clearing between
    modules keeps the count at what one module compiles.
    """
    yield
    jax.clear_caches()
    gc.collect()


SLURM_END_TO_END = "tests/online/test_slurm.py"


def pytest_terminal_summary(terminalreporter):
    """Says in one visible block when the Slurm end-to-end tests were skipped
    (no test cluster could be installed or started here), naming them and the
    reason, so that a green run without them is not mistaken for one with them."""
    skipped = [
        report
        for report in terminalreporter.stats.get("skipped", [])
        if report.nodeid.startswith(SLURM_END_TO_END + "::")
    ]
    if not skipped:
        return
    reasons = sorted({str(report.longrepr[-1]).removeprefix("Skipped: ") for report in skipped})
    terminalreporter.write_sep(
        "=", f"{len(skipped)} Slurm end-to-end tests SKIPPED", yellow=True, bold=True
    )
    for reason in reasons:
        terminalreporter.write_line(f"reason: {reason}", yellow=True)
    for report in skipped:
        terminalreporter.write_line(f"  {report.nodeid}")
