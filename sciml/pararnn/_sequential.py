"""`Sequential()`: evaluate the recurrence step by step with `lax.scan`."""

from __future__ import annotations

from typing import ClassVar

import equinox as eqx
import jax
import jax.numpy as jnp
from jax import lax

from .._checks import check_positive_int
from ..solution import RESULTS
from ._solvers import AbstractBackup, _residual, all_finite, sequential_solve, shift


class Sequential(AbstractBackup):
    """Evaluate `h_t = f(h_{t-1}, x_t)` with `lax.scan` (exact; backward by autodiff
    through the scan). As a [`Fallback`][sciml.pararnn.Fallback] backup, it
    re-evaluates the whole sequence when Newton did not converge.

    **Arguments:** `unroll`, the `lax.scan` unrolling.
    """

    unroll: int = eqx.field(static=True, default=1)
    parallel: ClassVar[bool] = False

    def __check_init__(self):
        check_positive_int("unroll", self.unroll)

    def solve_window(self, fn, h0, xs, structure, guess):
        """`lax.scan` over the steps (exact; `guess` is not needed)."""
        hs = sequential_solve(fn, h0, xs, unroll=self.unroll)
        finite = all_finite(hs)
        zero = jnp.array(0, jnp.int32)
        stats = {
            "iterations": zero,
            "residual": jnp.zeros((), h0.dtype),
            "converged": finite,
            "newton_converged": jnp.array(False),
            "nonfinite": ~finite,
            "fallback": jnp.array(False),
            "fallback_iterations": zero,
        }
        return hs, RESULTS.where(finite, RESULTS.successful, RESULTS.recurrence_nonfinite), stats

    def recover(self, fn, h0, xs, structure, hs, res, done, tolerance):
        # A while-loop rather than `lax.cond`: under `vmap` a cond with a batched
        # predicate runs both branches, a while-loop only while some element needs it.
        def body(state):
            new = sequential_solve(fn, h0, xs, unroll=self.unroll)
            return jnp.array(True), new, _residual(new, jax.vmap(fn)(shift(h0, new), xs))

        _, hs, res = lax.while_loop(lambda s: ~s[0], body, (done, hs, res))
        return hs, res, jnp.array(0, jnp.int32)
