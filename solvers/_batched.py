"""The batched, compiled layer under each solver's `solve` / `advance` / `make_dataset`.

The library itself never jits (`solvers.stepping`: callers `vmap` and `jit`).
These conveniences do, once, at the outermost level: without it every call of a
data generator would retrace and recompile its time loop. The stepper is an
argument of the compiled function (its arrays traced, its settings static), so
a new stepper with the same settings and shapes reuses the compilation, and the
step counts are traced, so other record times or another `n_steps` do not
recompile either.
"""

from __future__ import annotations

from collections.abc import Sequence

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from ._grid import check_resolution
from .stepping import _record, record_increments, repeat


def check_square_fields(w, name: str, *, periodic: bool) -> None:
    """`w` is a real floating batch `(..., s, s)` with a valid resolution `s`."""
    if w.ndim < 2 or w.shape[-1] != w.shape[-2]:
        raise ValueError(f"{name} must have shape (..., s, s), got {w.shape}.")
    check_resolution(w.shape[-1], f"{name}.shape[-1]", periodic=periodic)
    if not jnp.issubdtype(w.dtype, jnp.floating):
        raise ValueError(f"{name} must be a real floating array, got dtype {w.dtype}.")


@eqx.filter_jit
def _record_batch(stepper, u0, increments):
    return jax.vmap(lambda u: _record(stepper, u, increments))(u0)


@eqx.filter_jit
def _repeat_batch(stepper, u, n):
    return jax.vmap(repeat(stepper, n))(u)


def record_batch(stepper, u0, times: Sequence[float] | np.ndarray):
    """`record(stepper, u, times)` for each `u` of the batch `u0` `(batch, channels,
    *grid)`; returns `(batch, len(times), channels, *grid)`."""
    increments = record_increments(times, stepper.dt)
    return _record_batch(stepper, u0, jnp.asarray(increments))


def repeat_batch(stepper, u, n_steps: int):
    """`repeat(stepper, n_steps)(v)` for each `v` of the batch `u`."""
    if int(n_steps) < 0:
        raise ValueError(f"n_steps must be >= 0, got {n_steps!r}.")
    return _repeat_batch(stepper, u, jnp.asarray(int(n_steps)))
