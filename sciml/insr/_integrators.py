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
import inspect
from typing import Any, ClassVar

import equinox as eqx
from jaxtyping import Array, Float, PRNGKeyArray

from ..solution import Solution
from ._least_squares import LeastSquaresSolver
from ._objective import AbstractObjective
from ._problem import AbstractEvolutionProblem, AbstractProblem, Field, check_finite_weights
from ._step_solver import AbstractStepSolver


class AbstractIntegrator(eqx.Module):
    """Base of the integrators that `integrate` steps: `init` (the state carried
    besides the field) and `step` (one time step by the integrator's `solver`).

    An integrator declares the problems it steps in its class attribute
    `problems`, a tuple of problem classes (usually the abstract kinds of
    `sciml.insr`, e.g. [`AbstractEvolutionProblem`][sciml.insr.AbstractEvolutionProblem]);
    `integrate` refuses any other problem before it computes anything.
    """

    solver: eqx.AbstractVar[AbstractStepSolver]
    order: eqx.AbstractClassVar[int]
    problems: eqx.AbstractClassVar[tuple[type[AbstractProblem], ...]]

    @abc.abstractmethod
    def init(self, field: Any, problem: AbstractProblem, t0: Any, dt: Any) -> Any:
        """The integrator's state carried from step to step besides the field
        (e.g. the previous field of a two-level scheme, or a pressure field)."""

    @abc.abstractmethod
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
        """One step from `field` (the weights at `t`) to `t + dt`. Weights
        holding NaN or Inf are refused with a `ValueError` (outside `jit`).

        **Returns:** `(solution, state)`: the `solver`'s
        [`Solution`][sciml.solution.Solution] (`value` the new field, `stats`
        `loss_initial`, `loss`, `iterations`) and the new state.
        """


class AbstractResidualIntegrator(AbstractIntegrator):
    """Base of the integrators whose step minimises a per-point `residual`
    (the interior part of a [`StepObjective`][sciml.insr.StepObjective])."""

    @abc.abstractmethod
    def residual(
        self,
        problem: AbstractProblem,
        field: Field,
        previous: Any,
        t: Any,
        dt: Any,
        x: Float[Array, " d"],
    ) -> Float[Array, " k"]:
        """The residual at one point `x` of the new field `field` given
        `previous` (the previous field, or what the scheme carries) at `t`."""


class StepObjective(AbstractObjective):
    """One time step of an integrator: residual `integrator.residual(problem,
    f_θ, f_prev, t, dt, x)` inside, the problem's boundary residual at `t + dt`
    on the boundary."""

    integrator: AbstractResidualIntegrator
    problem: AbstractProblem
    previous: Any
    t: Any
    dt: Any

    def interior(self, field: Field, x: Float[Array, " d"]) -> Float[Array, " k"]:
        return self.integrator.residual(self.problem, field, self.previous, self.t, self.dt, x)

    def boundary(self, field: Field, x: Float[Array, " d"]) -> Float[Array, " b"]:
        return self.problem.boundary_residual(field, self.t + self.dt, x)

    @property
    def boundary_weight(self) -> float:
        return self.problem.boundary_weight


class AbstractPointwiseIntegrator(AbstractResidualIntegrator):
    """Base of the one-step integrators of `∂ₜu = F(u)` (module docstring): a
    per-point `residual` between the new field and the previous one, which
    `step` minimises with `solver` starting from the previous weights; no
    state besides the field. They step every
    [`AbstractEvolutionProblem`][sciml.insr.AbstractEvolutionProblem]."""

    problems: ClassVar[tuple[type[AbstractProblem], ...]] = (AbstractEvolutionProblem,)

    @abc.abstractmethod
    def amplification(self, z: Any) -> Any:
        """The growth factor per step for `∂ₜu = λu`, `z = λΔt` (complex)."""

    def init(self, field: Any, problem: AbstractProblem, t0: Any, dt: Any) -> None:
        """`None`: a one-step integrator carries no state besides the field."""
        return None

    def step(self, field, problem, t, dt, state=None, *, key):
        """One step: the `solver`'s `Solution` of the residual's least squares, and `None`."""
        check_finite_weights(field)
        objective = StepObjective(integrator=self, problem=problem, previous=field, t=t, dt=dt)
        return self.solver.solve(objective, field, key=key), None


