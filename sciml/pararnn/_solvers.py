r"""How to evaluate a nonlinear recurrence `h_t = f(h_{t-1}, x_t)`: the solver modules.

The trajectory `h_1..h_T` is the root of the residual
`R_t(h) = h_t − f(h_{t-1}, x_t)`. Its Jacobian is block lower-bidiagonal
(identity on the diagonal, `−J_t = −∂f/∂h(h_{t-1}, x_t)` below), so a Newton
step is one linear recurrence, `δ_t = J_t δ_{t-1} − R_t`, solved in parallel
over time by [`sciml.recurrence.linear_recurrence`][sciml.recurrence.linear_recurrence].

- [`Sequential()`][sciml.pararnn.Sequential]: `lax.scan` over the steps; exact.
- [`Newton(...)`][sciml.pararnn.Newton]: Newton (or quasi-Newton) iterations.
- [`DampedNewton(...)`][sciml.pararnn.DampedNewton]: damped quasi-Newton steps
  by a parallel Kalman filter (quasi-ELK), bounded where Newton diverges.
- [`Fallback(primary, backup)`][sciml.pararnn.Fallback]: Newton, then the
  backup where Newton did not converge.
- [`Auto()`][sciml.pararnn.Auto]: the measured choice between sequential and
  Newton evaluation per backend, structure, length and batch size.

Each solver has its own module (`_sequential`, `_newton`, `_damped`,
`_fallback`, `_auto`); this one holds what they share: the base classes,
tolerances, the initial guess and the linearisation of the cell.
"""

from __future__ import annotations

import abc
import math
import numbers
from collections.abc import Callable
from typing import Any, ClassVar

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jax import lax
from jaxtyping import Array, Bool, Float

from .._checks import check_choice
from ..recurrence import AbstractScanMethod, AbstractStructure, AutoScan
from ..solution import RESULTS


_TOLERANCES = {8: 1e-12, 4: 1e-5, 2: 1e-2}
GUESSES = ("cell", "zeros", "h0")


def default_tolerance(dtype) -> float:
    """Default `rtol` and `atol` of the residual for states of `dtype`:
    `1e-12` (float64), `1e-5` (float32), `1e-2` (16-bit)."""
    return _TOLERANCES[jnp.dtype(dtype).itemsize]


def sequential_solve(
    fn: Callable[[Array, Any], Array],
    h0: Float[Array | np.ndarray, " n"],
    xs: Any,
    *,
    unroll: int = 1,
) -> Float[Array, "length n"]:
    """Evaluates `h_t = fn(h_{t-1}, x_t)` step by step with `lax.scan`.

    **Arguments:** `fn(h, x) -> h_new` with `h` of shape `(n,)`; `h0` `(n,)`;
    `xs` a pytree whose leaves have leading axis `length`; `unroll` of `lax.scan`.

    **Returns:** the states `h_1..h_T`, shape `(length, n)`.
    """

    def step(h, x):
        h = fn(h, x)
        return h, h

    return lax.scan(step, jnp.asarray(h0), xs, unroll=unroll)[1]


def shift(h0: Array, hs: Array) -> Array:
    """`h_0..h_{T-1}`: the states each step starts from."""
    return jnp.concatenate([h0[None], hs[:-1]])


def all_finite(*arrays: Array | np.ndarray) -> Bool[Array, ""]:
    return jnp.all(jnp.array([jnp.all(jnp.isfinite(a)) for a in arrays]))


def _residual(hs, fs):
    return jnp.max(jnp.abs(hs - fs))


def _residual_and_finite(hs, fs, jac=None):
    """`max|h − f|` (`inf` if anything is not finite) and whether `h`, `f` and `J`
    (unless None) are finite, from one reduction each: a maximum propagates NaN,
    and `h − f` is finite exactly when both are (`inf − inf` is NaN)."""
    res = _residual(hs, fs)
    finite = jnp.isfinite(res)
    if jac is not None:
        finite = finite & jnp.isfinite(jnp.max(jnp.abs(jac)))
    return jnp.where(finite, res, jnp.inf), finite


def initial_guess(kind: str, fn, h0, xs):
    """The initial trajectory `"cell"` (`f(h_0, x_t)`), `"zeros"` or `"h0"`."""
    length = jax.tree_util.tree_leaves(xs)[0].shape[0]
    if kind == "cell":
        return jax.vmap(fn, in_axes=(None, 0))(h0, xs)
    if kind == "zeros":
        return jnp.zeros((length, h0.shape[0]), h0.dtype)
    return jnp.broadcast_to(h0, (length, h0.shape[0]))


class _Tolerance(eqx.Module):
    rtol: float
    atol: float

    def __call__(self, hs):
        return self.atol + self.rtol * jnp.max(jnp.abs(hs))


def _tolerance(rtol, atol, dtype) -> _Tolerance:
    default = default_tolerance(dtype)
    return _Tolerance(
        default if rtol is None else float(rtol), default if atol is None else float(atol)
    )


