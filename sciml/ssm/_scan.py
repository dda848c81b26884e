"""Diagonal linear recurrences `x_t = λ̄ ⊙ x_{t−1} + v_t` (the S5 path and step mode).

Both functions are the shared [`sciml.recurrence.linear_recurrence`][sciml.recurrence.linear_recurrence]
with a time-constant diagonal `λ̄`: `linear_recurrence` by a parallel
(associative) scan, `O(log L)` depth; `sequential_recurrence` by a plain
`lax.scan` (the reference and the baseline of the benchmark).
"""

from __future__ import annotations

import jax.numpy as jnp
from jaxtyping import Array, Complex

from ..recurrence import AssociativeScan, SequentialScan, linear_recurrence as _recurrence


def _run(Lambda_bar, v, x0, reverse, method):
    a = jnp.broadcast_to(Lambda_bar, v.shape)
    return _recurrence(a, v, x0, reverse=reverse, method=method)


def linear_recurrence(
    Lambda_bar: Complex[Array, " *modes"],
    v: Complex[Array, " length *modes"],
    x0: Complex[Array, " *modes"] | None = None,
    *,
    reverse: bool = False,
) -> Complex[Array, " length *modes"]:
    """All states of `x_t = λ̄ ⊙ x_{t−1} + v_t` by a parallel (associative) scan.

    **Arguments:**

    - `Lambda_bar`: discrete eigenvalues, broadcastable against `v[0]`.
    - `v`: inputs `B̄u_t` along the leading (time) axis, `(L, ...)`.
    - `x0`: state before the first step (`x_{−1}`; zeros if `None`).
    - `reverse`: run from the end, `x_t = λ̄ ⊙ x_{t+1} + v_t` (`x0` is then the
      state after the last step).

    **Returns:** the states `(L, ...)`; `x_t` includes `v_t`.
    """
    return _run(Lambda_bar, v, x0, reverse, AssociativeScan())


def sequential_recurrence(
    Lambda_bar: Complex[Array, " *modes"],
    v: Complex[Array, " length *modes"],
    x0: Complex[Array, " *modes"] | None = None,
    *,
    reverse: bool = False,
) -> Complex[Array, " length *modes"]:
    """The same states as [`linear_recurrence`][sciml.ssm.linear_recurrence], one step at a time (`lax.scan`)."""
    return _run(Lambda_bar, v, x0, reverse, SequentialScan())
