r"""Newton-parallel evaluation of a nonlinear recurrence `h_t = f(h_{t-1}, x_t)`.

The trajectory `h_1..h_T` is the root of the residual
`R_t(h) = h_t − f(h_{t-1}, x_t)`. Its Jacobian is block lower-bidiagonal
(identity on the diagonal, `−J_t = −∂f/∂h(h_{t-1}, x_t)` below), so a Newton
step is one linear recurrence, `δ_t = J_t δ_{t-1} − R_t`, solved in parallel
over time by [`linear_recurrence`][sciml.pararnn.linear_recurrence]. Gradients
come from the implicit-function theorem: one reverse linear recurrence with the
transposed Jacobians at the solution and one vmapped VJP of the cell.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jax import lax
from jaxtyping import Array, Bool, Float, Int

from ._elk import kalman_filter_means
from ._linear import METHODS, linear_recurrence
from ._structure import (
    DIAGONAL,
    Structure,
    diagonal,
    jacobian_shape,
    parse_structure,
    structure_error,
    value_and_jacobian,
)


class RESULTS(eqx.Enumeration):
    """How a [`newton_solve`][sciml.pararnn.newton_solve] ended."""

    successful = ""
    max_iterations_reached = (
        "newton_solve: the residual did not reach the tolerance within the iteration cap "
        "(Newton and its fallback). The recurrence may be non-contractive; use "
        "fallback='sequential', raise max_iter, or pass throw=False and read the diagnostics."
    )
    nonfinite = (
        "newton_solve: non-finite values (NaN or Inf) in the returned states, or in Newton "
        "iterates that no fallback recovered from. With fallback='sequential' this means the "
        "recurrence itself is not finite on this input."
    )


class NewtonDiagnostics(eqx.Module):
    """What happened inside [`newton_solve`][sciml.pararnn.newton_solve].

    With `window`, each value is the worst over the windows (maximum
    iterations and residual, any fallback, all converged).

    - `iterations`: Newton iterations done (linear solves).
    - `residual`: `max |h_t − f(h_{t-1}, x_t)|` of the returned states.
    - `converged`: the returned states meet the tolerance.
    - `newton_converged`: Newton itself met the tolerance (no fallback needed).
    - `nonfinite`: a Newton iterate (or its Jacobian) was not finite.
    - `fallback`: the fallback ran.
    - `fallback_iterations`: damped steps done by `fallback="damped"`.
    - `result`: a [`RESULTS`][sciml.pararnn.RESULTS] item.
    """

    iterations: Int[Array, ""]
    residual: Float[Array, ""]
    converged: Bool[Array, ""]
    newton_converged: Bool[Array, ""]
    nonfinite: Bool[Array, ""]
    fallback: Bool[Array, ""]
    fallback_iterations: Int[Array, ""]
    result: RESULTS


GUESSES = ("cell", "zeros", "h0")
FALLBACKS = ("sequential", "damped", "none")
_TOLERANCES = {8: 1e-12, 4: 1e-5, 2: 1e-2}


def default_tolerance(dtype) -> float:
    """Default `rtol` and `atol` of the residual for states of `dtype`:
    `1e-12` (float64), `1e-5` (float32), `1e-2` (16-bit)."""
    return _TOLERANCES[jnp.dtype(dtype).itemsize]


@dataclasses.dataclass(frozen=True)
class _Options:
    structure: Structure
    max_iter: int
    rtol: float
    atol: float
    omega: float
    guess: str | None  # None: an array guess passed separately
    quasi: bool
    fallback: str
    damping: float
    fallback_max_iter: int
    method: str
    chunk_size: int | None
    window: int | None
    check_structure: bool


def sequential_solve(
    fn: Callable[[Array, Any], Array],
    h0: Float[Array | np.ndarray, " n"],
    xs: Any,
    *,
    unroll: int = 1,
) -> Float[Array, "length n"]:
    """Evaluates `h_t = fn(h_{t-1}, x_t)` step by step with `lax.scan`.

    **Arguments:**

    - `fn`: the cell, `fn(h, x) -> h_new`, `h` of shape `(n,)`.
    - `h0`: the initial state, shape `(n,)`.
    - `xs`: the inputs, a pytree whose leaves have leading axis `length`.
    - `unroll`: `lax.scan` unrolling.

    **Returns:** the states `h_1..h_T`, shape `(length, n)`.
    """

    def step(h, x):
        h = fn(h, x)
        return h, h

    return jax.lax.scan(step, h0, xs, unroll=unroll)[1]


def _shift(h0: Array, hs: Array) -> Array:
    """`h_0..h_{T-1}`: the states each step starts from."""
    return jnp.concatenate([h0[None], hs[:-1]])


def _all_finite(*arrays: Array) -> Bool[Array, ""]:
    return jnp.all(jnp.array([jnp.all(jnp.isfinite(a)) for a in arrays]))


def _solve_window(fn, h0, xs, guess, opts: _Options):
    """Newton iterations and the fallback on one window; returns `(hs, stats)`."""
    structure = opts.structure

    def values(hs):
        return jax.vmap(fn)(_shift(h0, hs), xs)

    def linearise(hs, quasi):
        prev = _shift(h0, hs)
        fs, jac = jax.vmap(lambda h, x: value_and_jacobian(structure, lambda v: fn(v, x), h))(
            prev, xs
        )
        if quasi and structure != DIAGONAL:
            jac = diagonal(structure, jac)
        return fs, jac

    def tolerance(hs):
        return opts.atol + opts.rtol * jnp.max(jnp.abs(hs))

    def residual(hs, fs):
        return jnp.max(jnp.abs(hs - fs))

    # Newton: the carry holds f and J at the iterate, so each iteration evaluates
    # the cell (with its Jacobian) once.
    fs, jac = linearise(guess, opts.quasi)
    finite = _all_finite(guess, fs, jac)
    res = jnp.where(finite, residual(guess, fs), jnp.inf)
    state = (jnp.array(0, jnp.int32), guess, fs, jac, res, finite)

    def newton_cond(state):
        k, hs, _, _, res, finite = state
        return (k < opts.max_iter) & finite & ~(res <= tolerance(hs))

    def newton_body(state):
        k, hs, fs, jac, res, _ = state
        delta = linear_recurrence(jac, fs - hs, method=opts.method, chunk_size=opts.chunk_size)
        new = hs + opts.omega * delta
        fs, jac = linearise(new, opts.quasi)
        finite = _all_finite(new, fs, jac)
        # keep the last finite iterate: it is returned, or the fallback starts from it
        hs = jnp.where(finite, new, hs)
        res = jnp.where(finite, residual(new, fs), res)
        return k + 1, hs, fs, jac, res, finite

    iterations, hs, _, _, res, finite = lax.while_loop(newton_cond, newton_body, state)
    newton_converged = finite & (res <= tolerance(hs))
    nonfinite = ~finite

    # The fallbacks are while-loops rather than `lax.cond`: under `vmap` a cond
    # with a batched predicate evaluates both branches, a while-loop only runs
    # while some batch element still needs it.
    if opts.fallback == "sequential":

        def seq_body(state):
            new = sequential_solve(fn, h0, xs)
            return jnp.array(True), new, residual(new, values(new))

        _, hs, res = lax.while_loop(lambda s: ~s[0], seq_body, (newton_converged, hs, res))
        fallback_iterations = jnp.array(0, jnp.int32)
    elif opts.fallback == "damped":
        sigma2 = 1.0 / opts.damping

        def damped_cond(state):
            k, hs, res, finite = state
            return (k < opts.fallback_max_iter) & finite & ~(res <= tolerance(hs))

        def damped_body(state):
            k, hs, res, _ = state
            fs, a = linearise(hs, True)
            b = fs - a * _shift(h0, hs)
            new = kalman_filter_means(a, b, hs, sigma2)
            new_fs = values(new)
            finite = _all_finite(new, new_fs)
            hs = jnp.where(finite, new, hs)
            res = jnp.where(finite, residual(new, new_fs), res)
            return k + 1, hs, res, finite

        start = jnp.where(newton_converged, opts.fallback_max_iter, 0).astype(jnp.int32)
        k, hs, res, _ = lax.while_loop(damped_cond, damped_body, (start, hs, res, jnp.array(True)))
        fallback_iterations = jnp.where(newton_converged, 0, k).astype(jnp.int32)
    else:
        fallback_iterations = jnp.array(0, jnp.int32)

    converged = (res <= tolerance(hs)) & _all_finite(hs)
    failed_nonfinite = ~_all_finite(hs) | (nonfinite & ~converged)
    # 0 successful, 1 max_iterations_reached, 2 nonfinite (the worst code wins across windows)
    code = jnp.where(converged, 0, jnp.where(failed_nonfinite, 2, 1)).astype(jnp.int32)
    stats = {
        "iterations": iterations,
        "residual": res,
        "converged": converged,
        "newton_converged": newton_converged,
        "nonfinite": nonfinite,
        "fallback": (~newton_converged) & (opts.fallback != "none"),
        "fallback_iterations": fallback_iterations,
        "result": code,
    }
    return hs, stats


def _initial_guess(fn, h0, xs, guess_array, opts: _Options):
    if opts.guess is None:
        return guess_array
    length = jax.tree_util.tree_leaves(xs)[0].shape[0]
    if opts.guess == "cell":
        return jax.vmap(fn, in_axes=(None, 0))(h0, xs)
    if opts.guess == "zeros":
        return jnp.zeros((length, h0.shape[0]), h0.dtype)
    return jnp.broadcast_to(h0, (length, h0.shape[0]))


def _forward(fn, h0, xs, guess_array, opts: _Options):
    """All windows; returns `(hs, stats)`."""
    length = jax.tree_util.tree_leaves(xs)[0].shape[0]
    window = opts.window
    if window is None or window >= length:
        guess = _initial_guess(fn, h0, xs, guess_array, opts)
        return _solve_window(fn, h0, xs, guess, opts)
    count = -(-length // window)
    pad = count * window - length

    def split(leaf):
        if pad:  # repeat the last input: real data, so the padded steps stay finite
            leaf = jnp.concatenate([leaf, jnp.repeat(leaf[-1:], pad, axis=0)])
        return leaf.reshape(count, window, *leaf.shape[1:])

    xs_w = jax.tree_util.tree_map(split, xs)
    guess_w = None if guess_array is None else split(guess_array)

    def one(h_prev, inputs):
        x, g = inputs
        guess = _initial_guess(fn, h_prev, x, g, opts)
        hs, stats = _solve_window(fn, h_prev, x, guess, opts)
        return hs[-1], (hs, stats)

    _, (hs, stats) = lax.scan(one, h0, (xs_w, guess_w))
    hs = hs.reshape(count * window, -1)[:length]
    worst = {
        "iterations": jnp.max,
        "residual": jnp.max,
        "converged": jnp.all,
        "newton_converged": jnp.all,
        "nonfinite": jnp.any,
        "fallback": jnp.any,
        "fallback_iterations": jnp.max,
        "result": jnp.max,  # successful is 0; a failure code wins
    }
    return hs, {k: worst[k](v) for k, v in stats.items()}


def _make_solve(fn, opts: _Options):
    """The custom-VJP solve of `fn(h, x, *consts)` as a function of `(consts, h0, xs, guess)`."""

    def cell(consts):
        return lambda h, x: fn(h, x, *consts)

    @jax.custom_vjp
    def solve(consts, h0, xs, guess):
        return _forward(cell(consts), h0, xs, guess, opts)

    def solve_fwd(consts, h0, xs, guess):
        hs, stats = _forward(cell(consts), h0, xs, guess, opts)
        return (hs, stats), (consts, h0, xs, hs)

    def solve_bwd(residuals, cotangents):
        consts, h0, xs, hs = residuals
        grad_hs = cotangents[0]
        prev = _shift(h0, hs)
        # λ_t = g_t + J_{t+1}^T λ_{t+1}: one reverse recurrence at the solution
        _, jac = jax.vmap(
            lambda h, x: value_and_jacobian(opts.structure, lambda v: cell(consts)(v, x), h)
        )(prev, xs)
        lam = linear_recurrence(
            jac, grad_hs, reverse=True, method=opts.method, chunk_size=opts.chunk_size
        )
        # one VJP of the vmapped cell gives the parameter, input and h0 gradients
        _, vjp = jax.vjp(
            lambda c, p, x: jax.vmap(cell(c))(p, x),
            consts,
            prev,
            xs,
        )
        grad_consts, grad_prev, grad_xs = vjp(lam)
        return grad_consts, grad_prev[0], grad_xs, None  # the solution does not depend on the guess

    solve.defvjp(solve_fwd, solve_bwd)
    return solve


def _positive_int(value, name, allow_none=False):
    if allow_none and value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
        accepted = "a positive integer" + (" or None" if allow_none else "")
        raise ValueError(f"{name} must be {accepted}; got {value!r}.")
    return int(value)


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


def newton_solve(
    fn: Callable[[Array, Any], Array],
    h0: Float[Array | np.ndarray, " n"],
    xs: Any,
    *,
    structure: Any = "dense",
    max_iter: int = 20,
    rtol: float | None = None,
    atol: float | None = None,
    omega: float = 1.0,
    guess: str | Array = "cell",
    quasi: bool = False,
    fallback: str = "sequential",
    damping: float = 1e-3,
    fallback_max_iter: int = 100,
    method: str = "auto",
    chunk_size: int | None = None,
    window: int | None = None,
    throw: bool = True,
    check_structure: bool = False,
) -> tuple[Float[Array, "length n"], NewtonDiagnostics]:
    r"""Evaluates `h_t = fn(h_{t-1}, x_t)`, `t = 1..T`, by Newton's method over the whole sequence.

    Each iteration linearises the cell at the current trajectory and solves
    $$\delta_t = J_t\,\delta_{t-1} - R_t,\qquad R_t = h_t - f(h_{t-1}, x_t),\quad
      J_t = \partial f/\partial h\,(h_{t-1}, x_t),$$
    with one parallel linear recurrence, then sets `h ← h + ω δ`. It stops
    when `max|R| ≤ atol + rtol·max|h|` or after `max_iter` iterations. If
    Newton stops without converging, or an iterate is not finite, the
    `fallback` runs; the diagnostics always say which.

    Reverse-mode gradients (with respect to `h0`, `xs` and every array `fn`
    closes over or holds, such as the parameters of an Equinox module passed as
    `fn`) use the implicit-function theorem at the returned solution: one
    reverse linear recurrence with the transposed Jacobians and one vmapped VJP
    of the cell; memory `O(T·n)`. Forward-mode differentiation is not supported.

    **Arguments:**

    - `fn`: the cell, a pure function `fn(h, x) -> h_new` with `h` and `h_new`
      of shape `(n,)` (an Equinox module with `__call__(h, x)` works).
    - `h0`: the initial state, shape `(n,)`.
    - `xs`: the inputs, a pytree whose leaves have leading axis `T`.
    - `structure`: the structure of `∂fn/∂h`: `"diagonal"`, `"block(K)"` (`K × K`
      blocks of diagonals, e.g. `"block(2)"` for ParaLSTM) or `"dense"` (always
      correct; `n` JVPs per step). Must be true of the cell, see
      [`check_structure`][sciml.pararnn.check_structure].
    - `max_iter`: Newton iteration cap.
    - `rtol`, `atol`: residual tolerance; default
      [`default_tolerance`][sciml.pararnn.default_tolerance] of the state dtype.
    - `omega`: step length (`< 1` damps, as ParaRNN's `omega_sor`).
    - `guess`: initial trajectory: `"cell"` (`h_t = f(h_0, x_t)`, the ParaRNN
      guess `f(0, x_t)` when `h_0 = 0`), `"zeros"`, `"h0"` (`h_t = h_0`,
      DEER's) or an array of shape `(T, n)` (e.g. the previous solution).
    - `quasi`: use only the diagonal of the Jacobian (quasi-Newton, quasi-DEER):
      cheaper steps, more of them, the same solution.
    - `fallback`: when Newton does not converge: `"sequential"` (evaluate with
      `lax.scan`; exact), `"damped"` (up to `fallback_max_iter` damped
      quasi-Newton steps by a parallel Kalman filter, quasi-ELK, starting from
      the last finite Newton iterate) or `"none"` (return the last finite
      iterate, flagged in the diagnostics).
    - `damping`: the Levenberg–Marquardt damping `λ = 1/σ²` of `"damped"`.
    - `fallback_max_iter`: iteration cap of `"damped"`.
    - `method`, `chunk_size`: linear-recurrence method, see
      [`linear_recurrence`][sciml.pararnn.linear_recurrence].
    - `window`: if set, solve windows of this many steps one after the other
      (Newton inside a window, sequential across windows): bounds the memory
      and the iteration count; `None` solves the whole sequence at once.
    - `throw`: raise a runtime error (`eqx.error_if`) when the returned states
      do not meet the tolerance or are not finite, and when `xs` or `h0` hold
      NaN or Inf. With `throw=False` read `diagnostics.result` instead.
    - `check_structure`: debug switch: compare the declared structure with
      `jax.jacfwd` at the initial guess and raise if the cell lies (costs `n`
      JVPs per step).

    **Returns:** `(hs, diagnostics)`: the states `h_1..h_T` of shape `(T, n)` and
    a [`NewtonDiagnostics`][sciml.pararnn.NewtonDiagnostics].
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
    structure = parse_structure(structure)
    jacobian_shape(structure, n)
    x_example = jax.tree_util.tree_map(lambda leaf: leaf[0], xs)
    _check_cell(fn, h0, x_example)
    guess_array = None
    if isinstance(guess, str):
        if guess not in GUESSES:
            raise ValueError(f"guess must be one of {GUESSES} or an array; got {guess!r}.")
    else:
        guess_array = jnp.asarray(guess, h0.dtype)
        if guess_array.shape != (length, n):
            raise ValueError(
                f"guess must have shape (T, n) = {(length, n)}; got {guess_array.shape}."
            )
        guess = None
    if fallback not in FALLBACKS:
        raise ValueError(f"fallback must be one of {FALLBACKS}; got {fallback!r}.")
    if method not in METHODS:
        raise ValueError(f"method must be one of {METHODS}; got {method!r}.")
    if not 0 < omega <= 2:
        raise ValueError(f"omega must be in (0, 2]; got {omega!r}.")
    if not damping > 0:
        raise ValueError(f"damping must be positive; got {damping!r}.")
    tol = default_tolerance(h0.dtype)
    opts = _Options(
        structure=structure,
        max_iter=_positive_int(max_iter, "max_iter"),
        rtol=tol if rtol is None else float(rtol),
        atol=tol if atol is None else float(atol),
        omega=float(omega),
        guess=guess,
        quasi=bool(quasi),
        fallback=fallback,
        damping=float(damping),
        fallback_max_iter=_positive_int(fallback_max_iter, "fallback_max_iter"),
        method=method,
        chunk_size=_positive_int(chunk_size, "chunk_size", allow_none=True),
        window=_positive_int(window, "window", allow_none=True),
        check_structure=bool(check_structure),
    )
    if opts.rtol < 0 or opts.atol < 0:
        raise ValueError(f"rtol and atol must be >= 0; got {opts.rtol}, {opts.atol}.")

    if throw:
        bad = ~(_all_finite(h0) & jnp.all(jnp.array([jnp.all(jnp.isfinite(x)) for x in leaves])))
        h0 = eqx.error_if(h0, bad, "newton_solve: h0 or xs contains NaN or Inf.")
    if opts.check_structure:
        start = _initial_guess(fn, h0, xs, guess_array, opts)
        error = structure_error(fn, structure, _shift(h0, start), xs)
        limit = 1e3 * jnp.finfo(h0.dtype).eps
        h0 = eqx.error_if(
            h0,
            ~(error <= limit),
            f"newton_solve: the cell's Jacobian is not {structure} (check_structure=True); "
            "declare the structure it has ('dense' always works).",
        )

    converted, consts = jax.closure_convert(lambda h, x: fn(h, x), h0, x_example)
    hs, stats = _make_solve(converted, opts)(consts, h0, xs, guess_array)
    stats = jax.lax.stop_gradient(stats)
    code = stats["result"]
    result = RESULTS.where(
        code == 0,
        RESULTS.successful,
        RESULTS.where(code == 2, RESULTS.nonfinite, RESULTS.max_iterations_reached),
    )
    diagnostics = NewtonDiagnostics(
        iterations=stats["iterations"],
        residual=stats["residual"],
        converged=stats["converged"],
        newton_converged=stats["newton_converged"],
        nonfinite=stats["nonfinite"],
        fallback=stats["fallback"],
        fallback_iterations=stats["fallback_iterations"],
        result=result,
    )
    if throw:
        hs = diagnostics.result.error_if(hs, diagnostics.result != RESULTS.successful)
    return hs, diagnostics
