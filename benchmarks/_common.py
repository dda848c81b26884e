"""Shared timing helpers for the benchmark scripts.

Every benchmark times our code and a baseline in the same process and prints one
JSON line per measurement, so results are ratios on one machine rather than
absolute seconds copied between machines.
"""

from __future__ import annotations

import json
import platform
import sys
import time
from collections.abc import Callable
from typing import Any

import jax
import numpy as np


def block(tree: Any) -> Any:
    """Waits for every array in `tree` (jax or numpy) to be computed."""
    return jax.tree_util.tree_map(
        lambda x: x.block_until_ready() if isinstance(x, jax.Array) else x, tree
    )


def time_fn(
    fn: Callable[..., Any],
    *args: Any,
    warmup: int = 2,
    repeats: int = 5,
    min_seconds: float = 0.2,
) -> dict[str, float]:
    """Times `fn(*args)` after `warmup` calls (compilation happens there).

    Each of `repeats` measurements runs `fn` as many times as needed to last at
    least `min_seconds` and records the mean time of one call.

    **Returns:** `{"median_s": ..., "min_s": ..., "compile_s": ...}` where
    `compile_s` is the wall time of the first (warm-up) call.
    """
    start = time.perf_counter()
    block(fn(*args))
    compile_s = time.perf_counter() - start
    for _ in range(max(warmup - 1, 0)):
        block(fn(*args))
    samples = []
    for _ in range(repeats):
        calls = 0
        start = time.perf_counter()
        while True:
            block(fn(*args))
            calls += 1
            elapsed = time.perf_counter() - start
            if elapsed >= min_seconds:
                break
        samples.append(elapsed / calls)
    return {
        "median_s": float(np.median(samples)),
        "min_s": float(np.min(samples)),
        "compile_s": compile_s,
    }


def environment() -> dict[str, str]:
    """Backend and device description, printed with every benchmark run."""
    device = jax.devices()[0]
    return {
        "backend": jax.default_backend(),
        "device": getattr(device, "device_kind", str(device)),
        "jax": jax.__version__,
        "python": platform.python_version(),
    }


def emit(record: dict[str, Any], stream=sys.stdout) -> None:
    """Prints one benchmark record as a JSON line."""
    stream.write(json.dumps(record, sort_keys=True, default=float) + "\n")
    stream.flush()
