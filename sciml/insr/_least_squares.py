r"""The Gauss–Newton / Levenberg–Marquardt per-step solver (optimistix).

One step draws its points ([`Collocation`][sciml.insr.Collocation]: random
interior points, an optional fixed quadrature set, boundary points), stacks
the per-point residuals into `R(θ)` (see `sciml.insr` objectives) and calls
`optimistix.least_squares` from the previous weights, stopping as its
[`Stopping`][sciml.insr.Stopping] says. With `Collocation(rounds=r)` the
`max_steps` iterations are split into `r` solves, each on freshly drawn
points, so that no single point set is fitted to convergence; the tolerances
then apply to each round on its own points, relative to that round's warm
start: a round that meets one hands over to the next point set early, and the
last round's outcome is the step's. The interior part of the objective is also
evaluated on held-out points (`Collocation.n_heldout`), which reports
overfitting with `Collocation.overfit_rtol`.

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

from ..solution import RESULTS, Solution
from ._collocation import Collocation
from ._step_solver import AbstractStepSolver, cast_floats, check_module, finish, float_dtype_of
from ._stopping import Stopping


SAMPLING_SIGMAS = 3.0


def _default_optimiser():
    return optx.LevenbergMarquardt(rtol=1e-6, atol=1e-9, linear_solver=lx.Normal(lx.Cholesky()))


class LeastSquaresSolver(AbstractStepSolver):
    """Minimises the per-step objective by `optimistix.least_squares`.

    **Arguments:**

    - `optimiser`: an `optimistix.AbstractGaussNewton`
      (default `optx.LevenbergMarquardt(rtol=1e-6, atol=1e-9,
      linear_solver=lx.Normal(lx.Cholesky()))`: the damped normal equations,
      `P × P`; optimistix's default QR of the `(N + P) × P` augmented Jacobian
      was measured ~80× slower for 2000 points and 901 weights on a CPU;
      `optx.GaussNewton` works for well-conditioned problems).
    - `collocation`: which points ([`Collocation`][sciml.insr.Collocation],
      default `Collocation()`: 2000 interior and 50 boundary points, one round).
    - `stopping`: when to stop ([`Stopping`][sciml.insr.Stopping], default
      `Stopping()`: at most 100 iterations, no tolerances); its `max_steps`
      must be at least `collocation.rounds` (each round runs one iteration or more).
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

    # `Any`: `__check_init__` checks the types, with a message that names the fix
    optimiser: Any = eqx.field(default_factory=_default_optimiser)
    collocation: Any = eqx.field(default_factory=Collocation)
    stopping: Any = eqx.field(default_factory=Stopping)
    matrix_free: bool = eqx.field(static=True, default=False)
    dtype: Any = eqx.field(static=True, default=None)

    def __check_init__(self):
        if not isinstance(self.optimiser, optx.AbstractGaussNewton):
            raise ValueError(
                "`optimiser` must be a Gauss–Newton-type optimistix solver, e.g. "
                f"optx.LevenbergMarquardt(rtol, atol), got {type(self.optimiser).__name__}."
            )
        check_module("collocation", self.collocation, Collocation)
        check_module("stopping", self.stopping, Stopping)
        rounds, max_steps = self.collocation.rounds, self.stopping.max_steps
        if rounds > max_steps:
            raise ValueError(
                f"`collocation.rounds` ({rounds}) must not exceed `stopping.max_steps` "
                f"({max_steps}): each round runs at least one iteration."
            )

    def solve(self, objective: Any, field: Any, *, key: PRNGKeyArray) -> Solution:
        field_dtype = float_dtype_of(field)
        dtype = jnp.dtype(self.dtype) if self.dtype is not None else field_dtype
        objective = cast_floats(objective, dtype)
        params, static = eqx.partition(cast_floats(field, dtype), eqx.is_inexact_array)
        flat, unravel = ravel_pytree(params)
        x_heldout, interior, boundary = self.collocation.point_sets(objective.problem, key, dtype)

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
        steps = self.stopping.max_steps // self.collocation.rounds
        optimiser = self.stopping.wrap(self.optimiser)

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

        overfit_rtol = self.collocation.overfit_rtol
        if overfit_rtol is not None:
            excess = energy_heldout - energy - SAMPLING_SIGMAS * stderr
            overfitted = excess > overfit_rtol * energy
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
