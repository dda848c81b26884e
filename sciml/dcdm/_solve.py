"""`solve(apply_A, b, direction_fn, DCDM(...))`: the deep conjugate direction method on a grid.

Puts the pieces of the iteration together (`_iteration`): input checks, the
precision warning, the projection of `b` onto the range of a singular `A`,
the loop, and the error a failed solve raises with `throw=True`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import equinox as eqx
from jaxtyping import Array, ArrayLike, Float, Shaped

from .._deprecated import settings_module_only
from ..solution import RESULTS, Solution, make_solution
from ._iteration import INCONSISTENT, check_inputs, iterate, make_consistent
from ._precision import check_tolerance, failure_messages
from ._solver import DCDM


@settings_module_only(DCDM, "solver", "solve(apply_A, b, direction_fn, {module})")
def solve(
    apply_A: Callable[[Array], Array],
    b: Shaped[Array, "*grid"],
    direction_fn: Callable[[Array], Array],
    solver: Any = None,  # DCDM | None: checked below, with a message that names the fix
    *,
    x0: Float[Array, "..."] | None = None,
    null_space: ArrayLike | None = None,
    inconsistent: str = "project",
    throw: bool = True,
) -> Solution:
    r"""Solves `apply_A(x) = b` by the deep conjugate direction method.

    Stops when the true residual satisfies `‖b − A x‖₂ ≤ max(atol, rtol·‖r₀‖₂)`
    (relative to the **initial** residual `r₀ = b − A x₀`, as in the paper), or
    after `max_steps` steps: the settings of a [`DCDM`][sciml.dcdm.DCDM] module,
    `solve(apply_A, b, f, DCDM(rtol=1e-6, max_steps=1000))` (checked once when
    built, reusable). Settings given as keywords (`rtol=1e-6`) are a
    `TypeError` that shows this call.

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
    - `solver`: the settings, a [`DCDM`][sciml.dcdm.DCDM] (`rtol`, `atol`,
      `max_steps`, `n_orthogonal`, `refresh_every`); default `DCDM()`.
    - `x0`: the initial guess (default zeros).
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
    solver = DCDM() if solver is None else solver
    if not isinstance(solver, DCDM):
        raise TypeError(
            f"`solver` must be a sciml.dcdm.DCDM (e.g. DCDM(rtol=1e-6, max_steps=500)) or None, "
            f"got {type(solver).__name__}."
        )
    if inconsistent not in INCONSISTENT:
        raise ValueError(f"`inconsistent` must be 'project' or 'raise', got {inconsistent!r}.")
    b, x0 = check_inputs(b, x0)
    # stacklevel 4: the caller of solve, past the wrapper that refuses keyword settings
    check_tolerance("sciml.dcdm.solve", solver.rtol, solver.atol, b.dtype, stacklevel=4)
    extra_stats = {}
    if null_space is not None:
        b, extra_stats["inconsistency"] = make_consistent(b, null_space, inconsistent)
    x, result, stats = iterate(apply_A, b, direction_fn, x0, solver)
    stats = {**stats, **extra_stats}
    solution = make_solution(x, result, stats, throw=False)
    if throw:  # RESULTS' messages, with the likely causes of a failed conjugate-direction solve
        messages = failure_messages("sciml.dcdm.solve", solver.rtol, solver.max_steps, b.dtype)
        value = eqx.branched_error_if(x, result != RESULTS.successful, result._value, messages)
        solution = Solution(value=value, result=result, stats=stats)
    return solution
