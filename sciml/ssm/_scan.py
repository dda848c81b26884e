"""Diagonal linear recurrences `x_t = λ̄ ⊙ x_{t−1} + v_t` (the S5 path and step mode).

`lax.associative_scan` with the operator
`(a_i, b_i) • (a_j, b_j) = (a_j a_i, a_j b_i + b_j)` evaluates all states in
`O(log L)` depth; `sequential_recurrence` is the plain `lax.scan` (the reference
and the baseline of the benchmark).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from jaxtyping import Array, Complex


def _combine(left, right):
    a_i, b_i = left
    a_j, b_j = right
    return a_j * a_i, a_j * b_i + b_j


def _with_initial_state(Lambda_bar, v, x0, reverse):
    if x0 is None:
        return v
    index = -1 if reverse else 0
    return v.at[index].add(Lambda_bar * x0)


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
    v = _with_initial_state(Lambda_bar, v, x0, reverse)
    a = jnp.broadcast_to(Lambda_bar, v.shape)
    _, states = jax.lax.associative_scan(_combine, (a, v), reverse=reverse, axis=0)
    return states


def sequential_recurrence(
    Lambda_bar: Complex[Array, " *modes"],
    v: Complex[Array, " length *modes"],
    x0: Complex[Array, " *modes"] | None = None,
    *,
    reverse: bool = False,
) -> Complex[Array, " length *modes"]:
    """The same states as [`linear_recurrence`][sciml.ssm.linear_recurrence], one step at a time (`lax.scan`)."""
    if x0 is None:
        x0 = jnp.zeros(jnp.broadcast_shapes(Lambda_bar.shape, v.shape[1:]), v.dtype)

    def step(x, v_t):
        x = Lambda_bar * x + v_t
        return x, x

    _, states = jax.lax.scan(step, x0.astype(v.dtype), v, reverse=reverse)
    return states
