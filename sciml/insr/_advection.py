r"""1-D linear advection, the INSR paper's first example.

$$\partial_t u + a\,\partial_x u = 0 \quad\text{on } [\ell, r],\qquad
u(0, x) = \exp\!\Big(-\frac{(x-\mu)^2}{2\sigma^2}\Big),$$

with `a = 0.25`, `[ℓ, r] = [−2, 2]`, `μ = −1.5`, `σ = 0.1` in the paper.
Dirichlet variant (the paper's): `u = 0` at both ends, enforced by a soft
penalty on points drawn in bands of half-width `1e-4` inside the ends (weight 1);
the exact solution is `u₀(x − at)` while the pulse stays away from the ends.
Periodic variant: no boundary term (use a periodic field, e.g.
[`PeriodicEmbedding`][sciml.insr.PeriodicEmbedding]); the exact solution is
`u₀(((x − at − ℓ) mod L) + ℓ)`, `L = r − ℓ`.
"""

from __future__ import annotations

import math
from typing import Any

import equinox as eqx
import jax
import jax.numpy as jnp
from jaxtyping import Array, Float, PRNGKeyArray

from ._problem import AbstractEvolutionProblem, Field


def gaussian(x: Array, center: float, width: float) -> Array:
    """`exp(−(x − center)²/(2 width²))`, elementwise."""
    return jnp.exp(-0.5 * ((x - center) / width) ** 2)


def advection_exact(
    t: Any,
    x: Array,
    *,
    velocity: float,
    center: float,
    width: float,
    lower: float,
    upper: float,
    periodic: bool,
) -> Array:
    """The exact solution of 1-D advection of a Gaussian, elementwise in `x`."""
    shifted = x - velocity * t
    if periodic:
        shifted = jnp.mod(shifted - lower, upper - lower) + lower
    return gaussian(shifted, center, width)


class Advection1D(AbstractEvolutionProblem):
    """`∂ₜu + a ∂ₓu = 0` on `[lower, upper]` for a scalar field `(1,) -> (1,)`.

    **Arguments:** `velocity` (`a`, 0.25); `lower`, `upper` (−2, 2); `center`,
    `width` (`μ = −1.5`, `σ = 0.1`) of the Gaussian initial condition;
    `periodic` (False: the paper's Dirichlet `u = 0` at both ends);
    `boundary_band` (1e-4) and `boundary_weight` (1.0) of the soft penalty.

    Stepped by the one-step integrators of `∂ₜu = F(u)`
    ([`AbstractPointwiseIntegrator`][sciml.insr.AbstractPointwiseIntegrator]:
    [`ExplicitEuler`][sciml.insr.ExplicitEuler], [`ImplicitEuler`][sciml.insr.ImplicitEuler],
    [`Midpoint`][sciml.insr.Midpoint]).
    """

    velocity: float = eqx.field(static=True)
    lower: float = eqx.field(static=True)
    upper: float = eqx.field(static=True)
    center: float = eqx.field(static=True)
    width: float = eqx.field(static=True)
    periodic: bool = eqx.field(static=True)
    boundary_band: float = eqx.field(static=True)
    boundary_weight: float = eqx.field(static=True)
    in_size: int = eqx.field(static=True)
    out_size: int = eqx.field(static=True)

    def __init__(
        self,
        velocity: float = 0.25,
        lower: float = -2.0,
        upper: float = 2.0,
        *,
        center: float = -1.5,
        width: float = 0.1,
        periodic: bool = False,
        boundary_band: float = 1e-4,
        boundary_weight: float = 1.0,
    ):
        for name, value in (("velocity", velocity), ("lower", lower), ("upper", upper)):
            if not (isinstance(value, int | float) and math.isfinite(value)):
                raise ValueError(f"`{name}` must be a finite number, got {value!r}.")
        if not upper > lower:
            raise ValueError(f"need `lower` < `upper`, got {lower!r} and {upper!r}.")
        if not (width > 0 and boundary_band > 0 and boundary_weight >= 0):
            raise ValueError(
                "`width` and `boundary_band` must be > 0 and `boundary_weight` >= 0, got "
                f"{width!r}, {boundary_band!r}, {boundary_weight!r}."
            )
        if not isinstance(periodic, bool):
            raise ValueError(f"`periodic` must be True or False, got {periodic!r}.")
        self.velocity, self.lower, self.upper = float(velocity), float(lower), float(upper)
        self.center, self.width, self.periodic = float(center), float(width), periodic
        self.boundary_band, self.boundary_weight = float(boundary_band), float(boundary_weight)
        self.in_size, self.out_size = 1, 1

    def rhs(self, field: Field, t: Any, x: Float[Array, " 1"]) -> Float[Array, " 1"]:
        """`F(u)(x) = −a ∂ₓu(x)` (forward-mode derivative of the field)."""
        _, du = jax.jvp(field, (x,), (jnp.ones_like(x),))
        return -self.velocity * du

    def initial_condition(self, x: Float[Array, " 1"]) -> Float[Array, " 1"]:
        """The Gaussian pulse."""
        return gaussian(x, self.center, self.width)

    def exact(self, t: Any, x: Float[Array, " 1"]) -> Float[Array, " 1"]:
        """`u₀(x − at)` (wrapped into the domain when periodic)."""
        return advection_exact(
            t,
            x,
            velocity=self.velocity,
            center=self.center,
            width=self.width,
            lower=self.lower,
            upper=self.upper,
            periodic=self.periodic,
        )

    def sample_interior(self, key: PRNGKeyArray, n: int, dtype: Any) -> Float[Array, "n 1"]:
        """`n` points uniform on `[lower, upper]`."""
        return jax.random.uniform(key, (n, 1), dtype, minval=self.lower, maxval=self.upper)

    def sample_boundary(self, key: PRNGKeyArray, n: int, dtype: Any) -> Float[Array, "m 1"]:
        """Half of `n` points in `[lower, lower + band]`, half in
        `[upper − band, upper]`; none when periodic."""
        if self.periodic:
            return jnp.zeros((0, 1), dtype)
        offset = jax.random.uniform(key, (n, 1), dtype, maxval=self.boundary_band)
        left = jnp.arange(n)[:, None] % 2 == 0
        return jnp.where(left, self.lower + offset, self.upper - offset)

    def boundary_residual(self, field: Field, t: Any, x: Float[Array, " 1"]) -> Float[Array, " 1"]:
        """`u(x) − 0` (Dirichlet); unused when periodic."""
        return field(x)
