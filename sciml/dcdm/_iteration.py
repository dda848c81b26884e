r"""The deep conjugate direction iteration (Kaneda et al., ICML 2023).

Solves `A x = b` for a symmetric positive (semi-)definite `A` given only as a
matrix-free product `apply_A`. Each step asks a direction generator `f` (the
trained network; any function) for a search direction from the residual
normalised to unit length, makes it A-orthogonal to the last `n_orthogonal`
directions, and moves along it by an exact line search in the A-norm:

$$q_k = f\!\left(\frac{r_{k-1}}{\lVert r_{k-1}\rVert}\right),\qquad
p_k = q_k - \sum_{j=k-m}^{k-1} \frac{q_k^\top A p_j}{p_j^\top A p_j}\, p_j,$$

$$\alpha_k = \frac{p_k^\top r_{k-1}}{p_k^\top A p_k},\qquad
x_k = x_{k-1} + \alpha_k p_k,\qquad r_k = r_{k-1} - \alpha_k A p_k .$$

Each step minimises the A-norm error along `p_k`, so that error never grows
whatever `f` returns, and the result does not depend on the scale of `f`
(`c f` gives the same iterates). With `f` the identity (or a fixed SPD
preconditioner `M⁻¹`) and `m ≥ 1` the iterates are those of CG (PCG); with
`f = c A⁻¹` one step solves the system.

The residual is updated by the recurrence (one product with `A` per step); a
true residual `b − A x` replaces it every `refresh_every` steps and always
before convergence is declared, so a `Solution` that says `successful` meets
the tolerance on the true residual.

This module holds the iteration as pure pieces (input checks, the initial
state, one step, the result); [`solve`][sciml.dcdm.solve] and the lineax
solver [`DCDM`][sciml.dcdm.DCDM] put them together. `settings` below is a
`DCDM` (any object with its fields `rtol`, `atol`, `max_steps`,
`n_orthogonal`, `refresh_every`), already validated.

How the loop ends travels in its state as a `RESULTS` item, as in
optimistix's `iterative_solve`: `successful` while it runs, the first failure
of a step combined in with `RESULTS.where`, and `converged` saying the
tolerance was met; a loop that stops still `successful` but not converged
ran out of steps (`max_steps_reached`).
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import Any, NamedTuple

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jax import lax
from jaxtyping import Array, ArrayLike, Shaped

from ..solution import RESULTS


INCONSISTENT = ("project", "raise")


class State(NamedTuple):
    """The carry of the iteration (`m = max(n_orthogonal, 1)` direction slots)."""

    k: Array  # (): steps taken
    x: Array  # (*grid): the iterate
    r: Array  # (*grid): the residual (recurrence, or true after a check)
    r_norm: Array  # (): ‖r‖₂
    P: Array  # (m, *grid): the last directions (zeros in empty slots)
    AP: Array  # (m, *grid): their products with A
    pAp: Array  # (m,): their pᵀAp (0 in empty slots and after a breakdown)
    history: Array  # (max_steps + 1,): ‖r_k‖₂ for k = 0..k, NaN after
    converged: Array  # (): bool, the true residual met the tolerance
    result: RESULTS  # `successful` unless a step failed (or the input is not finite)


def _dot(u: Array, v: Array) -> Array:
    return jnp.vdot(u, v).real


def check_inputs(b: ArrayLike, x0: ArrayLike | None) -> tuple[Array, Array]:
    """`b` and `x0` (default zeros) as arrays of `b`'s dtype; raises a
    `ValueError` naming the argument for a `b` that is not floating point, an
    `x0` of another shape, or NaN/Inf in either (outside `jit`; under `jit`
    the solve reports `nonfinite_input`)."""
    b = jnp.asarray(b)
    if not jnp.issubdtype(b.dtype, jnp.floating):
        raise ValueError(f"`b` must be a floating-point array, got dtype {b.dtype}.")
    x0 = jnp.zeros_like(b) if x0 is None else jnp.asarray(x0, b.dtype)
    if x0.shape != b.shape:
        raise ValueError(f"`x0` must have the shape of `b` {b.shape}, got {x0.shape}.")
    for name, value in (("b", b), ("x0", x0)):
        # numpy, not jnp: under `jit` a jnp test of a captured constant is traced
        if not isinstance(value, jax.core.Tracer) and not np.all(np.isfinite(np.asarray(value))):
            raise ValueError(f"`{name}` contains NaN or Inf; the solve needs finite input.")
    return b, x0


def _on_b(name: str, b: Array, call: Callable[[], Any]) -> Any:
    """`call()`, which applies the argument `name` to an array of the shape of
    `b`; an error it raises (a broadcast or indexing error of a function built
    for another grid) is re-raised naming `name` and the shape of `b`."""
    try:
        return call()
    except Exception as error:  # noqa: BLE001 - re-raised with the argument's name
        raise ValueError(
            f"`{name}` must take an array of the shape of `b` {b.shape} (dtype {b.dtype}), "
            f"but calling it on one raised {type(error).__name__}: {error} Was it built for "
            "another grid than `b`?"
        ) from error


def check_callables(
    apply_A: Callable[[Array], Array],
    direction_fn: Callable[[Array], Array],
    b: Shaped[Array, "*grid"],
    x0: Shaped[Array, "*grid"],
) -> Shaped[Array, "*grid"]:
    """`A x0`, once `apply_A` is known to return the shape and dtype of `b` and
    `direction_fn` its shape (the latter traced, not run). Either raising on an
    array of the shape of `b` (built for another grid) is a `ValueError`
    naming it and the shape."""
    Ax0 = _on_b("apply_A", b, lambda: apply_A(x0))  # x0 has the shape of b
    if jnp.shape(Ax0) != b.shape:
        raise ValueError(
            f"`apply_A` must map arrays of the shape of `b` {b.shape} to the same shape, "
            f"got {jnp.shape(Ax0)}."
        )
    if jnp.result_type(Ax0) != b.dtype:
        raise ValueError(
            f"`apply_A` must return the dtype of `b` ({b.dtype}), got {jnp.result_type(Ax0)}: "
            "build the operator for that dtype, or cast `b` (e.g. b.astype(jnp.float32))."
        )
    q_shape = _on_b("direction_fn", b, lambda: jax.eval_shape(direction_fn, b))
    if q_shape.shape != b.shape:
        raise ValueError(
            f"`direction_fn` must return the shape of its input {b.shape}, got {q_shape.shape} "
            "(a network trained in 2-D applied to a 3-D grid, or the other way round?)."
        )
    return Ax0


def initial_state(
    b: Shaped[Array, "*grid"], x0: Shaped[Array, "*grid"], Ax0: Shaped[Array, "*grid"], settings
) -> tuple[State, Array]:
    """The state before the first step, and the tolerance on `‖r‖₂`:
    `max(atol, rtol·‖r₀‖₂)`. Already converged if `‖r₀‖₂` meets it; already
    failed (`nonfinite_input`) if `b` or `x0` holds NaN or Inf."""
    dtype = b.dtype
    r0 = b - Ax0
    r0_norm = jnp.linalg.norm(r0)
    tol = jnp.maximum(
        jnp.asarray(settings.atol, dtype), jnp.asarray(settings.rtol, dtype) * r0_norm
    )
    m = max(settings.n_orthogonal, 1)  # one (unused) slot keeps the buffers non-empty
    state = State(
        k=jnp.array(0),
        x=x0,
        r=r0,
        r_norm=r0_norm,
        P=jnp.zeros((m, *b.shape), dtype),
        AP=jnp.zeros((m, *b.shape), dtype),
        pAp=jnp.zeros((m,), dtype),
        history=jnp.full((settings.max_steps + 1,), jnp.nan, dtype).at[0].set(r0_norm),
        converged=r0_norm <= tol,
        result=RESULTS.where(
            jnp.all(jnp.isfinite(b)) & jnp.all(jnp.isfinite(x0)),
            RESULTS.successful,
            RESULTS.nonfinite_input,
        ),
    )
    return state, tol


def search_direction(
    direction_fn: Callable[[Array], Array], r: Shaped[Array, "*grid"], r_norm: Array, dtype
) -> tuple[Shaped[Array, "*grid"], Array]:
    """`q = f(r / ‖r‖)` in `dtype`, zeroed if it holds NaN or Inf, and whether it did."""
    q = jnp.asarray(direction_fn(r / r_norm)).astype(dtype)
    bad_direction = ~jnp.all(jnp.isfinite(q))
    return jnp.where(bad_direction, 0, q), bad_direction


def orthogonalise(
    q: Shaped[Array, "*grid"],
    P: Shaped[Array, " m *grid"],
    AP: Shaped[Array, " m *grid"],
    pAp: Shaped[Array, " m"],
) -> Shaped[Array, "*grid"]:
    """`q − Σ_j (qᵀA p_j / p_jᵀA p_j) p_j` over the stored directions (classical
    Gram–Schmidt in the A-inner product, as the reference code; empty slots have
    `pAp = 0` and are skipped)."""
    axes = tuple(range(1, P.ndim))
    qAp = jnp.sum(AP * q[None], axis=axes)
    coeff = jnp.where(pAp > 0, qAp / jnp.where(pAp > 0, pAp, 1), 0)
    return q - jnp.tensordot(coeff, P, axes=1)


def step_length(
    p: Shaped[Array, "*grid"], Ap: Shaped[Array, "*grid"], r: Shaped[Array, "*grid"]
) -> tuple[Array, Array, Array]:
    """The exact line search `α = pᵀr / pᵀAp`; returns `(α, pᵀAp, breakdown)`,
    with `α = 0` at a breakdown (`pᵀAp ≤ 0` or `pᵀr = 0`)."""
    pAp = _dot(p, Ap)
    pr = _dot(p, r)
    breakdown = ~(pAp > 0) | (pr == 0)
    alpha = jnp.where(breakdown, 0, pr / jnp.where(breakdown, 1, pAp))
    return alpha, pAp, breakdown


def true_residual(
    apply_A: Callable[[Array], Array], b: Shaped[Array, "*grid"], x: Shaped[Array, "*grid"]
) -> tuple[Shaped[Array, "*grid"], Array]:
    """`r = b − A x` and `‖r‖₂`."""
    r = b - apply_A(x)
    return r, jnp.linalg.norm(r)


def checked_residual(apply_A, b, x, r, k, tol, refresh_every):
    """The residual after step `k + 1` and its norm: `b − A x` in place of the
    recurrence's `r` every `refresh_every` steps, and whenever `r` meets `tol`
    (convergence is declared on the true residual only)."""
    if refresh_every is not None:
        refresh = (k + 1) % refresh_every == 0
        r = lax.cond(refresh, lambda x, r: b - apply_A(x), lambda x, r: r, x, r)
    r_norm = jnp.linalg.norm(r)
    return lax.cond(
        r_norm <= tol,
        lambda x, r, n: true_residual(apply_A, b, x),
        lambda x, r, n: (r, n),
        x,
        r,
        r_norm,
    )


def step(
    state: State,
    apply_A: Callable[[Array], Array],
    b: Shaped[Array, "*grid"],
    direction_fn: Callable[[Array], Array],
    tol: Array,
    settings,
) -> State:
    """One step: direction, A-orthogonalisation, line search, update, the
    residual check, and the result it leaves: a non-finite residual or `pᵀAp`
    first, then convergence, then a bad direction, an operator that is not
    positive definite, a breakdown."""
    k, x, r = state.k, state.x, state.r
    q, bad_direction = search_direction(direction_fn, r, state.r_norm, b.dtype)
    p = orthogonalise(q, state.P, state.AP, state.pAp) if settings.n_orthogonal else q
    Ap = apply_A(p)
    alpha, pAp, breakdown = step_length(p, Ap, r)
    indefinite = ~(pAp > 0) & jnp.any(p != 0) & ~bad_direction
    x = x + alpha * p
    r = r - alpha * Ap
    r, r_norm = checked_residual(apply_A, b, x, r, k, tol, settings.refresh_every)
    finite = jnp.isfinite(r_norm) & jnp.isfinite(pAp)
    converged = finite & (r_norm <= tol)
    failed = RESULTS.where(
        bad_direction,
        RESULTS.nonfinite_direction,
        RESULTS.where(
            indefinite,
            RESULTS.not_positive_definite,
            RESULTS.where(breakdown, RESULTS.breakdown, RESULTS.successful),
        ),
    )
    result = RESULTS.where(
        finite, RESULTS.where(converged, RESULTS.successful, failed), RESULTS.nonfinite
    )
    slot = k % state.P.shape[0]
    return State(
        k=k + 1,
        x=x,
        r=r,
        r_norm=r_norm,
        P=state.P.at[slot].set(p),
        AP=state.AP.at[slot].set(Ap),
        pAp=state.pAp.at[slot].set(jnp.where(breakdown, 0, pAp)),
        history=state.history.at[k + 1].set(r_norm),
        converged=converged,
        result=result,
    )


def iterate(
    apply_A: Callable[[Array], Array],
    b: Shaped[Array, "*grid"],
    direction_fn: Callable[[Array], Array],
    x0: Shaped[Array, "*grid"],
    settings,
) -> tuple[Shaped[Array, "*grid"], RESULTS, dict[str, Any]]:
    """Runs the iteration from `x0` (both as `check_inputs` returns them);
    returns the solution, its result and the stats `num_steps`,
    `residual_norm` (the true `‖b − A x‖₂`) and `residual_history`
    (`(max_steps + 1,)`)."""
    Ax0 = check_callables(apply_A, direction_fn, b, x0)
    init, tol = initial_state(b, x0, Ax0, settings)

    def cond(state):
        running = ~state.converged & (state.result == RESULTS.successful)
        return running & (state.k < settings.max_steps)

    final = lax.while_loop(
        cond, lambda state: step(state, apply_A, b, direction_fn, tol, settings), init
    )
    # Converged: `r_norm` is already the true residual; otherwise it may be the
    # recurrence's, which drifts from `b − A x` in floating point.
    residual_norm = jnp.where(final.converged, final.r_norm, true_residual(apply_A, b, final.x)[1])
    # still `successful` but not converged: the loop ran out of steps (with
    # rtol = atol = 0, "run max_steps steps", as lineax's CG: that is success)
    ran_out = (
        RESULTS.successful if settings.rtol == settings.atol == 0 else RESULTS.max_steps_reached
    )
    result = RESULTS.where(
        (final.result == RESULTS.successful) & ~final.converged, ran_out, final.result
    )
    stats = {
        "num_steps": final.k,
        "residual_norm": residual_norm,
        "residual_history": final.history,
    }
    return final.x, result, stats


def make_consistent(b: Array, null_space: ArrayLike, inconsistent: str) -> tuple[Array, Array]:
    """`b` without its part in the null space, and that part's relative size;
    warns or raises (per `inconsistent`) when it is above `sqrt(eps)`."""
    null_space = jnp.asarray(null_space)
    if null_space.ndim != b.ndim + 1 or null_space.shape[1:] != b.shape:
        raise ValueError(
            f"`null_space` must have shape (k, *b.shape) = (k, {', '.join(map(str, b.shape))}), "
            f"got {null_space.shape}."
        )
    if null_space.shape[0] == 0:  # A is non-singular: nothing to check
        return b, jnp.zeros((), b.dtype)
    basis, _ = jnp.linalg.qr(null_space.reshape(null_space.shape[0], -1).T.astype(b.dtype))
    coefficients = basis.T @ b.ravel()
    b_norm = jnp.linalg.norm(b)
    inconsistency = jnp.linalg.norm(coefficients) / jnp.where(b_norm > 0, b_norm, 1)
    outside = inconsistency > jnp.sqrt(jnp.finfo(b.dtype).eps)
    message = (
        "`b` is not in the range of `A`: its part in `null_space` is above sqrt(eps) of its "
        "norm. Project it (solvers.poisson.project_rhs, or inconsistent='project')."
    )
    if inconsistent == "raise":
        b = eqx.error_if(b, outside, message)
    elif not isinstance(outside, jax.core.Tracer) and bool(outside):
        warnings.warn(
            f"`b` is not in the range of `A` (relative part in `null_space`: "
            f"{float(inconsistency):.2e}); solving with its projection onto the range.",
            stacklevel=4,  # the caller of sciml.dcdm.solve (past its keyword-refusing wrapper)
        )
    b = b - (basis @ coefficients).reshape(b.shape)
    return b, inconsistency


def a_norm_error(apply_A: Callable[[Array], Array], x: Array, x_exact: Array) -> Array:
    """`‖x − x*‖_A = sqrt((x − x*)ᵀ A (x − x*))`, the quantity every DCDM step
    does not increase."""
    e = x - x_exact
    return jnp.sqrt(jnp.maximum(_dot(e, apply_A(e)), 0))
