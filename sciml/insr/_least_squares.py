r"""The Gauss–Newton / Levenberg–Marquardt per-step solver (optimistix).

One step draws fresh points (`n_points` inside, plus an optional fixed
quadrature grid of `n_grid` points, and `n_boundary` on the boundary), stacks
the per-point residuals into `R(θ)` (see `sciml.insr` objectives) and calls
`optimistix.least_squares` from the previous weights. With `rounds > 1` the
`max_steps` iterations are split into that many solves, each on freshly drawn
points, so that no single point set is fitted to convergence.

**Sampling.** The solver minimises the objective *on its points*. With
`N·k` residual rows for `P` weights and `N·k` not much larger than `P` the
network can lower the sampled loss below the true minimum by letting the
residual grow *between* the points: overfitting, which more iterations on the
same points make worse. Use at least ten interior points per weight, redraw
them (`rounds`), or both. To detect it the solver evaluates the interior part
of the objective (the per-step energy) on `n_heldout` points drawn apart from
the training points and compares it with the training-point value:
`overfit_rtol` turns a held-out energy above `(1 + overfit_rtol)` times the
training energy, beyond three standard errors of the difference of the two
sample means when both come from the same field (the training points' spread),
into
`RESULTS.insr_overfitted`.

**Stopping.** The tolerances end the iteration, inside the optimistix loop
(`ToleranceStop` around the optimiser): a solve stops, converged, at the first
accepted iterate where `L ≤ loss_tol`, `L ≤ loss_rtol · L₀` or
`‖JᵀR‖ ≤ grad_rtol · ‖JᵀR₀‖` (`L = ‖R‖²`, `R₀` at the solve's warm start on
the same points), or where the optimiser's own test (a Cauchy test on the
weights, which rarely triggers for networks with flat directions) holds; a
solve that meets none runs to its cap and reports
`RESULTS.nonlinear_max_steps_reached`. With `rounds > 1` the rules apply to
each round on its own points, relative to that round's warm start: a round
that meets one hands over to the next point set early, and the last round's
outcome is the step's.

**Linear algebra.** Levenberg–Marquardt solves `(JᵀJ + μI)δ = −JᵀR`. By
default `J` is assembled from per-point reverse-mode gradients (a
`jax.custom_jvp`) and the `P × P` normal equations are factored;
`matrix_free=True` never forms `J`: pass an iterative linear solver (e.g.
`lx.Normal(insr.Truncated(lx.CG(rtol, atol, max_steps)))`, so that a capped CG
gives an inexact step rather than ending the solve) and each iteration applies `J` and `Jᵀ`
through JVPs and VJPs, for `N·k × P` beyond memory (20,000 points × 7
residuals × 14,418 weights is 16 GB in float64).
"""

from __future__ import annotations

import math
from typing import Any

import equinox as eqx
import jax
import jax.numpy as jnp
import lineax as lx
import optimistix as optx
from jax import lax
from jax.flatten_util import ravel_pytree
from jaxtyping import PRNGKeyArray

from .._checks import check_int, check_positive_int
from ..solution import RESULTS, Solution
from ._step_solver import AbstractStepSolver, cast_floats, finish, float_dtype_of
from ._stopping import ToleranceStop


SAMPLING_SIGMAS = 3.0
# `fold_in` data for the held-out points' key: a stream apart from every split
_HELDOUT_STREAM = 0x5EED


def _default_optimiser():
    return optx.LevenbergMarquardt(rtol=1e-6, atol=1e-9, linear_solver=lx.Normal(lx.Cholesky()))


def _check_fraction(name: str, value: Any, upper: float | None) -> None:
    if value is None:
        return
    ok = isinstance(value, int | float) and value > 0 and (upper is None or value < upper)
    if not ok:
        bound = f"in (0, {upper})" if upper is not None else "> 0"
        raise ValueError(f"`{name}` must be {bound} or None, got {value!r}.")


