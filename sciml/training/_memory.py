"""Memory of a compiled computation, from XLA's own analysis."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax


def peak_memory_bytes(fn: Callable[..., Any], *args: Any) -> int | None:
    """Peak temporary + argument + output memory of the compiled `fn(*args)`.

    Taken from XLA's memory analysis of the compiled executable (per device),
    so it is the same on every run and works on CPU and GPU; nothing is
    executed. Returns None where the backend does not report it.
    """
    analysis = jax.jit(fn).lower(*args).compile().memory_analysis()
    if analysis is None:
        return None
    return int(
        analysis.temp_size_in_bytes
        + analysis.argument_size_in_bytes
        + analysis.output_size_in_bytes
        - analysis.alias_size_in_bytes
    )
