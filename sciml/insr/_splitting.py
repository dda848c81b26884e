r"""Operator splitting for incompressible flow (the INSR paper's fluid scheme).

One step from the velocity `Uⁿ` (network units, see
[`TaylorGreen2D`][sciml.insr.TaylorGreen2D]; `L = π`) is a sequence of
sub-problems, each a per-point least-squares objective minimised over the
weights of a field, warm-started from its previous weights:

1. **Advection** (first-order semi-Lagrangian backtrack through the frozen
   `Uⁿ`, clamped to the box):
   $$U_\theta(X) \approx U^n\big(\mathrm{clamp}(X - \Delta t\,U^n(X), -1, 1)\big)
   =: U^{adv}(X),$$ plus the free-slip penalty `U_θ·n = 0` on the walls.
2. **Diffusion** (only when `ν > 0`; implicit Euler):
   $$U_\theta - \frac{\nu\Delta t}{L^2}\Delta_X U_\theta = U^{adv},$$ plus free slip.
   For the Taylor–Green mode (`Δ_X U = −2L²U`) it multiplies the velocity by
   `1/(1 + 2νΔt)`. Its output is `U*` (`U* = U^{adv}` when `ν = 0`).
3. **Pressure** `P` (`ρ` and `Δt` absorbed: `P = Δt p/L²` up to a constant):
   the least squares of the `projection`'s residuals,
   [`StrongProjection`][sciml.insr.StrongProjection] (the paper's: `∇·U* − ΔP`
   with `∂P/∂n = 0` on the walls) or
   [`VariationalProjection`][sciml.insr.VariationalProjection]
   (`U* − Uⁿ − ∇P`, first derivatives only), modules passed as `projection`.
4. **Projection**: `U_θ(X) ≈ U*(X) − ∇P(X)`, plus free slip.

Each sub-step's [`Solution`][sciml.solution.Solution] is kept: the step's
result is the first failing sub-step's (else `successful`), and `stats`
holds every sub-step's `*_loss_initial`, `*_loss` and `*_iterations` besides the summed
`loss_initial`, `loss`, `iterations`. The integrator's state between steps is
the pressure field (the warm start of the next pressure solve).
"""

from __future__ import annotations

from typing import Any, ClassVar

import equinox as eqx
import jax
import jax.numpy as jnp
from jaxtyping import Array, Float

from ..solution import RESULTS, Solution, make_solution
from ._differential import gradient, laplacian
from ._integrators import AbstractIntegrator
from ._least_squares import LeastSquaresSolver
from ._objective import AbstractObjective
from ._problem import (
    AbstractIncompressibleProblem,
    AbstractProblem,
    Field,
    check_finite_weights,
)
from ._projection import AbstractProjection, as_projection
from ._step_solver import AbstractStepSolver


def backtrack(velocity: Field, dt: Any, x: Float[Array, " 2"]) -> Float[Array, " 2"]:
    """The first-order semi-Lagrangian departure point `clamp(X − Δt U(X), −1, 1)`."""
    return jnp.clip(x - dt * velocity(x), -1.0, 1.0)


class AdvectionObjective(AbstractObjective):
    """`U_θ(X) − Uⁿ(clamp(X − Δt Uⁿ(X)))` inside; free slip on the walls."""

    problem: AbstractProblem
    previous: Any
    dt: Any

    def interior(self, field, x):
        return field(x) - self.previous(backtrack(self.previous, self.dt, x))

    def boundary(self, field, x):
        return self.problem.boundary_residual(field, None, x)

    @property
    def boundary_weight(self) -> float:
        return self.problem.boundary_weight


class DiffusionObjective(AbstractObjective):
    """`U_θ − (νΔt/L²)ΔU_θ − U^{adv}` inside; free slip on the walls."""

    problem: AbstractIncompressibleProblem
    previous: Any
    dt: Any

    def interior(self, field, x):
        scale = self.problem.viscosity * self.dt / self.problem.length**2
        return field(x) - scale * laplacian(field, x) - self.previous(x)

    def boundary(self, field, x):
        return self.problem.boundary_residual(field, None, x)

    @property
    def boundary_weight(self) -> float:
        return self.problem.boundary_weight


class PressureObjective(AbstractObjective):
    """The pressure sub-problem of `projection`
    ([`StrongProjection`][sciml.insr.StrongProjection] or
    [`VariationalProjection`][sciml.insr.VariationalProjection]) for the velocity
    `U*` given the step's initial velocity `previous`."""

    problem: AbstractProblem
    velocity: Any
    previous: Any
    projection: AbstractProjection

    def interior(self, field, x):
        return self.projection.interior(field, self.velocity, self.previous, x)

    def boundary(self, field, x):
        return self.projection.boundary(field, x)

    @property
    def boundary_weight(self) -> float:
        return self.projection.boundary_weight(self.problem)


