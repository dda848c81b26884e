"""`Newton(...)`: Newton (or quasi-Newton) iterations over the whole sequence (DEER / ParaRNN)."""

from __future__ import annotations

from typing import Any

import equinox as eqx
import jax
import jax.numpy as jnp
from jax import lax

from .._checks import check_positive_int
from ..recurrence import (
    AbstractScanMethod,
    AutoScan,
    Diagonal,
    linear_recurrence,
)
from ..solution import RESULTS
from ._solvers import (
    AbstractSolver,
    _check_guess,
    _check_tolerances,
    _linearise,
    _residual_and_finite,
    _Tolerance,
    _tolerance,
    initial_guess,
    shift,
    window_result,
)
from ._structure import structure_error


class Newton(AbstractSolver):
    r"""Newton's method over the whole sequence (DEER / ParaRNN).

    Each iteration linearises the cell at the current trajectory and solves

    $$\delta_t = J_t\,\delta_{t-1} - R_t,\qquad R_t = h_t - f(h_{t-1}, x_t),\quad
      J_t = \partial f/\partial h\,(h_{t-1}, x_t),$$

    with one parallel linear recurrence, then sets `h ← h + ω δ`. It stops when
    `max|R| ≤ atol + rtol·max|h|` or after `max_steps` iterations; alone it
    returns the last finite iterate (flagged in the result), inside
    [`Fallback`][sciml.pararnn.Fallback] its backup takes over.

    **Arguments:**

    - `max_steps`: iteration cap.
    - `rtol`, `atol`: residual tolerance; `None`:
      [`default_tolerance`][sciml.pararnn.default_tolerance] of the state dtype.
    - `omega`: step length in `(0, 2]` (`< 1` damps, as ParaRNN's `omega_sor`).
    - `guess`: initial trajectory: `"cell"` (`h_t = f(h_0, x_t)`, the ParaRNN
      guess), `"zeros"` or `"h0"` (`h_t = h_0`, DEER's); an array guess goes to
      `solve_recurrence(..., guess=)`.
    - `quasi`: use only the diagonal of the Jacobian (quasi-Newton, quasi-DEER):
      cheaper steps, more of them, the same solution.
    - `linear`: the linear-recurrence method
      ([`AutoScan`][sciml.recurrence.AutoScan] by default), also used by the
      backward pass.
    - `window`: if set, solve windows of this many steps one after the other
      (Newton inside a window, sequential across windows): bounds memory and
      iterations; `None` solves the whole sequence at once.
    - `check_structure`: debug switch: compare the declared structure with
      `jax.jacfwd` at the initial guess and raise if the cell lies.
    """

    max_steps: int = eqx.field(static=True, default=20)
    rtol: float | None = eqx.field(static=True, default=None)
    atol: float | None = eqx.field(static=True, default=None)
    omega: float = eqx.field(static=True, default=1.0)
    # `guess` and `linear` are checked in __check_init__, with messages that say how to fix them
    guess: Any = eqx.field(static=True, default="cell")
    quasi: bool = eqx.field(static=True, default=False)
    linear: Any = AutoScan()
    window: int | None = eqx.field(static=True, default=None)
    check_structure: bool = eqx.field(static=True, default=False)

    def __check_init__(self):
        check_positive_int("max_steps", self.max_steps)
        check_positive_int("window", self.window, allow_none=True)
        _check_tolerances(self.rtol, self.atol)
        _check_guess(self.guess)
        if isinstance(self.omega, bool) or not 0 < self.omega <= 2:
            raise ValueError(f"`omega` must be in (0, 2]; got {self.omega!r}.")
        if not isinstance(self.linear, AbstractScanMethod):
            raise ValueError(
                "`linear` must be a linear-recurrence method (SequentialScan(), "
                f"AssociativeScan(), ChunkedScan(), AutoScan()); got {self.linear!r}."
            )

    def tolerance(self, dtype) -> _Tolerance:
        return _tolerance(self.rtol, self.atol, dtype)

    def window_steps(self) -> int | None:
        return self.window

    def linear_method(self) -> AbstractScanMethod:
        return self.linear

    def start(self, fn, h0, xs, guess):
        """The first iterate: `guess`, or the one `self.guess` names."""
        return initial_guess(self.guess, fn, h0, xs) if guess is None else guess

    def checked(self, fn, h0, xs, structure, guess):
        """With `check_structure`, `h0` raising (under `jit` too) when the cell's
        Jacobian at the first iterate is not `structure`."""
        if not self.check_structure:
            return h0
        error = structure_error(fn, structure, shift(h0, self.start(fn, h0, xs, guess)), xs)
        return eqx.error_if(
            h0,
            ~(error <= 1e3 * jnp.finfo(h0.dtype).eps),
            f"solve_recurrence: the cell's Jacobian is not {structure} "
            "(check_structure=True); declare the structure it has (Dense() always works).",
        )

    def solve_window(self, fn, h0, xs, structure, guess):
        """Newton alone: the last finite iterate, flagged unless it converged."""
        return self.solve_with_backup(fn, h0, xs, structure, guess, None)

    def solve_with_backup(self, fn, h0, xs, structure, guess, backup):
        """Newton's iterations; where they did not converge, `backup`
        (`Sequential()` or `DampedNewton(...)`; None: none) runs from the
        last finite iterate with Newton's tolerance, and its states decide."""
        tolerance = self.tolerance(h0.dtype)
        guess = self.start(fn, h0, xs, guess)
        iterations, hs, res, result = self.iterate(fn, h0, xs, structure, guess, tolerance)
        done = result == RESULTS.successful
        fallback, fallback_iterations = jnp.zeros_like(done), jnp.array(0, jnp.int32)
        if backup is not None:
            hs, res, fallback_iterations = backup.recover(
                fn, h0, xs, structure, hs, res, done, tolerance
            )
            fallback = ~done
        return window_result(
            hs,
            res,
            tolerance,
            result == RESULTS.recurrence_nonfinite,
            iterations=iterations,
            newton_converged=done,
            fallback=fallback,
            fallback_iterations=fallback_iterations,
        )

    def iterate(self, fn, h0, xs, structure, guess, tolerance):
        """Newton iterations from `guess`; returns `(iterations, hs, residual, result)`.

        `result` travels in the loop (as in optimistix's `iterative_solve`):
        `successful` while the iterates are finite, `recurrence_nonfinite` from
        the first that is not (the loop stops there); a loop that stops still
        `successful` above the tolerance ran out of steps
        (`recurrence_max_steps_reached`).
        """
        quasi = self.quasi and structure.kind != "diagonal"
        jac_structure = Diagonal() if quasi else structure
        # Where a Jacobian costs several cell evaluations (dense: `n` JVPs, block:
        # one per block row), it is taken at the start of an iteration, so the
        # iterate that converges gets cell values only (its residual) and no
        # Jacobian: K iterations take K Jacobians, as DEER. A diagonal Jacobian
        # is one JVP, cheaper than the extra cell evaluation that order needs,
        # so it is taken with the values of each new iterate.
        lazy = structure.kind != "diagonal"

        def values(hs):
            return jax.vmap(fn)(shift(h0, hs), xs)

        def evaluate(hs):
            """f at `hs`, and J at `hs` unless `lazy` (then None)."""
            if lazy:
                return values(hs), None
            return _linearise(fn, h0, xs, hs, structure, quasi)

        def result_of(finite):
            return RESULTS.where(finite, RESULTS.successful, RESULTS.recurrence_nonfinite)

        fs, jac = evaluate(guess)
        res, finite = _residual_and_finite(guess, fs, jac)

        # The loop stops at the first non-finite iterate, so only the last one can
        # be non-finite: the carry keeps the iterate before it (`last`) and the
        # finite one is picked once after the loop, not by a select per iteration.
        def cond(state):
            k, hs, _, _, _, res, result = state
            return (k < self.max_steps) & (result == RESULTS.successful) & ~(res <= tolerance(hs))

        def body(state):
            k, hs, _, fs, jac, res, _ = state
            if lazy:  # f again with J (free in the JVPs), so the steps are those of `not lazy`
                fs, jac = _linearise(fn, h0, xs, hs, structure, quasi)
            delta = linear_recurrence(jac, fs - hs, structure=jac_structure, method=self.linear)
            new = hs + self.omega * delta
            fs, jac = evaluate(new)
            new_res, finite = _residual_and_finite(new, fs, jac)
            return k + 1, new, hs, fs, jac, jnp.where(finite, new_res, res), result_of(finite)

        start = (jnp.array(0, jnp.int32), guess, guess, fs, jac, res, result_of(finite))
        k, hs, last, _, _, res, result = lax.while_loop(cond, body, start)
        # keep the last finite iterate: it is returned, or the backup starts from it
        hs = jnp.where(result == RESULTS.successful, hs, last)
        result = RESULTS.where(
            (result == RESULTS.successful) & ~(res <= tolerance(hs)),
            RESULTS.recurrence_max_steps_reached,
            result,
        )
        return k, hs, res, result