class LeastSquaresSolver(AbstractStepSolver):
    """Minimises the per-step objective by `optimistix.least_squares`.

    **Arguments:**

    - `optimiser`: an `optimistix.AbstractGaussNewton`
      (default `optx.LevenbergMarquardt(rtol=1e-6, atol=1e-9,
      linear_solver=lx.Normal(lx.Cholesky()))`: the damped normal equations,
      `P × P`; optimistix's default QR of the `(N + P) × P` augmented Jacobian
      was measured ~80× slower for 2000 points and 901 weights on a CPU;
      `optx.GaussNewton` works for well-conditioned problems).
    - `n_points`: random interior points per point set (default 2000); use at
      least ten per weight where the objective has derivatives of the field
      (0 with `n_grid > 0` or `quadrature`: the fixed points alone, as for a mesh).
    - `n_boundary`: boundary points per point set (default 50, the paper's).
    - `n_grid`: points of the problem's fixed quadrature grid
      (`problem.grid_interior`) added to the random ones (default 0: none).
    - `quadrature`: optional fixed interior points `(m, d)` added to the random
      ones instead of the problem's grid, e.g. a mesh field's Gauss points
      (`solvers.mesh_fields.quadrature_points`), on which the mean is the
      integral (default `None`; not with `n_grid`).
    - `rounds`: point sets per solve (default 1); the `max_steps` iterations
      are split evenly between them, each set drawn fresh.
    - `max_steps`: optimiser iterations in all (default 100), at most
      `max_steps // rounds` per round; hitting the cap of the last round is
      reported as `RESULTS.nonlinear_max_steps_reached`.
    - `loss_tol`, `loss_rtol`: optional absolute / relative (to `L₀`, the
      objective at the round's warm start on the same points) tolerances on
      the objective `L`; meeting one stops the round, converged.
    - `grad_rtol`: optional: `‖JᵀR‖ ≤ grad_rtol · ‖JᵀR₀‖` stops the round,
      converged.
    - `n_heldout`: interior points, apart from the training ones, on which the
      interior part of `L` is also evaluated (default `None`: `n_points`, or
      the grid's or `quadrature`'s size when `n_points` is 0).
    - `overfit_rtol`: optional: a held-out interior loss above
      `(1 + overfit_rtol)` times the training-point one (beyond three standard
      errors of sampling) is reported as `RESULTS.insr_overfitted` (e.g. 0.05).
    - `matrix_free`: apply `J` by JVP / VJP instead of assembling it (default
      False); pair it with an iterative `linear_solver` such as
      `lx.Normal(insr.Truncated(lx.CG(rtol, atol, max_steps)))`.
    - `dtype`: solve in this dtype (e.g. `jnp.float64`, needs
      `jax_enable_x64`); the new weights are cast back to the field's dtype.
      `None` keeps the field's dtype.

    `stats` of the returned `Solution`: `loss_initial` (`L₀`), `loss`,
    `iterations` (all rounds), `loss_ratio` (`L/L₀`), `grad_ratio`
    (`‖JᵀR‖/‖JᵀR₀‖`), `energy` and `energy_heldout` (interior part of `L` on
    the training and the held-out points) and `energy_stderr` (the standard
    error of their difference), all on the last round's points, `L₀` and `R₀`
    at that round's warm start.
    """

    optimiser: Any = eqx.field(default_factory=_default_optimiser)
    n_points: int = eqx.field(static=True, default=2000)
    n_boundary: int = eqx.field(static=True, default=50)
    max_steps: int = eqx.field(static=True, default=100)
    loss_tol: float | None = eqx.field(static=True, default=None)
    loss_rtol: float | None = eqx.field(static=True, default=None)
    grad_rtol: float | None = eqx.field(static=True, default=None)
    n_grid: int = eqx.field(static=True, default=0)
    quadrature: Any = None
    rounds: int = eqx.field(static=True, default=1)
    n_heldout: int | None = eqx.field(static=True, default=None)
    overfit_rtol: float | None = eqx.field(static=True, default=None)
    matrix_free: bool = eqx.field(static=True, default=False)
    dtype: Any = eqx.field(static=True, default=None)

    def __check_init__(self):
        check_int("n_points", self.n_points, minimum=0)
        check_positive_int("n_boundary", self.n_boundary)
        check_positive_int("max_steps", self.max_steps)
        check_positive_int("rounds", self.rounds)
        check_positive_int("n_heldout", self.n_heldout, allow_none=True)
        check_int("n_grid", self.n_grid, minimum=0)
        if self.quadrature is not None:
            shape = jnp.shape(self.quadrature)
            if len(shape) != 2 or shape[0] == 0:
                raise ValueError(f"`quadrature` must be points of shape (m, d), got {shape}.")
            if self.n_grid:
                raise ValueError("`quadrature` replaces the problem's grid: pass n_grid=0 with it.")
        if self.n_points == 0 and self.n_grid == 0 and self.quadrature is None:
            raise ValueError(
                "`n_points` and `n_grid` are both 0 and no `quadrature`: a solve needs "
                "interior points."
            )
        if self.rounds > self.max_steps:
            raise ValueError(
                f"`rounds` ({self.rounds}) must not exceed `max_steps` ({self.max_steps}): "
                "each round runs at least one iteration."
            )
        _check_fraction("loss_tol", self.loss_tol, None)
        _check_fraction("loss_rtol", self.loss_rtol, 1.0)
        _check_fraction("grad_rtol", self.grad_rtol, 1.0)
        _check_fraction("overfit_rtol", self.overfit_rtol, None)
        if not isinstance(self.optimiser, optx.AbstractGaussNewton):
            raise ValueError(
                "`optimiser` must be a Gauss–Newton-type optimistix solver, e.g. "
                f"optx.LevenbergMarquardt(rtol, atol), got {type(self.optimiser).__name__}."
            )

    def point_sets(self, problem: Any, key: PRNGKeyArray, dtype: Any) -> tuple[Any, Any, Any]:
        """The points of one solve from its `key`: `(held-out (n_heldout, d),
        interior (rounds, n_points + grid, d), boundary (rounds, m, d))`, every
        set drawn from its own key, so the held-out points are apart from the
        training ones."""
        # one round draws its points from `key` itself, as before rounds existed,
        # so that a step's training points do not depend on the held-out check
        round_keys = [key] if self.rounds == 1 else jax.random.split(key, self.rounds)
        key_heldout = jax.random.fold_in(key, _HELDOUT_STREAM)
        grid = None if self.quadrature is None else jnp.asarray(self.quadrature, dtype)
        n_fixed = self.n_grid if grid is None else grid.shape[0]
        n_heldout = self.n_heldout or self.n_points or n_fixed
        x_heldout = problem.sample_interior(key_heldout, n_heldout, dtype)
        if self.n_grid:
            if not hasattr(problem, "grid_interior"):
                raise ValueError(
                    f"`n_grid` > 0 needs a problem with a quadrature grid (grid_interior); "
                    f"{type(problem).__name__} has none. Use n_grid=0."
                )
            grid = problem.grid_interior(self.n_grid, dtype)
        interior, boundary = [], []
        for k in round_keys:
            key_in, key_bd = jax.random.split(k)
            x_in = problem.sample_interior(key_in, self.n_points, dtype)
            interior.append(x_in if grid is None else jnp.concatenate([x_in, grid]))
            boundary.append(problem.sample_boundary(key_bd, self.n_boundary, dtype))
        return x_heldout, jnp.stack(interior), jnp.stack(boundary)

    def solve(self, objective: Any, field: Any, *, key: PRNGKeyArray) -> Solution:
        field_dtype = float_dtype_of(field)
        dtype = jnp.dtype(self.dtype) if self.dtype is not None else field_dtype
        objective = cast_floats(objective, dtype)
        params, static = eqx.partition(cast_floats(field, dtype), eqx.is_inexact_array)
        flat, unravel = ravel_pytree(params)
        x_heldout, interior, boundary = self.point_sets(objective.problem, key, dtype)

        def field_of(v):
            return eqx.combine(unravel(v), static)

        if self.matrix_free:
            obj_static = eqx.filter(objective, eqx.is_array, inverse=True)

            def residuals(v, args):
                obj_arrays, x_in, x_bd = args
                return eqx.combine(obj_arrays, obj_static).residuals(field_of(v), x_in, x_bd)

        else:
            residuals = residual_function(objective, field_of)
        obj_arrays = eqx.filter(objective, eqx.is_array)
        steps = self.max_steps // self.rounds
        optimiser = ToleranceStop(self.optimiser, self.loss_tol, self.loss_rtol, self.grad_rtol)

        def one_round(v, points):
            args = (obj_arrays, *points)
            return optx.least_squares(residuals, optimiser, v, args, max_steps=steps, throw=False)

        def head_round(v, points):
            sol = one_round(v, points)
            return sol.value, sol.stats["num_steps"]

        value, head_steps = lax.scan(head_round, flat, (interior[:-1], boundary[:-1]))
        last = one_round(value, (interior[-1], boundary[-1]))
        # the tolerances stopped the solve (`ToleranceStop`): its result says so
        result = RESULTS.promote(last.result)
        stop = last.state
        grad_norm0 = stop.grad_initial
        grad_ratio = stop.grad / jnp.where(grad_norm0 > 0, grad_norm0, 1.0)
        new_field = field_of(last.value)
        train_points = objective.pointwise(new_field, interior[-1])
        heldout_points = objective.pointwise(new_field, x_heldout)
        energy, energy_heldout = jnp.mean(train_points), jnp.mean(heldout_points)
        # the spread of the two means if both samples came from the same field
        # (no overfitting): estimated from the training points, whose spread an
        # overfitted field does not inflate
        stderr = jnp.sqrt(jnp.var(train_points) * (1 / train_points.size + 1 / heldout_points.size))

        if self.overfit_rtol is not None:
            excess = energy_heldout - energy - SAMPLING_SIGMAS * stderr
            overfitted = excess > self.overfit_rtol * energy
            result = RESULTS.where(overfitted, RESULTS.insr_overfitted, result)
        new = cast_floats(new_field, field_dtype)
        iterations = jnp.sum(head_steps) + last.stats["num_steps"]
        extra = dict(
            loss_ratio=stop.loss / stop.loss_initial,
            grad_ratio=grad_ratio,
            energy=energy,
            energy_heldout=energy_heldout,
            energy_stderr=stderr,
        )
        return finish(new, result, stop.loss_initial, stop.loss, iterations, **extra)