class ProjectionObjective(AbstractObjective):
    """`U_θ − (U* − ∇P)` inside; free slip on the walls."""

    problem: AbstractProblem
    velocity: Any
    pressure: Any

    def interior(self, field, x):
        return field(x) - (self.velocity(x) - gradient(self.pressure, x))

    def boundary(self, field, x):
        return self.problem.boundary_residual(field, None, x)

    @property
    def boundary_weight(self) -> float:
        return self.problem.boundary_weight


def check_pressure_field(pressure: Any, name: str = "pressure") -> None:
    """Raises `ValueError` unless `pressure` maps `(2,)` to `(1,)`."""
    if not callable(pressure):
        raise ValueError(f"`{name}` must be a field `(2,) -> (1,)`, got {type(pressure).__name__}.")
    try:
        out = eqx.filter_eval_shape(pressure, jax.ShapeDtypeStruct((2,), jnp.float32))
    except Exception as error:  # noqa: BLE001 - re-raised with the fix
        raise ValueError(f"`{name}` could not be evaluated on one point (2,): {error}") from error
    if getattr(out, "shape", None) != (1,):
        raise ValueError(
            f"`{name}` must map a point (2,) to (1,) (a scalar pressure), got output shape "
            f"{getattr(out, 'shape', out)}."
        )


class Splitting(AbstractIntegrator):
    """The paper's operator splitting for incompressible flow (module docstring).

    **Arguments:**

    - `pressure`: the initial pressure field `(2,) -> (1,)` (e.g. a
      `SIREN(2, 1)`), returned by `init` as the state and warm-started every step.
    - `solver`: per-step solver of the velocity sub-steps (advection,
      diffusion, projection); default [`LeastSquaresSolver()`][sciml.insr.LeastSquaresSolver].
    - `pressure_solver`: solver of the pressure sub-step (default: `solver`).
    - `projection`: the pressure sub-problem, [`StrongProjection()`][sciml.insr.StrongProjection]
      (default; the paper's Poisson residual) or
      [`VariationalProjection()`][sciml.insr.VariationalProjection]; the names
      `"strong"` and `"variational"` stand for them.

    Use with [`TaylorGreen2D`][sciml.insr.TaylorGreen2D]; `integrate(...).stats["state"]`
    is the final pressure field.
    """

    pressure: Any
    solver: Any
    pressure_solver: Any
    projection: AbstractProjection
    order: ClassVar[int] = 1
    problems: ClassVar[tuple[type[AbstractProblem], ...]] = (AbstractIncompressibleProblem,)

    def __init__(
        self,
        pressure: Any,
        solver: Any = None,
        *,
        pressure_solver: Any = None,
        projection: AbstractProjection | str = "strong",
    ):
        self.pressure = pressure
        self.solver = LeastSquaresSolver() if solver is None else solver
        self.pressure_solver = pressure_solver
        self.projection = as_projection(projection)

    def __check_init__(self):
        for name, value in (("solver", self.solver), ("pressure_solver", self.pressure_solver)):
            if value is not None and not isinstance(value, AbstractStepSolver):
                raise ValueError(
                    f"`{name}` must be a LeastSquaresSolver() or AdamSolver(), "
                    f"got {type(value).__name__}."
                )
        check_pressure_field(self.pressure)

    def init(self, field: Any, problem: AbstractProblem, t0: Any, dt: Any) -> Any:
        """The initial pressure field (the state: the previous step's pressure)."""
        problem.check_field(field)
        return self.pressure

    def step(self, field, problem, t, dt, state=None, *, key):
        """One splitting step: `(Solution(new velocity field, result, stats), new pressure)`."""
        check_finite_weights(field)
        pressure = self.pressure if state is None else state
        pressure_solver = self.solver if self.pressure_solver is None else self.pressure_solver
        keys = iter(jax.random.split(key, 4))
        subs = {}
        adv = self.solver.solve(AdvectionObjective(problem, field, dt), field, key=next(keys))
        subs["advection"], velocity = adv, adv.value
        if problem.viscosity:
            objective = DiffusionObjective(problem, velocity, dt)
            diff = self.solver.solve(objective, velocity, key=next(keys))
            subs["diffusion"], velocity = diff, diff.value
        objective = PressureObjective(problem, velocity, field, self.projection)
        pres = pressure_solver.solve(objective, pressure, key=next(keys))
        subs["pressure"] = pres
        objective = ProjectionObjective(problem, velocity, pres.value)
        proj = self.solver.solve(objective, velocity, key=next(keys))
        subs["projection"] = proj
        return _combine(proj.value, subs), pres.value


def _combine(value: Any, subs: dict[str, Solution]) -> Solution:
    result = RESULTS.successful
    stats = {"loss_initial": 0.0, "loss": 0.0, "iterations": 0}
    for name, sol in subs.items():
        result = RESULTS.where(result == RESULTS.successful, sol.result, result)
        for key in ("loss_initial", "loss", "iterations"):
            stats[f"{name}_{key}"] = sol.stats[key]
            stats[key] = stats[key] + sol.stats[key]
    return make_solution(value, result, stats, throw=False)
