r"""`solve_recurrence`: evaluate `h_t = f(h_{t-1}, x_t)` with a solver module, return a `Solution`.

Reverse-mode gradients of the parallel solvers use the implicit-function
theorem at the returned solution: one
[`transposed_recurrence`][sciml.recurrence.transposed_recurrence] with the
Jacobians at the solution and one vmapped VJP of the cell; memory `O(T·n)`.
[`Sequential()`][sciml.pararnn.Sequential] differentiates through its scan.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax
from jaxtyping import Array, Float

from .._checks import check_finite
from ..recurrence import transposed_recurrence
from ..solution import RESULTS, Solution, make_solution
from ._cells import declared_structure
from ._fallback import Fallback
from ._newton import Newton
from ._sequential import Sequential
from ._solvers import all_finite, check_solver_type, shift
from ._structure import check_structure_type


# how the stats of windows combine: the worst window wins
_WORST = {
    "iterations": jnp.max,
    "residual": jnp.max,
    "converged": jnp.all,
    "newton_converged": jnp.all,
    "nonfinite": jnp.any,
    "fallback": jnp.any,
    "fallback_iterations": jnp.max,
}


def _worst(results: RESULTS) -> RESULTS:
    """The result of all windows: `recurrence_nonfinite` if any window is,
    `successful` if every window is, else `recurrence_max_steps_reached`."""
    return RESULTS.where(
        jnp.any(results == RESULTS.recurrence_nonfinite),
        RESULTS.recurrence_nonfinite,
        RESULTS.where(
            jnp.all(results == RESULTS.successful),
            RESULTS.successful,
            RESULTS.recurrence_max_steps_reached,
        ),
    )


def _forward(fn, h0, xs, guess, structure, solver):
    """All windows of the solver's size, one after the other (the last state of
    one starts the next); returns `(hs, result, stats)`."""
    length = jax.tree_util.tree_leaves(xs)[0].shape[0]
    window = solver.window_steps()
    if window is None or window >= length:
        return solver.solve_window(fn, h0, xs, structure, guess)
    count = -(-length // window)
    pad = count * window - length

    def split(leaf):
        if pad:  # repeat the last input: real data, so the padded steps stay finite
            leaf = jnp.concatenate([leaf, jnp.repeat(leaf[-1:], pad, axis=0)])
        return leaf.reshape(count, window, *leaf.shape[1:])

    xs_w = jax.tree_util.tree_map(split, xs)
    guess_w = None if guess is None else split(guess)

    def one(h_prev, inputs):
        x, g = inputs
        hs, result, stats = solver.solve_window(fn, h_prev, x, structure, g)
        return hs[-1], (hs, result, stats)

    _, (hs, results, stats) = lax.scan(one, h0, (xs_w, guess_w))
    hs = hs.reshape(count * window, -1)[:length]
    return hs, _worst(results), {k: _WORST[k](v) for k, v in stats.items()}


def _make_solve(fn, structure, solver):
    """The custom-VJP solve of `fn(h, x, *consts)` as a function of `(consts, h0, xs, guess)`."""

    def cell(consts):
        return lambda h, x: fn(h, x, *consts)

    @jax.custom_vjp
    def solve(consts, h0, xs, guess):
        return _forward(cell(consts), h0, xs, guess, structure, solver)

    def solve_fwd(consts, h0, xs, guess):
        out = _forward(cell(consts), h0, xs, guess, structure, solver)
        return out, (consts, h0, xs, out[0])

    def solve_bwd(residuals, cotangents):
        consts, h0, xs, hs = residuals
        prev = shift(h0, hs)
        # λ_t = g_t + J_{t+1}^T λ_{t+1}: one transposed recurrence at the solution
        _, jac = jax.vmap(
            lambda h, x: structure.value_and_jacobian(lambda v: cell(consts)(v, x), h)
        )(prev, xs)
        method = solver.linear_method()
        lam = transposed_recurrence(jac, cotangents[0], structure=structure, method=method)
        # one VJP of the vmapped cell gives the parameter, input and h0 gradients
        _, vjp = jax.vjp(lambda c, p, x: jax.vmap(cell(c))(p, x), consts, prev, xs)
        grad_consts, grad_prev, grad_xs = vjp(lam)
        return grad_consts, grad_prev[0], grad_xs, None  # the solution ignores the guess

    solve.defvjp(solve_fwd, solve_bwd)
    return solve


def _check_cell(fn, h0, x_example):
    try:
        out = jax.eval_shape(fn, h0, x_example)
    except Exception as error:  # a shape error inside the cell
        raise ValueError(
            f"Calling the cell fn(h, x) with h of shape {h0.shape} and one step of xs "
            f"failed: {error}"
        ) from error
    if not isinstance(out, jax.ShapeDtypeStruct) or out.shape != h0.shape:
        shape = getattr(out, "shape", type(out).__name__)
        raise ValueError(
            f"The cell fn(h, x) must return a state of the same shape as h0 {h0.shape}; "
            f"it returned {shape}."
        )
    if out.dtype != h0.dtype:
        raise ValueError(
            f"The cell fn(h, x) returned dtype {out.dtype} for a state of dtype {h0.dtype}; "
            "make them agree (cast h0 or the cell's parameters)."
        )


def solve_recurrence(
    cell: Callable[[Array, Any], Array],
    h0: Float[Array | np.ndarray, "..."],  # (n,): checked below with a clearer message
    xs: Any,
    solver: Any = None,  # AbstractSolver | None; checked below with a message that names the fix
    *,
    structure: Any = None,  # AbstractStructure | None; likewise
    guess: Float[Array | np.ndarray, "length n"] | None = None,
    throw: bool = True,
) -> Solution:
    r"""Evaluates `h_t = cell(h_{t-1}, x_t)`, `t = 1..T`, with `solver`.

    Reverse-mode gradients (with respect to `h0`, `xs` and every array the cell
    closes over or holds, such as the parameters of an Equinox module) come from
    the implicit-function theorem for the parallel solvers: one transposed
    linear recurrence and one vmapped VJP of the cell. Forward-mode
    differentiation of the parallel solvers is not supported.

    **Arguments:**

    - `cell`: a pure function `cell(h, x) -> h_new` with `h` of shape `(n,)`
      (an Equinox module with `__call__(h, x)` works).
    - `h0`: the initial state `(n,)`.
    - `xs`: the inputs, a pytree whose leaves have leading axis `T`.
    - `solver`: [`Sequential()`][sciml.pararnn.Sequential],
      [`Newton(...)`][sciml.pararnn.Newton],
      [`DampedNewton(...)`][sciml.pararnn.DampedNewton],
      [`Fallback(primary, backup)`][sciml.pararnn.Fallback] (default, `None`:
      `Fallback(Newton(), Sequential())`) or [`Auto()`][sciml.pararnn.Auto].
    - `structure`: the structure of `∂cell/∂h`
      ([`Diagonal()`][sciml.recurrence.Diagonal], `Block(K)`, `Dense()`);
      default: the `structure` an [`AbstractCell`][sciml.pararnn.AbstractCell]
      declares (also for its bound method, `para_gru.step`), whose default is
      `Dense()`; `Dense()` for any other function (always correct; `n` JVPs
      per step). See [`declared_structure`][sciml.pararnn.declared_structure].
      Must be true of the cell, see
      [`check_structure`][sciml.pararnn.check_structure].
    - `guess`: an initial trajectory `(T, n)` (e.g. a previous solution),
      replacing the solver's `guess`.
    - `throw`: raise a runtime error when the returned states do not meet the
      tolerance or are not finite, or when `xs` or `h0` hold NaN or Inf
      (`recurrence_nonfinite`). With `throw=False` read `solution.result`.
      With `throw=True`, a concrete (eager) `xs` or `h0` holding NaN or Inf
      raises a `ValueError` naming it before anything runs (traced inputs are
      not checked on the host, see `sciml._checks`).

    **Returns:** a [`Solution`][sciml.solution.Solution]: `value` the states
    `h_1..h_T` `(T, n)`; `result` `RESULTS.successful`,
    `recurrence_max_steps_reached` or `recurrence_nonfinite`; `stats`:
    `iterations` (Newton iterations, linear solves), `residual`
    (`max|h_t − f(h_{t-1}, x_t)|`), `converged` (the states meet the tolerance),
    `newton_converged` (Newton did, without a backup), `nonfinite` (a Newton
    iterate or its Jacobian was not finite), `fallback` (the backup ran),
    `fallback_iterations` (damped steps of a `DampedNewton` backup). With
    `window`, each is the worst over the windows.
    """
    h0 = jnp.asarray(h0)
    if h0.ndim != 1 or not jnp.issubdtype(h0.dtype, jnp.floating):
        raise ValueError(
            f"h0 must be a floating-point state vector of shape (n,); got shape {h0.shape} "
            f"and dtype {h0.dtype}."
        )
    n = h0.shape[0]
    leaves = jax.tree_util.tree_leaves(xs)
    if not leaves:
        raise ValueError("xs must hold at least one array with a leading time axis.")
    lengths = {jnp.shape(leaf)[0] if jnp.ndim(leaf) else None for leaf in leaves}
    if len(lengths) != 1 or None in lengths or 0 in lengths:
        raise ValueError(
            "Every leaf of xs needs the same leading (time) axis of length >= 1; got leaves "
            f"of shapes {[jnp.shape(leaf) for leaf in leaves]}."
        )
    (length,) = lengths
    if throw:  # concrete (eager) input only: the non-finite policy of sciml._checks
        check_finite("h0", h0)
        for leaf in leaves:
            check_finite("xs", leaf)
    solver = Fallback(Newton(), Sequential()) if solver is None else solver
    check_solver_type(solver)
    structure = declared_structure(cell) if structure is None else structure
    check_structure_type(structure)
    structure.shape(n)
    x_example = jax.tree_util.tree_map(lambda leaf: leaf[0], xs)
    _check_cell(cell, h0, x_example)
    if guess is not None:
        guess = jnp.asarray(guess, h0.dtype)
        if guess.shape != (length, n):
            raise ValueError(f"guess must have shape (T, n) = {(length, n)}; got {guess.shape}.")
    solver = solver.select(length, n, structure)

    # non-finite input gives RESULTS.recurrence_nonfinite: one runtime check, not two
    bad_input = ~all_finite(h0, *leaves)
    if solver.parallel:  # differentiated by the implicit-function theorem
        h0 = solver.checked(cell, h0, xs, structure, guess)
        converted, consts = jax.closure_convert(lambda h, x: cell(h, x), h0, x_example)
        hs, result, stats = _make_solve(converted, structure, solver)(consts, h0, xs, guess)
        stats = lax.stop_gradient(stats)
    else:  # differentiated through its own steps
        hs, result, stats = _forward(cell, h0, xs, guess, structure, solver)
    stats["converged"] = stats["converged"] & ~bad_input
    result = RESULTS.where(bad_input, RESULTS.recurrence_nonfinite, result)
    return make_solution(hs, result, stats, throw=throw)