def residual_function(objective: Any, field_of: Any) -> Any:
    """`R(v, args)` for `optimistix.least_squares`, `args = (arrays of
    objective, interior points, boundary points)`, whose Jacobian is built from
    per-point gradients (a `jax.custom_jvp`).

    Forward mode through the stacked residual (what optimistix does to
    materialise `J`) costs one pass over all points per weight; per-point
    reverse-mode gradients cost one small pass per point and were measured
    about 60× faster for the 901-weight SIREN on 2000 points.
    """
    static = eqx.filter(objective, eqx.is_array, inverse=True)

    def pieces(v, obj_arrays, x_in, x_bd):
        obj = eqx.combine(obj_arrays, static)
        return obj, field_of(v)

    @jax.custom_jvp
    def residuals(v, obj_arrays, x_in, x_bd):
        obj, field = pieces(v, obj_arrays, x_in, x_bd)
        return obj.residuals(field, x_in, x_bd)

    @residuals.defjvp
    def residuals_jvp(primals, tangents):
        v, obj_arrays, x_in, x_bd = primals
        obj = eqx.combine(obj_arrays, static)
        rows = [
            _rows(lambda w, x: obj.interior(field_of(w), x), v, x_in) / math.sqrt(x_in.shape[0])
        ]
        m = x_bd.shape[0]
        if m and obj.boundary_weight:
            scale = math.sqrt(obj.boundary_weight / m)
            rows.append(_rows(lambda w, x: obj.boundary(field_of(w), x), v, x_bd) * scale)
        jac = jnp.concatenate(rows)
        return residuals(*primals), jac @ tangents[0]

    return lambda v, args: residuals(v, *args)


def _rows(point_residual: Any, v: Any, x: Any) -> Any:
    """The Jacobian rows `(n·k, P)` of a per-point residual `(k,)` over points `x`."""
    per_point = jax.vmap(jax.jacrev(point_residual), in_axes=(None, 0))(v, x)
    return per_point.reshape(-1, v.shape[0])