def check_supported(integrator: Any, problem: AbstractProblem) -> None:
    """Raises `ValueError` unless `integrator` is an `AbstractIntegrator` that
    steps `problem`: an instance of a class in its `problems`."""
    if not isinstance(integrator, AbstractIntegrator):
        raise ValueError(
            "`integrator` must be an AbstractIntegrator such as Midpoint(), Splitting(pressure) "
            f"or IncrementalPotential(), got {type(integrator).__name__}."
        )
    used = type(integrator)
    if not isinstance(problem, used.problems):
        name = type(problem).__name__
        serving = dict.fromkeys(
            cls.__name__ for cls in _finals(AbstractIntegrator) if isinstance(problem, cls.problems)
        )
        kinds = " or ".join(kind.__name__ for kind in used.problems)
        hint = f"use {' or '.join(serving)}" if serving else "no integrator steps it"
        raise ValueError(
            f"{name} cannot be stepped with {used.__name__}; {hint} "
            f"(`{used.__name__}.problems`: {kinds})."
        )


def _finals(cls: type) -> list[type]:
    """`cls` if it is final, else its final subclasses."""
    if not inspect.isabstract(cls):
        return [cls]
    return [final for sub in cls.__subclasses__() for final in _finals(sub)]


def _solver_field():
    return eqx.field(default_factory=LeastSquaresSolver)


class ExplicitEuler(AbstractPointwiseIntegrator):
    """Forward Euler, first order: `u_θ = uⁿ + Δt F(uⁿ)` in least squares.
    Unstable for pure advection (`|g| = √(1 + (akΔt)²)`).

    **Arguments:** `solver` (default [`LeastSquaresSolver()`][sciml.insr.LeastSquaresSolver]).
    """

    solver: AbstractStepSolver = _solver_field()
    order: ClassVar[int] = 1

    def residual(self, problem, field, previous, t, dt, x):
        return (field(x) - previous(x)) / dt - problem.rhs(previous, t, x)

    def amplification(self, z):
        return 1 + z


class ImplicitEuler(AbstractPointwiseIntegrator):
    """Backward Euler, first order: `(u_θ − uⁿ)/Δt = F(u_θ)`; damps advection
    by `1/√(1 + (akΔt)²)` per step.

    **Arguments:** `solver` (default [`LeastSquaresSolver()`][sciml.insr.LeastSquaresSolver]).
    """

    solver: AbstractStepSolver = _solver_field()
    order: ClassVar[int] = 1

    def residual(self, problem, field, previous, t, dt, x):
        return (field(x) - previous(x)) / dt - problem.rhs(field, t + dt, x)

    def amplification(self, z):
        return 1 / (1 - z)


class Midpoint(AbstractPointwiseIntegrator):
    """Implicit midpoint, second order (the paper's integrator for advection):
    `(u_θ − uⁿ)/Δt = F(½(u_θ + uⁿ))`; conserves every advected mode's amplitude,
    phase `2·atan(akΔt/2)` per step.

    **Arguments:** `solver` (default [`LeastSquaresSolver()`][sciml.insr.LeastSquaresSolver]).
    """

    solver: AbstractStepSolver = _solver_field()
    order: ClassVar[int] = 2

    def residual(self, problem, field, previous, t, dt, x):
        def average(y):
            return 0.5 * (field(y) + previous(y))

        return (field(x) - previous(x)) / dt - problem.rhs(average, t + 0.5 * dt, x)

    def amplification(self, z):
        return (1 + z / 2) / (1 - z / 2)
