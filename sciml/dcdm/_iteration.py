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
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable

import equinox as eqx
import jax
import jax.numpy as jnp
from jax import lax
from jaxtyping import Array, ArrayLike, Float, Shaped

from .._checks import check_positive_int
from .._custom_types import Real
from ..solution import RESULTS, Solution, make_solution
from ._precision import check_tolerance, failure_messages


def _dot(u: Array, v: Array) -> Array:
    return jnp.vdot(u, v).real


def _orthogonalise(q: Array, P: Array, AP: Array, pAp: Array) -> Array:
    """`q − Σ_j (qᵀA p_j / p_jᵀA p_j) p_j` over the stored directions (classical
    Gram–Schmidt in the A-inner product, as the reference code; empty slots have
    `pAp = 0` and are skipped)."""
    axes = tuple(range(1, P.ndim))
    qAp = jnp.sum(AP * q[None], axis=axes)
    coeff = jnp.where(pAp > 0, qAp / jnp.where(pAp > 0, pAp, 1), 0)
    return q - jnp.tensordot(coeff, P, axes=1)


def solve(
    apply_A: Callable[[Array], Array],
    b: Shaped[Array, "*grid"],
    direction_fn: Callable[[Array], Array],
    *,
    x0: Float[Array, "..."] | None = None,
    rtol: Real = 1e-6,
    atol: Real = 0.0,
    max_steps: int = 100,
    n_orthogonal: int = 2,
    refresh_every: int | None = None,
    null_space: ArrayLike | None = None,
    inconsistent: str = "project",
    throw: bool = True,
) -> Solution:
    r"""Solves `apply_A(x) = b` by the deep conjugate direction method.

    Stops when the true residual satisfies `‖b − A x‖₂ ≤ max(atol, rtol·‖r₀‖₂)`
    (relative to the **initial** residual `r₀ = b − A x₀`, as in the paper), or
    after `max_steps` steps.

    **Arguments:**

    - `apply_A`: `x ↦ A x` for a symmetric positive (semi-)definite `A`, on
      arrays of the shape of `b` (a grid: no flattening needed).
    - `b`: the right-hand side, any shape (e.g. `(n, n)` or `(n, n, n)`). For a
      singular `A`, `b` must lie in its range: pass `null_space` to have that
      checked, or project `b` first (e.g. `solvers.poisson.project_rhs`);
      otherwise the solve stalls and reports `max_steps_reached` or
      `breakdown`.
    - `direction_fn`: `r ↦ q`, a search direction for the unit-norm residual
      `r` (shape of `b`); a trained [`DCDMNet`][sciml.dcdm.DCDMNet] bound to
      its parameters, `lambda r: r` (conjugate directions = CG), or any
      preconditioner. Its output is cast to the dtype of `b`, so a float32
      network serves a float64 outer loop.
    - `x0`: the initial guess (default zeros).
    - `rtol`, `atol`: the stopping rule above. An `rtol` below what the dtype
      of `b` can reach (`100 ε`: 1.2e-5 in float32) with `atol=0` warns at
      the start (a `PrecisionWarning` naming the two remedies: float64, or a
      looser `rtol`), since the true residual stalls on round-off near
      `ε·cond(A)`.
    - `max_steps`: the step cap.
    - `n_orthogonal`: how many previous directions each new one is made
      A-orthogonal to (`2` in the paper; `0` is steepest descent along the
      network's direction).
    - `refresh_every`: replace the recurrence residual by `b − A x` every this
      many steps (`None`: only when checking convergence).
    - `null_space`: for a singular `A`, a basis of its null space, shape
      `(k, *b.shape)` (e.g. `solvers.poisson.null_space(labels)`: one
      indicator per closed fluid component); it is orthonormalised here. The
      part of `b` in it, `‖Nᵀb‖ / ‖b‖` with `N` the orthonormal basis, is
      measured (`stats["inconsistency"]`); above `sqrt(eps)` of the dtype,
      `b` is outside the range of `A` and
    - `inconsistent` says what happens: `"project"` (default) solves with
      `b − N Nᵀ b`, the nearest consistent right-hand side, and warns when
      called outside `jit` (under `jit`, read `stats["inconsistency"]`);
      `"raise"` raises (inside `jit` too). A consistent `b` is projected as
      well, which only removes round-off.
    - `throw`: raise (inside `jit` too) unless the solve succeeded, with a
      message naming the likely cause (precision, an operator that is not
      SPD, a bad direction); with `throw=False` read `solution.result`.

    **Returns:** a [`Solution`][sciml.solution.Solution] with `value` the
    solution (shape of `b`), `result` one of `successful`,
    `max_steps_reached`, `not_positive_definite` (a non-zero direction with
    `pᵀAp ≤ 0`), `breakdown` (the generator returned a direction that is zero
    or orthogonal to the residual), `nonfinite_direction` (NaN or Inf from
    `direction_fn`), `nonfinite_input` (NaN or Inf in `b` or `x0` under
    `jit`; outside it a `ValueError` names the argument) or `nonfinite`, and
    `stats`:
    `num_steps` (steps taken), `residual_norm` (final true `‖b − A x‖₂`),
    `residual_history` (`(max_steps + 1,)`: `‖r_k‖₂` for `k = 0..num_steps`,
    NaN after), and with `null_space` also `inconsistency`. With a projected
    `b`, residuals and the stopping rule refer to the projected system.
    """
    b = jnp.asarray(b)
    if not jnp.issubdtype(b.dtype, jnp.floating):
        raise ValueError(f"`b` must be a floating-point array, got dtype {b.dtype}.")
    x0 = jnp.zeros_like(b) if x0 is None else jnp.asarray(x0, b.dtype)
    if x0.shape != b.shape:
        raise ValueError(f"`x0` must have the shape of `b` {b.shape}, got {x0.shape}.")
    max_steps = check_positive_int("max_steps", max_steps)
    refresh_every = check_positive_int("refresh_every", refresh_every, allow_none=True)
    if isinstance(n_orthogonal, bool) or not isinstance(n_orthogonal, int) or n_orthogonal < 0:
        raise ValueError(f"`n_orthogonal` must be an integer >= 0, got {n_orthogonal!r}.")
    if not (rtol >= 0 and atol >= 0) or rtol == atol == 0:
        raise ValueError(f"`rtol` and `atol` must be >= 0 and not both 0, got {rtol}, {atol}.")
    if not (math.isfinite(rtol) and math.isfinite(atol)):
        raise ValueError(
            f"`rtol` and `atol` must be finite, got rtol={rtol}, atol={atol} (an infinite "
            "tolerance would report success whatever the residual)."
        )
    for name, value in (("b", b), ("x0", x0)):
        if not isinstance(value, jax.core.Tracer) and not bool(jnp.all(jnp.isfinite(value))):
            raise ValueError(f"`{name}` contains NaN or Inf; the solve needs finite input.")
    check_tolerance("sciml.dcdm.solve", rtol, atol, b.dtype)
    extra_stats = {}
    if null_space is not None:
        b, extra_stats["inconsistency"] = _make_consistent(b, null_space, inconsistent)
    Ax0 = apply_A(x0)
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
    q_shape = jax.eval_shape(direction_fn, b)
    if q_shape.shape != b.shape:
        raise ValueError(
            f"`direction_fn` must return the shape of its input {b.shape}, got {q_shape.shape} "
            "(a network trained in 2-D applied to a 3-D grid, or the other way round?)."
        )

    dtype = b.dtype
    finite_input = jnp.all(jnp.isfinite(b)) & jnp.all(jnp.isfinite(x0))
    r0 = b - Ax0
    r0_norm = jnp.linalg.norm(r0)
    tol = jnp.maximum(jnp.asarray(atol, dtype), jnp.asarray(rtol, dtype) * r0_norm)
    m = max(n_orthogonal, 1)  # one (unused) slot keeps the buffers non-empty
    history = jnp.full((max_steps + 1,), jnp.nan, dtype).at[0].set(r0_norm)
    # status: 0 running, 1 converged, 2 breakdown (zero direction or pᵀr = 0),
    # 3 non-finite, 4 not positive definite (p ≠ 0, pᵀAp ≤ 0), 5 non-finite direction
    init = dict(
        k=jnp.array(0),
        x=x0,
        r=r0,
        r_norm=r0_norm,
        P=jnp.zeros((m, *b.shape), dtype),
        AP=jnp.zeros((m, *b.shape), dtype),
        pAp=jnp.zeros((m,), dtype),
        history=history,
        status=jnp.where(r0_norm <= tol, 1, 0),
    )

    def true_residual(x, r, r_norm):
        r = b - apply_A(x)
        return r, jnp.linalg.norm(r)

    def cond(s):
        return (s["status"] == 0) & (s["k"] < max_steps) & finite_input

    def body(s):
        k, x, r, r_norm = s["k"], s["x"], s["r"], s["r_norm"]
        q = jnp.asarray(direction_fn(r / r_norm)).astype(dtype)
        bad_direction = ~jnp.all(jnp.isfinite(q))
        q = jnp.where(bad_direction, 0, q)
        p = _orthogonalise(q, s["P"], s["AP"], s["pAp"]) if n_orthogonal else q
        Ap = apply_A(p)
        pAp = _dot(p, Ap)
        pr = _dot(p, r)
        indefinite = ~(pAp > 0) & jnp.any(p != 0) & ~bad_direction
        breakdown = ~(pAp > 0) | (pr == 0)
        alpha = jnp.where(breakdown, 0, pr / jnp.where(breakdown, 1, pAp))
        x = x + alpha * p
        r = r - alpha * Ap
        if refresh_every is not None:
            refresh = (k + 1) % refresh_every == 0
            r = lax.cond(refresh, lambda x, r: b - apply_A(x), lambda x, r: r, x, r)
        r_norm = jnp.linalg.norm(r)
        # Convergence is declared on the true residual only.
        r, r_norm = lax.cond(r_norm <= tol, true_residual, lambda x, r, n: (r, n), x, r, r_norm)
        slot = k % m
        finite = jnp.isfinite(r_norm) & jnp.isfinite(pAp)
        failed = jnp.where(bad_direction, 5, jnp.where(indefinite, 4, jnp.where(breakdown, 2, 0)))
        status = jnp.where(~finite, 3, jnp.where(r_norm <= tol, 1, failed))
        return dict(
            k=k + 1,
            x=x,
            r=r,
            r_norm=r_norm,
            P=s["P"].at[slot].set(p),
            AP=s["AP"].at[slot].set(Ap),
            pAp=s["pAp"].at[slot].set(jnp.where(breakdown, 0, pAp)),
            history=s["history"].at[k + 1].set(r_norm),
            status=status,
        )

    final = lax.while_loop(cond, body, init)
    status = final["status"]
    result = RESULTS.where(
        ~finite_input,
        RESULTS.nonfinite_input,
        RESULTS.where(
            status == 1,
            RESULTS.successful,
            RESULTS.where(
                status == 2,
                RESULTS.breakdown,
                RESULTS.where(
                    status == 3,
                    RESULTS.nonfinite,
                    RESULTS.where(
                        status == 4,
                        RESULTS.not_positive_definite,
                        RESULTS.where(
                            status == 5, RESULTS.nonfinite_direction, RESULTS.max_steps_reached
                        ),
                    ),
                ),
            ),
        ),
    )
    # Converged: `r_norm` is already the true residual; otherwise it may be the
    # recurrence's, which drifts from `b − A x` in floating point.
    residual_norm = jnp.where(
        status == 1, final["r_norm"], jnp.linalg.norm(b - apply_A(final["x"]))
    )
    stats = {
        "num_steps": final["k"],
        "residual_norm": residual_norm,
        "residual_history": final["history"],
        **extra_stats,
    }
    solution = make_solution(final["x"], result, stats, throw=False)
    if throw:  # RESULTS' messages, with the likely causes of a failed conjugate-direction solve
        messages = failure_messages("sciml.dcdm.solve", rtol, max_steps, dtype)
        value = eqx.branched_error_if(
            solution.value, result != RESULTS.successful, result._value, messages
        )
        solution = Solution(value=value, result=result, stats=stats)
    return solution


def _make_consistent(b: Array, null_space, inconsistent: str) -> tuple[Array, Array]:
    """`b` without its part in the null space, and that part's relative size;
    warns or raises (per `inconsistent`) when it is above `sqrt(eps)`."""
    if inconsistent not in ("project", "raise"):
        raise ValueError(f"`inconsistent` must be 'project' or 'raise', got {inconsistent!r}.")
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
            stacklevel=3,
        )
    b = b - (basis @ coefficients).reshape(b.shape)
    return b, inconsistency


def a_norm_error(apply_A: Callable[[Array], Array], x: Array, x_exact: Array) -> Array:
    """`‖x − x*‖_A = sqrt((x − x*)ᵀ A (x − x*))`, the quantity every DCDM step
    does not increase."""
    e = x - x_exact
    return jnp.sqrt(jnp.maximum(_dot(e, apply_A(e)), 0))
