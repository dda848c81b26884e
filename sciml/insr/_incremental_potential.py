r"""The paper's elastodynamics integrator: implicit Euler as an incremental potential.

One step from `(qⁿ, qⁿ⁻¹)` minimises over the new displacement field `u_θ`
(the mean over `N` samples of the energy of `sciml.insr._hyperelastic`, plus
the boundary penalty)

$$\frac1N\sum_i \Big\lVert \tfrac{\sqrt k}{\Delta t}\big(u_\theta - 2u^n + u^{n-1}
- \tfrac{\Delta t^2}{2k} f\big)\Big\rVert^2 + \psi(F_\theta)
+ \tfrac{k_c}{2}\max(0, y_{\text{floor}} - q_{\theta,y})^2
\;+\; \frac{\lambda}{N_b}\sum_b\lVert c(u_\theta)(x_b)\rVert^2 ,$$

whose stationarity condition is implicit Euler for `2k q̈ = ∇·∂ψ/∂F + f`
(velocity `q̇ⁿ⁺¹ = (qⁿ⁺¹ − qⁿ)/Δt`): the per-sample residual stacks the
inertia (2), ARAP (4), volume (1) and, with a floor, contact (1) terms.
`quasi_static=True` drops the inertia term (a static equilibrium per step;
the paper's stretch), and then needs `f = 0` — without the kinetic term the
external work is not a square.

Implicit Euler damps every mode: for `q̈ = −ω²q` the energy
`½q̇² + ½ω²q²` is multiplied by `1/(1 + ω²Δt²)` per step.

The state carried between steps is `(u^{n−1}, steps taken)`; `init` returns the
initial field as `u^{−1}` (zero initial velocity).
"""

from __future__ import annotations

from typing import Any, ClassVar

import equinox as eqx
import jax.numpy as jnp

from ._hyperelastic import contact_residual, elastic_residual, inertia_residual
from ._integrators import AbstractResidualIntegrator, StepObjective
from ._least_squares import LeastSquaresSolver
from ._problem import AbstractElasticProblem, AbstractProblem, check_finite_weights
from ._step_solver import AbstractStepSolver, float_dtype_of


def _check(problem: Any, quasi_static: bool) -> None:
    if quasi_static and any(problem.force):
        raise ValueError(
            "a quasi-static IncrementalPotential needs `force` = (0, 0): without the kinetic "
            f"term the external work is not a sum of squares; got force={problem.force}."
        )


class IncrementalPotential(AbstractResidualIntegrator):
    """Implicit Euler for elastodynamics by minimising the incremental potential
    (for [`Elasticity2D`][sciml.insr.Elasticity2D]).

    **Arguments:** `solver` (default [`LeastSquaresSolver()`][sciml.insr.LeastSquaresSolver]);
    `quasi_static` (default False: drop the inertia term).

    `residual(problem, field, previous, t, dt, x)` takes
    `previous = (uⁿ, uⁿ⁻¹, force scale)`.
    """

    solver: AbstractStepSolver = eqx.field(default_factory=LeastSquaresSolver)
    quasi_static: bool = eqx.field(static=True, default=False)
    order: ClassVar[int] = 1
    problems: ClassVar[tuple[type[AbstractProblem], ...]] = (AbstractElasticProblem,)

    def residual(self, problem, field, previous, t, dt, x):
        current, before, force_scale = previous
        u = field(x)
        parts = []
        if not self.quasi_static:
            force = force_scale * jnp.asarray(problem.force, x.dtype)
            parts.append(inertia_residual(u, current(x), before(x), force, problem.mass, dt))
        parts.append(elastic_residual(problem.deformation_gradient(field, x), problem.a, problem.b))
        if problem.floor is not None:
            parts.append(contact_residual(x + u, problem.floor, problem.contact_stiffness))
        return jnp.concatenate(parts)

    def amplification(self, z):
        """Implicit Euler's `1/(1 − z)` (first-order form of the dynamics)."""
        return 1 / (1 - z)

    def init(self, field: Any, problem: Any, t0: Any, dt: Any) -> Any:
        """`(u⁰, 0)`: the previous field equals the initial one (zero velocity)."""
        _check(problem, self.quasi_static)
        problem.check_field(field)
        return field, jnp.zeros((), float_dtype_of(field))

    def step(self, field, problem, t, dt, state=None, *, key):
        """One step; `state = (uⁿ⁻¹, steps taken)` from `init` or the previous step."""
        _check(problem, self.quasi_static)
        check_finite_weights(field)
        if state is None:
            state = self.init(field, problem, t, dt)
        before, taken = state
        previous = (field, before, problem.force_scale(taken))
        objective = StepObjective(integrator=self, problem=problem, previous=previous, t=t, dt=dt)
        # the warm start meets the boundary displacements of the new time
        sol = self.solver.solve(objective, problem.prescribe(field, t + dt), key=key)
        return sol, (field, taken + 1)
