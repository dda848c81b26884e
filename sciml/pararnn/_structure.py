"""Checking that a cell's Jacobian has the structure it declares.

The structures themselves ([`Diagonal`][sciml.recurrence.Diagonal],
[`Block`][sciml.recurrence.Block], [`Dense`][sciml.recurrence.Dense]) live in
`sciml.recurrence`, with their algebra. The cheap ones compute the Jacobian
from indicator tangents, which is right only if the cell really has that
structure: a cell that declares a structure it does not have gives silently
wrong Newton steps, which is what [`check_structure`][sciml.pararnn.check_structure]
catches.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Callable
from typing import Any

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float

from ..recurrence import AbstractStructure


def check_structure_type(structure: Any, name: str = "structure") -> AbstractStructure:
    """Returns `structure` if it is a structure module; raises naming `name` otherwise."""
    if not isinstance(structure, AbstractStructure):
        raise ValueError(
            f"{name} must be one of Diagonal(), Block(k), Dense() (from sciml.recurrence); "
            f"got {structure!r}."
        )
    return structure


def structure_error(
    fn: Callable[[Array, Any], Array],
    structure: AbstractStructure,
    hs: Float[Array, "points n"],
    xs: Any,
) -> Float[Array, ""]:
    """Largest entry of `jax.jacfwd(fn) − (structured Jacobian)` at the points
    `(hs[i], xs[i])`, relative to the largest Jacobian entry (at least 1)."""

    def one(h, x):
        _, jac = structure.value_and_jacobian(lambda v: fn(v, x), h)
        full = jax.jacfwd(fn)(h, x)
        scale = jnp.maximum(jnp.max(jnp.abs(full)), 1.0)
        return jnp.max(jnp.abs(full - structure.to_dense(jac))) / scale

    return jnp.max(jax.vmap(one)(hs, xs))


def check_structure(
    fn: Callable[[Array, Any], Array],
    hs: Float[Array | np.ndarray, "points n"],
    xs: Any,
    structure: Any,  # AbstractStructure; checked with a message naming the accepted ones
    *,
    rtol: float | None = None,
) -> float:
    """Checks that the Jacobian `∂fn/∂h` has the declared structure.

    Compares the Jacobian that the Newton solver would use (from one or `K`
    JVPs) with the full `jax.jacfwd` Jacobian at each point `(hs[i], xs[i])`.
    Use random states: at `h = 0` many cells look more structured than they are.

    **Arguments:**

    - `fn`: the cell, `fn(h, x) -> h_new` with `h` of shape `(n,)`.
    - `hs`: states, shape `(points, n)`.
    - `xs`: inputs, a pytree whose leaves have leading axis `points`.
    - `structure`: the declared structure (`Diagonal()`, `Block(K)`, `Dense()`).
    - `rtol`: tolerance on the largest mismatch relative to `max(1, max|J|)`;
      default `1e3 · eps` of the state dtype.

    **Returns:** the largest relative mismatch (a Python float).

    **Raises:** `ValueError` when the mismatch exceeds `rtol`: the cell is not
    of the declared structure, and Newton steps computed with it would be wrong.
    """
    check_structure_type(structure)
    hs = jnp.asarray(hs)
    if hs.ndim != 2:
        raise ValueError(f"hs must have shape (points, n); got shape {hs.shape}.")
    structure.shape(hs.shape[-1])
    if rtol is None:
        rtol = 1e3 * float(jnp.finfo(hs.dtype).eps)
    elif not (isinstance(rtol, numbers.Real) and math.isfinite(rtol) and rtol >= 0):
        raise ValueError(f"`rtol` must be finite and >= 0, or None; got {rtol!r}.")
    error = float(eqx.filter_jit(structure_error)(fn, structure, hs, xs))
    if not error <= rtol:
        raise ValueError(
            f"The cell's Jacobian is not {structure}: entries outside the declared "
            f"structure (or a wrong structured Jacobian) of relative size {error:.3g} > "
            f"rtol={rtol:.3g}. Declare the structure it has (Dense() always works)."
        )
    return error