def _check_tolerance(name, value):
    """A tolerance: `None` (the dtype's default) or a finite real `>= 0`. NaN would
    never compare as converged and `inf` always would, so both are errors."""
    if value is None:
        return
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"`{name}` must be a real number >= 0 or None; got {value!r}.")
    if not (math.isfinite(value) and value >= 0):
        raise ValueError(
            f"`{name}` must be >= 0 and finite, or None (the dtype's default); got {value!r}."
        )


def _check_tolerances(rtol, atol):
    for name, value in (("rtol", rtol), ("atol", atol)):
        _check_tolerance(name, value)


def _check_guess(guess):
    if not isinstance(guess, str):
        raise ValueError(
            f"`guess` must be one of {GUESSES}; got a {type(guess).__name__}. Pass an array "
            "guess to solve_recurrence(..., guess=array)."
        )
    check_choice("guess", guess, GUESSES)


class AbstractSolver(eqx.Module):
    """A way to evaluate a recurrence; pass one to
    [`solve_recurrence`][sciml.pararnn.solve_recurrence] or [`RNN`][sciml.pararnn.RNN].

    A solver owns its step: [`solve_window`][sciml.pararnn.AbstractSolver.solve_window]
    evaluates the recurrence on one window of steps, and the driver never asks
    what kind of solver it holds. `parallel` declares how the solution is
    differentiated: by the implicit-function theorem (one transposed linear
    recurrence by `linear_method()`), or, for a solver that steps through
    time, through its own steps.
    """

    #: Evaluates every step at once (differentiated by the implicit-function
    #: theorem); False for a solver that steps through time.
    parallel: ClassVar[bool] = True

    @abc.abstractmethod
    def solve_window(
        self, fn: Callable, h0: Array, xs: Any, structure: AbstractStructure, guess: Array | None
    ) -> tuple[Array, RESULTS, dict[str, Array]]:
        """The states `h_1..h_T` of `h_t = fn(h_{t-1}, x_t)` on one window,
        from the trajectory `guess` (`(T, n)`; None: the solver's own
        guess); returns `(hs, result, stats)` with the stats of
        [`solve_recurrence`][sciml.pararnn.solve_recurrence]."""

    def select(self, length: int, state_size: int, structure: AbstractStructure) -> AbstractSolver:
        """The solver a call on `length` steps runs: itself (`Auto` chooses)."""
        return self

    def window_steps(self) -> int | None:
        """Steps per window (solved one window after the other); None: all at once."""
        return None

    def linear_method(self) -> AbstractScanMethod:
        """The linear-recurrence method of the implicit-function backward pass."""
        return AutoScan()

    def checked(self, fn: Callable, h0: Array, xs: Any, structure: AbstractStructure, guess):
        """`h0`, with any check the solver makes of the cell before it runs
        (`Newton(check_structure=True)`)."""
        return h0


def check_solver_type(solver: Any) -> None:
    """A `ValueError` naming the solver modules unless `solver` is one."""
    if not isinstance(solver, AbstractSolver):
        raise ValueError(
            "solver must be Sequential(), Newton(...), DampedNewton(...), "
            f"Fallback(primary, backup) or Auto(); got {solver!r}."
        )


def window_result(
    hs, res, tolerance, nonfinite, *, iterations, newton_converged, fallback, fallback_iterations
):
    """`(hs, result, stats)` of a window of a parallel solver: `successful` if
    the states meet the tolerance, `recurrence_nonfinite` if they are not finite
    or an iterate was not (`nonfinite`), else `recurrence_max_steps_reached`."""
    converged = (res <= tolerance(hs)) & all_finite(hs)
    failed = RESULTS.where(
        all_finite(hs) & ~nonfinite,
        RESULTS.recurrence_max_steps_reached,
        RESULTS.recurrence_nonfinite,
    )
    stats = {
        "iterations": iterations,
        "residual": res,
        "converged": converged,
        "newton_converged": newton_converged,
        "nonfinite": nonfinite,
        "fallback": fallback,
        "fallback_iterations": fallback_iterations,
    }
    return hs, RESULTS.where(converged, RESULTS.successful, failed), stats


class AbstractBackup(AbstractSolver):
    """A solver that can take over from an unconverged Newton iterate (the backup of
    [`Fallback`][sciml.pararnn.Fallback])."""

    @abc.abstractmethod
    def recover(self, fn, h0, xs, structure, hs, res, done, tolerance):
        """Runs where `done` is false; returns `(hs, res, iterations)`."""


def _linearise(fn, h0, xs, hs, structure: AbstractStructure, quasi: bool):
    """`f(h_{t-1}, x_t)` and its Jacobians at the trajectory `hs` (diagonals if `quasi`)."""
    prev = shift(h0, hs)
    fs, jac = jax.vmap(lambda h, x: structure.value_and_jacobian(lambda v: fn(v, x), h))(prev, xs)
    if quasi:
        jac = structure.diagonal(jac)
    return fs, jac
