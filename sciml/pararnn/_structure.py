"""Jacobian structures of a recurrence `h' = f(h, x)` and how to compute them.

A structure says which entries of `J = ∂f/∂h` (an `n × n` matrix) can be
non-zero, and fixes the array layout used by the linear-recurrence solvers:

| structure | non-zeros of `J` | stored as | JVPs per step |
| --- | --- | --- | --- |
| `"diagonal"` | the diagonal | `(n,)` | 1 |
| `"block(K)"` | `K × K` blocks, each a diagonal of size `m = n / K` | `(K, K, m)` | `K` |
| `"dense"` | all | `(n, n)` | `n` |

For `block(K)` the state is `K` contiguous pieces of size `m` (the ParaLSTM
state `[c, h]` is `block(2)`), and `J[i*m + p, j*m + p] = A[i, j, p]`.

The cheap structures are computed with indicator tangents: `J @ 1` is the
diagonal only if `J` really is diagonal. A cell that declares a structure it
does not have gives silently wrong Newton steps, which is what
[`check_structure`][sciml.pararnn.check_structure] catches.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable
from typing import Any

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float


@dataclasses.dataclass(frozen=True)
class Structure:
    """A parsed Jacobian structure: `kind` is `"diagonal"`, `"block"` or `"dense"`;
    `k` is the block count (1 for diagonal, 0 for dense)."""

    kind: str
    k: int = 1

    def __str__(self) -> str:
        return f"block({self.k})" if self.kind == "block" else self.kind


DIAGONAL = Structure("diagonal", 1)
DENSE = Structure("dense", 0)
_ACCEPTED = "'diagonal', 'dense', 'block(K)' with an integer K >= 1, or ('block', K)"


def parse_structure(structure: Any, name: str = "structure") -> Structure:
    """Turns `"diagonal"`, `"dense"`, `"block(K)"`, `("block", K)` or a
    `Structure` into a `Structure`; anything else raises `ValueError`."""
    if isinstance(structure, Structure):
        return structure
    k = None
    if isinstance(structure, str):
        text = structure.strip().lower()
        if text in ("diagonal", "dense"):
            return DIAGONAL if text == "diagonal" else DENSE
        match = re.fullmatch(r"block\(\s*(\d+)\s*\)", text)
        if match:
            k = int(match.group(1))
    elif (
        isinstance(structure, tuple)
        and len(structure) == 2
        and structure[0] == "block"
        and isinstance(structure[1], (int, np.integer))
    ):
        k = int(structure[1])
    if k is None or k < 1:
        raise ValueError(f"{name} must be one of {_ACCEPTED}; got {structure!r}.")
    return DIAGONAL if k == 1 else Structure("block", k)


def jacobian_shape(structure: Structure, n: int) -> tuple[int, ...]:
    """Shape of one step's Jacobian in the layout of `structure` for state size `n`."""
    if structure.kind == "diagonal":
        return (n,)
    if structure.kind == "dense":
        return (n, n)
    k = structure.k
    if n % k:
        raise ValueError(f"structure {structure} needs a state size divisible by {k}, got {n}.")
    return (k, k, n // k)


def infer_structure(a_shape: tuple[int, ...], b_shape: tuple[int, ...]) -> Structure:
    """The structure of per-step matrices `A` of shape `(T, *s)` acting on states
    `b` of shape `(T, n)`: `s = (n,)` diagonal, `(n, n)` dense, `(K, K, n/K)` block."""
    if len(b_shape) != 2:
        raise ValueError(f"b must have shape (length, n); got shape {b_shape}.")
    length, n = b_shape
    s = tuple(a_shape[1:])
    if a_shape[:1] != (length,):
        raise ValueError(f"A must have the same length as b ({length}); got A of shape {a_shape}.")
    if s == (n,):
        return DIAGONAL
    if s == (n, n):
        return DENSE
    if len(s) == 3 and s[0] == s[1] and s[0] * s[2] == n:
        return parse_structure(("block", s[0]))
    raise ValueError(
        f"A of shape {a_shape} does not fit states of shape {b_shape}: expected (T, n) "
        "for diagonal, (T, n, n) for dense or (T, K, K, n/K) for block-diagonal steps."
    )


def identity(structure: Structure, n: int, dtype) -> Array:
    """The identity matrix in the layout of `structure`."""
    if structure.kind == "diagonal":
        return jnp.ones((n,), dtype)
    if structure.kind == "dense":
        return jnp.eye(n, dtype=dtype)
    k = structure.k
    return jnp.broadcast_to(jnp.eye(k, dtype=dtype)[:, :, None], (k, k, n // k))


def matmul(structure: Structure, a: Array, b: Array) -> Array:
    """`a @ b` for two stacks (leading axes broadcast) of structured matrices."""
    if structure.kind == "diagonal":
        return a * b
    if structure.kind == "dense":
        return a @ b
    return jnp.einsum("...ijp,...jkp->...ikp", a, b)


def matvec(structure: Structure, a: Array, y: Array) -> Array:
    """`a @ y` for stacks of structured matrices `a` and vectors `y` of size `n`."""
    if structure.kind == "diagonal":
        return a * y
    if structure.kind == "dense":
        return jnp.einsum("...ij,...j->...i", a, y)
    k, m = a.shape[-3], a.shape[-1]
    out = jnp.einsum("...ijp,...jp->...ip", a, y.reshape(*y.shape[:-1], k, m))
    return out.reshape(*out.shape[:-2], k * m)


def transpose(structure: Structure, a: Array) -> Array:
    """The transposed matrices, in the same layout."""
    if structure.kind == "diagonal":
        return a
    if structure.kind == "dense":
        return jnp.swapaxes(a, -1, -2)
    return jnp.swapaxes(a, -3, -2)


def diagonal(structure: Structure, a: Array) -> Array:
    """The diagonal entries `(..., n)` of structured matrices."""
    if structure.kind == "diagonal":
        return a
    if structure.kind == "dense":
        return jnp.diagonal(a, axis1=-2, axis2=-1)
    blocks = jnp.diagonal(a, axis1=-3, axis2=-2)  # (..., m, K)
    return jnp.swapaxes(blocks, -1, -2).reshape(*a.shape[:-3], -1)


def to_dense(structure: Structure, a: Array) -> Array:
    """Structured matrices as dense `(..., n, n)` matrices."""
    if structure.kind == "diagonal":
        return a[..., :, None] * jnp.eye(a.shape[-1], dtype=a.dtype)
    if structure.kind == "dense":
        return a
    k, m = a.shape[-3], a.shape[-1]
    eye = jnp.eye(m, dtype=a.dtype)
    dense = a[..., :, :, :, None] * eye  # (..., K, K, m, m): block (i, j) is diag(a[i, j])
    return jnp.swapaxes(dense, -3, -2).reshape(*a.shape[:-3], k * m, k * m)


def value_and_jacobian(
    structure: Structure, fn: Callable[[Array], Array], h: Float[Array, " n"]
) -> tuple[Float[Array, " n"], Array]:
    """`fn(h)` and its Jacobian in the layout of `structure`.

    Diagonal: one JVP with an all-ones tangent. `block(K)`: `K` JVPs with the
    indicator tangents of the `K` state pieces; piece `i` of the `j`-th result
    is the diagonal of block `(i, j)`. Dense: `n` JVPs (`jax.jacfwd`).
    """
    n = h.shape[-1]
    if structure.kind == "diagonal":
        return jax.jvp(fn, (h,), (jnp.ones_like(h),))
    if structure.kind == "dense":
        jac, value = jax.jacfwd(lambda v: (fn(v), fn(v)), has_aux=True)(h)
        return value, jac
    k = structure.k
    m = n // k
    tangents = jnp.repeat(jnp.eye(k, dtype=h.dtype), m, axis=1)  # (K, n)
    value, columns = jax.vmap(lambda t: jax.jvp(fn, (h,), (t,)), out_axes=(None, 0))(tangents)
    # columns[j, i*m + p] = J[i*m + p, j*m + p] = A[i, j, p]
    return value, jnp.swapaxes(columns.reshape(k, k, m), 0, 1)


def structure_error(
    fn: Callable[[Array, Any], Array],
    structure: Structure,
    hs: Float[Array, "points n"],
    xs: Any,
) -> Float[Array, ""]:
    """Largest entry of `jax.jacfwd(fn) − (structured Jacobian)` at the points
    `(hs[i], xs[i])`, relative to the largest Jacobian entry (at least 1)."""

    def one(h, x):
        _, jac = value_and_jacobian(structure, lambda v: fn(v, x), h)
        full = jax.jacfwd(fn)(h, x)
        scale = jnp.maximum(jnp.max(jnp.abs(full)), 1.0)
        return jnp.max(jnp.abs(full - to_dense(structure, jac))) / scale

    return jnp.max(jax.vmap(one)(hs, xs))


def check_structure(
    fn: Callable[[Array, Any], Array],
    hs: Float[Array | np.ndarray, "points n"],
    xs: Any,
    structure: Any,
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
    - `structure`: the declared structure (`"diagonal"`, `"block(K)"`, `"dense"`).
    - `rtol`: tolerance on the largest mismatch relative to `max(1, max|J|)`;
      default `1e3 · eps` of the state dtype.

    **Returns:** the largest relative mismatch (a Python float).

    **Raises:** `ValueError` when the mismatch exceeds `rtol`: the cell is not
    of the declared structure, and Newton steps computed with it would be wrong.
    """
    structure = parse_structure(structure)
    hs = jnp.asarray(hs)
    if hs.ndim != 2:
        raise ValueError(f"hs must have shape (points, n); got shape {hs.shape}.")
    jacobian_shape(structure, hs.shape[-1])
    if rtol is None:
        rtol = 1e3 * float(jnp.finfo(hs.dtype).eps)
    error = float(eqx.filter_jit(structure_error)(fn, structure, hs, xs))
    if not error <= rtol:
        raise ValueError(
            f"The cell's Jacobian is not {structure}: entries outside the declared "
            f"structure (or a wrong structured Jacobian) of relative size {error:.3g} > "
            f"rtol={rtol:.3g}. Declare the structure it has ('dense' always works)."
        )
    return error
