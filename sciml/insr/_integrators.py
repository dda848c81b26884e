r"""Time integrators whose unknowns are the weights of the new field.

For `∂ₜu = F(u)` each integrator is a per-point residual between the new field
`u_θ` and the frozen previous one `uⁿ`; a step minimises its mean square over
random points (plus the boundary penalty) by the integrator's `solver`:

| integrator | residual `r(x)` | amplification `g(z)` for `F(u) = λu`, `z = λΔt` |
| --- | --- | --- |
| `ExplicitEuler` | `(u_θ − uⁿ)/Δt − F(uⁿ)` | `1 + z` |
| `ImplicitEuler` | `(u_θ − uⁿ)/Δt − F(u_θ)` | `1/(1 − z)` |
| `Midpoint` | `(u_θ − uⁿ)/Δt − F(½(u_θ + uⁿ))` | `(1 + z/2)/(1 − z/2)` |

For a linear `F` the midpoint residual is the paper's
`(u_θ − uⁿ)/Δt + a(∂ₓu_θ + ∂ₓuⁿ)/2`. The residuals are representation-agnostic:
`u_θ` and `uⁿ` are any callables on one point. An operator-splitting scheme is
a sequence of such objectives, each seeing the previous field.
"""

from __future__ import annotations

import abc
from typing import Any, ClassVar

import equinox as eqx
from jaxtyping import Array, Float, PRNGKeyArray

from ..solution import Solution
from ._least_squares import LeastSquaresSolver
from ._objective import StepObjective
from ._problem import AbstractProblem, Field
from ._step_solver import AbstractStepSolver


class AbstractIntegrator(eqx.Module):
    """Base of the integrators: a per-point `residual` and `step`, which
    minimises it with `solver` starting from the previous weights."""

    solver: eqx.AbstractVar[AbstractStepSolver]
    order: ClassVar[int]

    @abc.abstractmethod
    def residual(
        self,
        problem: AbstractProblem,
        field: Field,
        previous: Field,
        t: Any,
        dt: Any,
        x: Float[Array, " d"],
    ) -> Float[Array, " C"]:
        """The residual at one point `x` of the new field `field` given `previous` at `t`."""

    @abc.abstractmethod
    def amplification(self, z: Any) -> Any:
        """The growth factor per step for `∂ₜu = λu`, `z = λΔt` (complex)."""

    def init(self, field: Any, problem: AbstractProblem, t0: Any, dt: Any) -> Any:
        """The integrator's state carried from step to step besides the field
        (e.g. the previous field of a two-level scheme, or a pressure field);
        `None` for the one-step integrators here."""
        return None

    def step(
        self,
        field: Any,
        problem: AbstractProblem,
        t: Any,
        dt: Any,
        state: Any = None,
        *,
        key: PRNGKeyArray,
    ) -> tuple[Solution, Any]:
        """One step from `field` (the weights at `t`) to `t + dt`.

        **Returns:** `(solution, state)`: the `solver`'s
        [`Solution`][sciml.solution.Solution] (`value` the new field, `stats`
        `loss_initial`, `loss`, `iterations`) and the new state.
        """
        objective = StepObjective(integrator=self, problem=problem, previous=field, t=t, dt=dt)
        return self.solver.solve(objective, field, key=key), state


def _solver_field():
    return eqx.field(default_factory=LeastSquaresSolver)


class ExplicitEuler(AbstractIntegrator):
    """Forward Euler, first order: `u_θ = uⁿ + Δt F(uⁿ)` in least squares.
    Unstable for pure advection (`|g| = √(1 + (akΔt)²)`).

    **Arguments:** `solver` (default [`LeastSquaresSolver()`][sciml.insr.LeastSquaresSolver]).
    """

    solver: Any = _solver_field()
    order: ClassVar[int] = 1

    def residual(self, problem, field, previous, t, dt, x):
        return (field(x) - previous(x)) / dt - problem.rhs(previous, t, x)

    def amplification(self, z):
        return 1 + z


class ImplicitEuler(AbstractIntegrator):
    """Backward Euler, first order: `(u_θ − uⁿ)/Δt = F(u_θ)`; damps advection
    by `1/√(1 + (akΔt)²)` per step.

    **Arguments:** `solver` (default [`LeastSquaresSolver()`][sciml.insr.LeastSquaresSolver]).
    """

    solver: Any = _solver_field()
    order: ClassVar[int] = 1

    def residual(self, problem, field, previous, t, dt, x):
        return (field(x) - previous(x)) / dt - problem.rhs(field, t + dt, x)

    def amplification(self, z):
        return 1 / (1 - z)


class Midpoint(AbstractIntegrator):
    """Implicit midpoint, second order (the paper's integrator for advection):
    `(u_θ − uⁿ)/Δt = F(½(u_θ + uⁿ))`; conserves every advected mode's amplitude,
    phase `2·atan(akΔt/2)` per step.

    **Arguments:** `solver` (default [`LeastSquaresSolver()`][sciml.insr.LeastSquaresSolver]).
    """

    solver: Any = _solver_field()
    order: ClassVar[int] = 2

    def residual(self, problem, field, previous, t, dt, x):
        def average(y):
            return 0.5 * (field(y) + previous(y))

        return (field(x) - previous(x)) / dt - problem.rhs(average, t + 0.5 * dt, x)

    def amplification(self, z):
        return (1 + z / 2) / (1 - z / 2)
