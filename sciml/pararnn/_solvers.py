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
"""

from __future__ import annotations

import abc
import math
import numbers
from collections.abc import Callable
from typing import Any

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jax import lax
from jaxtyping import Array, Bool, Float

from .._checks import check_choice, check_positive_int
from ..recurrence import (
    AbstractScanMethod,
    AbstractStructure,
    AutoScan,
    Diagonal,
    linear_recurrence,
)
from ._elk import kalman_filter_means


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
    [`solve_recurrence`][sciml.pararnn.solve_recurrence] or [`RNN`][sciml.pararnn.RNN]."""


class AbstractBackup(AbstractSolver):
    """A solver that can take over from an unconverged Newton iterate (the backup of
    [`Fallback`][sciml.pararnn.Fallback])."""

    @abc.abstractmethod
    def recover(self, fn, h0, xs, structure, hs, res, done, tolerance):
        """Runs where `done` is false; returns `(hs, res, iterations)`."""


class Sequential(AbstractBackup):
    """Evaluate `h_t = f(h_{t-1}, x_t)` with `lax.scan` (exact; backward by autodiff
    through the scan). As a [`Fallback`][sciml.pararnn.Fallback] backup, it
    re-evaluates the whole sequence when Newton did not converge.

    **Arguments:** `unroll`, the `lax.scan` unrolling.
    """

    unroll: int = eqx.field(static=True, default=1)

    def __check_init__(self):
        check_positive_int("unroll", self.unroll)

    def recover(self, fn, h0, xs, structure, hs, res, done, tolerance):
        # A while-loop rather than `lax.cond`: under `vmap` a cond with a batched
        # predicate runs both branches, a while-loop only while some element needs it.
        def body(state):
            new = sequential_solve(fn, h0, xs, unroll=self.unroll)
            return jnp.array(True), new, _residual(new, jax.vmap(fn)(shift(h0, new), xs))

        _, hs, res = lax.while_loop(lambda s: ~s[0], body, (done, hs, res))
        return hs, res, jnp.array(0, jnp.int32)


def _linearise(fn, h0, xs, hs, structure: AbstractStructure, quasi: bool):
    """`f(h_{t-1}, x_t)` and its Jacobians at the trajectory `hs` (diagonals if `quasi`)."""
    prev = shift(h0, hs)
    fs, jac = jax.vmap(lambda h, x: structure.value_and_jacobian(lambda v: fn(v, x), h))(prev, xs)
    if quasi:
        jac = structure.diagonal(jac)
    return fs, jac


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

    def iterate(self, fn, h0, xs, structure, guess, tolerance):
        """Newton iterations from `guess`; returns `(iterations, hs, residual, finite)`."""
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

        fs, jac = evaluate(guess)
        res, finite = _residual_and_finite(guess, fs, jac)

        # The loop stops at the first non-finite iterate, so only the last one can
        # be non-finite: the carry keeps the iterate before it (`last`) and the
        # finite one is picked once after the loop, not by a select per iteration.
        def cond(state):
            k, hs, _, _, _, res, finite = state
            return (k < self.max_steps) & finite & ~(res <= tolerance(hs))

        def body(state):
            k, hs, _, fs, jac, res, _ = state
            if lazy:  # f again with J (free in the JVPs), so the steps are those of `not lazy`
                fs, jac = _linearise(fn, h0, xs, hs, structure, quasi)
            delta = linear_recurrence(jac, fs - hs, structure=jac_structure, method=self.linear)
            new = hs + self.omega * delta
            fs, jac = evaluate(new)
            new_res, finite = _residual_and_finite(new, fs, jac)
            return k + 1, new, hs, fs, jac, jnp.where(finite, new_res, res), finite

        start = (jnp.array(0, jnp.int32), guess, guess, fs, jac, res, finite)
        k, hs, last, _, _, res, finite = lax.while_loop(cond, body, start)
        # keep the last finite iterate: it is returned, or the backup starts from it
        hs = jnp.where(finite, hs, last)
        return k, hs, res, finite


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


