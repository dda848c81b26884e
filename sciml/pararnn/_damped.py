"""`DampedNewton(...)`: damped quasi-Newton steps by a parallel Kalman filter (quasi-ELK)."""

from __future__ import annotations

import math
from typing import Any

import equinox as eqx
import jax
import jax.numpy as jnp
from jax import lax

from .._checks import check_positive_int
from ._elk import kalman_filter_means
from ._solvers import (
    AbstractBackup,
    _check_guess,
    _check_tolerances,
    _linearise,
    _residual,
    _Tolerance,
    _tolerance,
    all_finite,
    initial_guess,
    shift,
    window_result,
)


class DampedNewton(AbstractBackup):
    r"""Damped (Levenberg–Marquardt) quasi-Newton steps by a parallel Kalman filter: quasi-ELK.

    Each step uses the diagonal of the Jacobian and the Kalman filter of
    [`kalman_filter_means`][sciml.pararnn.kalman_filter_means]; the damping
    `λ = 1/σ²` keeps steps bounded where the undamped ones explode (`|J| > 1`).
    Alone it starts from `guess`; as the backup of
    [`Fallback`][sciml.pararnn.Fallback] it starts from the last finite Newton
    iterate and uses Newton's tolerance.

    **Arguments:** `max_steps` (iteration cap), `damping` (`λ > 0`), `rtol`,
    `atol` (as [`Newton`][sciml.pararnn.Newton]), `guess` (`"cell"`, `"zeros"`, `"h0"`).
    """

    max_steps: int = eqx.field(static=True, default=100)
    damping: float = eqx.field(static=True, default=1e-3)
    rtol: float | None = eqx.field(static=True, default=None)
    atol: float | None = eqx.field(static=True, default=None)
    guess: Any = eqx.field(static=True, default="cell")

    def __check_init__(self):
        check_positive_int("max_steps", self.max_steps)
        _check_tolerances(self.rtol, self.atol)
        _check_guess(self.guess)
        if not (self.damping > 0 and math.isfinite(self.damping)):
            raise ValueError(f"`damping` must be positive and finite; got {self.damping!r}.")

    def tolerance(self, dtype) -> _Tolerance:
        return _tolerance(self.rtol, self.atol, dtype)

    def solve_window(self, fn, h0, xs, structure, guess):
        """Alone: damped steps from `guess`; a failure unless they converge."""
        tolerance = self.tolerance(h0.dtype)
        hs = initial_guess(self.guess, fn, h0, xs) if guess is None else guess
        fs = jax.vmap(fn)(shift(h0, hs), xs)
        finite = all_finite(hs) & all_finite(fs)
        res = jnp.where(finite, jnp.max(jnp.abs(hs - fs)), jnp.inf)
        done = jnp.array(False)
        hs, res, iterations = self.recover(fn, h0, xs, structure, hs, res, done, tolerance)
        return window_result(
            hs,
            res,
            tolerance,
            ~finite,
            iterations=jnp.array(0, jnp.int32),
            newton_converged=done,
            fallback=done,
            fallback_iterations=iterations,
        )

    def recover(self, fn, h0, xs, structure, hs, res, done, tolerance):
        sigma2 = 1.0 / self.damping

        def cond(state):
            k, hs, res, finite = state
            return (k < self.max_steps) & finite & ~(res <= tolerance(hs))

        def body(state):
            k, hs, res, _ = state
            fs, a = _linearise(fn, h0, xs, hs, structure, True)
            # the known h_0 is folded into b_1 (the filter starts from z_0 = 0): b_1 = f_1
            b = (fs - a * shift(h0, hs)).at[0].set(fs[0])
            new = kalman_filter_means(a, b, hs, sigma2)
            new_fs = jax.vmap(fn)(shift(h0, new), xs)
            finite = all_finite(new, new_fs)
            hs = jnp.where(finite, new, hs)
            res = jnp.where(finite, _residual(new, new_fs), res)
            return k + 1, hs, res, finite

        start = jnp.where(done, self.max_steps, 0).astype(jnp.int32)
        k, hs, res, _ = lax.while_loop(cond, body, (start, hs, res, jnp.array(True)))
        return hs, res, jnp.where(done, 0, k).astype(jnp.int32)
