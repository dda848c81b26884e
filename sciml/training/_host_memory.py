"""Keeping freed host memory for reuse, so that CPU train steps do not page-fault."""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
import warnings

from jax._src import xla_bridge  # backends_are_initialized: no public way to ask


# glibc's mallopt parameters (malloc.h)
_M_TRIM_THRESHOLD, _M_MMAP_MAX, _M_ARENA_MAX = -1, -4, -8
_SETTINGS = ((_M_ARENA_MAX, 1), (_M_MMAP_MAX, 0), (_M_TRIM_THRESHOLD, 2**31 - 1))


@functools.cache
def reuse_host_memory() -> bool:
    """Makes the C library's `malloc` keep freed memory for reuse (Linux, glibc).

    On the CPU, XLA allocates every call's temporary buffer and frees it after
    the call: for an FNO train step 200 MB at 64² (batch 8) and 1.6 GB at
    128² (batch 16). glibc serves blocks that large with a fresh `mmap` and
    hands them back with `munmap`, so every step writes to new pages, which
    the kernel faults in and zero-fills one by one: about 50,000 page faults a
    step at 64², 40 % of the step's time on a 2-core CPU
    (docs/benchmarks/operators.md). With one malloc arena, no `mmap` for large
    blocks and no trimming of the heap, the next step reuses the freed block,
    with no fault.

    Call it once, at the start of a CPU training script, **before the first
    JAX computation**: XLA's threads that have already allocated keep their
    own arenas, which still map and unmap (a warning says so). The heap grows
    over the first steps to what a step needs, then stays: process-wide and
    for the process' life, it keeps its peak size. Nothing changes for a GPU's
    memory. Idempotent. **Returns** True where applied, False where the C
    library is not glibc (macOS, musl): nothing is changed there.
    """
    name = ctypes.util.find_library("c")
    try:
        libc = ctypes.CDLL(name)
        mallopt = libc.mallopt
    except (OSError, AttributeError, TypeError):
        return False
    if not hasattr(libc, "gnu_get_libc_version"):  # musl's mallopt does nothing
        return False
    mallopt.argtypes, mallopt.restype = (ctypes.c_int, ctypes.c_int), ctypes.c_int
    initialized = getattr(xla_bridge, "backends_are_initialized", lambda: False)
    if initialized():
        warnings.warn(
            "reuse_host_memory() was called after the first JAX computation: the threads "
            "that have already allocated keep mapping fresh memory. Call it first.",
            stacklevel=2,
        )
    return all(mallopt(param, value) == 1 for param, value in _SETTINGS)