class Fallback(AbstractSolver):
    """Newton, then `backup` where Newton stopped without converging or met a
    non-finite iterate. The stats always say whether the backup ran.

    **Arguments:** `primary` (a [`Newton`][sciml.pararnn.Newton]), `backup`
    ([`Sequential`][sciml.pararnn.Sequential], exact, or
    [`DampedNewton`][sciml.pararnn.DampedNewton], parallel but iterative).
    """

    primary: Any  # Newton; checked in __check_init__
    backup: Any  # AbstractBackup; likewise

    def __check_init__(self):
        if not isinstance(self.primary, Newton):
            raise ValueError(f"`primary` must be a Newton(...); got {self.primary!r}.")
        if not isinstance(self.backup, AbstractBackup):
            raise ValueError(
                f"`backup` must be Sequential() or DampedNewton(...); got {self.backup!r}."
            )


# Where Newton is faster than sequential evaluation, per backend and structure
# kind: `(min_length, max_length, max_batch_state)`: Newton when
# `min_length <= length <= max_length` and `batch_size * state_size <=
# max_batch_state` (`None`: no bound); a kind missing from a backend's table
# always runs sequentially.
# CPU: measured with `benchmarks/pararnn.py` on a 2-core CPU, forward+backward
# (training) time, see docs/benchmarks.md. Newton's forward pass lost everywhere;
# its cheaper backward pass (one reverse linear recurrence instead of a reverse
# scan through every step) made training faster only for a single sequence
# (batch 1) of ParaGRU with hidden size 8, 1k-16k steps, in two runs (1.2-2.4x).
# ParaLSTM at hidden 8 was faster in one run and slower in the other, so block
# structures stay sequential.
# GPU/TPU: not measured in this repository; the published parallel-Newton
# speed-ups (ParaRNN, DEER) start at a few hundred steps.
CROSSOVERS: dict[str, dict[str, tuple[int, int | None, int | None]]] = {
    "cpu": {"diagonal": (1024, 16384, 8)},
    "gpu": {"diagonal": (512, None, None), "block": (512, None, None), "dense": (512, None, 32)},
    "tpu": {"diagonal": (512, None, None), "block": (512, None, None), "dense": (512, None, 32)},
}


def _freeze(table) -> tuple:
    return tuple((backend, tuple(sorted(kinds.items()))) for backend, kinds in table.items())


class Auto(AbstractSolver):
    """Sequential or Newton evaluation, whichever was measured faster here.

    Looks up `crossovers[backend][structure kind]` (default: the measured
    `CROSSOVERS` table; default backend: JAX's): `newton` when the length is in
    the measured range and `batch_size * state_size` within the measured bound,
    [`Sequential()`][sciml.pararnn.Sequential] otherwise.

    **Arguments:** `newton` (the Newton solver used, default
    `Fallback(Newton(), Sequential())`), `batch_size` (the batch the layer is
    vmapped over: a one-sample layer cannot know it), `crossovers` (a table in
    the layout of `CROSSOVERS`), `backend`.
    """

    newton: Any = Fallback(Newton(), Sequential())  # checked in __check_init__
    batch_size: int = eqx.field(static=True, default=1)
    crossovers: Any = eqx.field(static=True, default=None, converter=lambda t: t and _freeze(t))
    backend: str | None = eqx.field(static=True, default=None)

    def __check_init__(self):
        check_positive_int("batch_size", self.batch_size)
        if not isinstance(self.newton, (Newton, Fallback, DampedNewton)):
            raise ValueError(
                f"`newton` must be Newton(...), Fallback(...) or DampedNewton(...); got {self.newton!r}."
            )

    def uses_newton(self, length: int, state_size: int, structure: AbstractStructure) -> bool:
        """Whether a call on `length` steps of a state of `state_size` runs `newton`."""
        table = CROSSOVERS if self.crossovers is None else {b: dict(k) for b, k in self.crossovers}
        entry = table.get(self.backend or jax.default_backend(), {}).get(structure.kind)
        if entry is None:
            return False
        min_length, max_length, max_batch_state = entry
        if length < min_length or (max_length is not None and length > max_length):
            return False
        return max_batch_state is None or self.batch_size * state_size <= max_batch_state

    def select(self, length: int, state_size: int, structure: AbstractStructure) -> AbstractSolver:
        """The solver a call on `length` steps runs."""
        if self.uses_newton(length, state_size, structure):
            return self.newton
        return Sequential()
