r"""Per-step objectives: the per-point residuals whose sum of squares a step minimises.

For interior points `xᵢ` (`N` of them) and boundary points `x_b` (`N_b`):

$$L(\theta) = \frac{1}{N}\sum_i \lVert r(f_\theta, x_i)\rVert^2
+ \frac{\lambda}{N_b}\sum_b \lVert c(f_\theta, x_b)\rVert^2
= \lVert R(\theta)\rVert^2,$$

with the stacked residual vector `R = [r(xᵢ)/√N, √(λ/N_b) c(x_b)]`, which the
Gauss–Newton / Levenberg–Marquardt solver works on directly and the Adam
solver through `L`. An objective holds everything the residual needs besides
the new field (the previous field(s), the time, the step): its arrays are
pytree leaves, so it crosses `jit`, `scan` and the optimistix solvers as data.
"""

from __future__ import annotations

import abc
import math

import equinox as eqx
import jax
import jax.numpy as jnp
from jaxtyping import Array, Float

from ._problem import AbstractProblem, Field


class AbstractObjective(eqx.Module):
    """Base of the per-step objectives: `interior(field, x)` and
    `boundary(field, x)` per-point residuals on the problem's sample points."""

    problem: eqx.AbstractVar[AbstractProblem]

    @abc.abstractmethod
    def interior(self, field: Field, x: Float[Array, " d"]) -> Float[Array, " k"]:
        """The residual at one interior point."""

    @abc.abstractmethod
    def boundary(self, field: Field, x: Float[Array, " d"]) -> Float[Array, " b"]:
        """The boundary residual at one boundary point."""

    @property
    @abc.abstractmethod
    def boundary_weight(self) -> float:
        """`λ`, the weight of the boundary term (0 drops it)."""

    def residuals(
        self, field: Field, x_interior: Float[Array, "n d"], x_boundary: Float[Array, "m d"]
    ) -> Float[Array, " r"]:
        """The stacked residual vector `R` (its squared norm is the loss `L`)."""
        n = x_interior.shape[0]
        parts = [jax.vmap(lambda x: self.interior(field, x))(x_interior).reshape(-1) / math.sqrt(n)]
        m = x_boundary.shape[0]
        if m and self.boundary_weight:
            scale = math.sqrt(self.boundary_weight / m)
            parts.append(
                jax.vmap(lambda x: self.boundary(field, x))(x_boundary).reshape(-1) * scale
            )
        return jnp.concatenate(parts)

    def pointwise(self, field: Field, x: Float[Array, "n d"]) -> Float[Array, " n"]:
        """`‖r(f_θ, xᵢ)‖²` per interior point (their mean is the interior part of `L`)."""
        return jax.vmap(lambda y: jnp.sum(self.interior(field, y) ** 2))(x)

    def losses(
        self, field: Field, x_interior: Float[Array, "n d"], x_boundary: Float[Array, "m d"]
    ) -> tuple[Array, Array]:
        """`(L, interior part of L)`."""
        r = self.residuals(field, x_interior, x_boundary)
        k = jax.eval_shape(lambda x: self.interior(field, x), x_interior[0]).size
        n_interior = x_interior.shape[0] * k
        return jnp.sum(r**2), jnp.sum(r[:n_interior] ** 2)


class InitialObjective(AbstractObjective):
    """Fitting the initial condition: `f_θ(x) − u₀(x)` and, with a gradient
    weight `ℓ > 0`, also `ℓ (∂f_θ/∂x − ∂u₀/∂x)` (a fit in `H¹`, for problems
    whose energy depends on `∇u`: a value-only fit leaves the strain wrong
    between the points). No boundary term.

    **Arguments:** `problem`; `gradient_weight` (`ℓ ≥ 0`; default `None`: the
    problem's `initial_gradient_weight`, 0 for the paper's plain MSE).
    """

    problem: AbstractProblem
    gradient_weight: float | None = eqx.field(static=True, default=None)

    def __check_init__(self):
        if self.gradient_weight is not None and not self.gradient_weight >= 0:
            raise ValueError(
                f"`gradient_weight` must be >= 0 or None, got {self.gradient_weight!r}."
            )

    @property
    def weight(self) -> float:
        """`ℓ`: `gradient_weight`, or the problem's `initial_gradient_weight`."""
        if self.gradient_weight is not None:
            return self.gradient_weight
        return self.problem.initial_gradient_weight

    def interior(self, field: Field, x: Float[Array, " d"]) -> Float[Array, " k"]:
        def initial(y):
            return self.problem.initial_condition(y).astype(y.dtype)

        value = field(x) - initial(x)
        if not self.weight:
            return value
        gradient = jax.jacfwd(field)(x) - jax.jacfwd(initial)(x)
        return jnp.concatenate([value, self.weight * gradient.reshape(-1)])

    def boundary(self, field: Field, x: Float[Array, " d"]) -> Float[Array, " b"]:
        return jnp.zeros((0,), x.dtype)

    @property
    def boundary_weight(self) -> float:
        return 0.0
