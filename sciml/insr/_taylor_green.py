r"""2-D Taylor–Green flow, the INSR paper's incompressible-fluid example.

Incompressible Navier–Stokes (`ν = 0`: Euler) with `ρ = 1` on the box
`[0, 2π]²` with free-slip walls:

$$\partial_t u + (u\cdot\nabla)u = -\nabla p + \nu\Delta u,\qquad \nabla\cdot u = 0,
\qquad u\cdot n = 0 \text{ on the walls}.$$

The Taylor–Green vortex is an exact solution:

$$u = (\sin x\cos y,\ -\cos x\sin y)\,e^{-2\nu t},\qquad
p = \tfrac14(\cos 2x + \cos 2y)\,e^{-4\nu t}.$$

**Units (the paper's convention).** The network input is `X ∈ [−1, 1]²`,
mapped to `x = L(X + 1)`, `L = π`; time `t` is physical. The fields hold
everything in network units:

- velocity `U(X) = u(x)/L` (`= dX/dt`, the paper's `TG/π`), a field `(2,) -> (2,)`;
- pressure `P(X)`, a field `(2,) -> (1,)`, in the splitting's convention
  `U ← U* − ∇_X P` (`ρ` and `Δt` absorbed): `P = Δt p/L²` up to a constant.

In these units `∂ₜU = −(U·∇_X)U + (ν/L²)Δ_X U − ∇_X p/L²`. The paper's error
metric is in `[0, 2π]` units: compare `L·U` with `u` (per-component MSE).

Free slip is a soft penalty `U·n = 0` (weight 1) on points in bands of
half-width `1e-4` inside the four walls, as the paper's.
"""

from __future__ import annotations

import math
from typing import Any

import equinox as eqx
import jax
import jax.numpy as jnp
from jaxtyping import Array, Float, PRNGKeyArray

from ._differential import laplacian, wall_normal
from ._problem import AbstractIncompressibleProblem, Field


LENGTH = math.pi  # x = LENGTH (X + 1)


def taylor_green_velocity(x: Float[Array, "... 2"], t: Any, viscosity: float) -> Array:
    """`u(t, x)` in physical units on `[0, 2π]²`, `(..., 2) -> (..., 2)`."""
    decay = jnp.exp(-2 * viscosity * t)
    return decay * jnp.stack(
        [jnp.sin(x[..., 0]) * jnp.cos(x[..., 1]), -jnp.cos(x[..., 0]) * jnp.sin(x[..., 1])], -1
    )


def taylor_green_pressure(x: Float[Array, "... 2"], t: Any, viscosity: float) -> Array:
    """`p(t, x)` in physical units on `[0, 2π]²`, `(..., 2) -> (...,)`."""
    decay = jnp.exp(-4 * viscosity * t)
    return decay * 0.25 * (jnp.cos(2 * x[..., 0]) + jnp.cos(2 * x[..., 1]))


class TaylorGreen2D(AbstractIncompressibleProblem):
    """Taylor–Green flow on `[−1, 1]²` (network units, see the module docstring)
    for a velocity field `(2,) -> (2,)`; the pressure field is `(2,) -> (1,)`.

    **Arguments:** `viscosity` (`ν ≥ 0` in `[0, 2π]` units; 0: Euler, the
    paper's); `boundary_band` (1e-4) and `boundary_weight` (1.0) of the
    free-slip penalty.

    Stepped by [`Splitting`][sciml.insr.Splitting] only: the integrators of
    `∂ₜU = F(U)` have no pressure projection and would not keep `∇·U = 0`.
    """

    viscosity: float = eqx.field(static=True)
    boundary_band: float = eqx.field(static=True)
    boundary_weight: float = eqx.field(static=True)
    length: float = eqx.field(static=True)
    in_size: int = eqx.field(static=True)
    out_size: int = eqx.field(static=True)

    def __init__(
        self,
        viscosity: float = 0.0,
        *,
        boundary_band: float = 1e-4,
        boundary_weight: float = 1.0,
    ):
        if not (isinstance(viscosity, int | float) and math.isfinite(viscosity) and viscosity >= 0):
            raise ValueError(
                f"`viscosity` must be a finite number >= 0 (0: inviscid Euler), got {viscosity!r}."
            )
        if not (0 < boundary_band < 1 and boundary_weight >= 0):
            raise ValueError(
                "`boundary_band` must be in (0, 1) and `boundary_weight` >= 0, got "
                f"{boundary_band!r}, {boundary_weight!r}."
            )
        self.viscosity = float(viscosity)
        self.boundary_band, self.boundary_weight = float(boundary_band), float(boundary_weight)
        self.length = LENGTH
        self.in_size, self.out_size = 2, 2

    def to_physical(self, x: Float[Array, "... 2"]) -> Float[Array, "... 2"]:
        """`x = L(X + 1)`: network coordinates to `[0, 2π]²`."""
        return self.length * (x + 1)

    def rhs(self, field: Field, t: Any, x: Float[Array, " 2"]) -> Float[Array, " 2"]:
        """`−(U·∇)U + (ν/L²)ΔU` (network units) — the momentum equation without
        its pressure gradient, which the splitting's projection supplies."""
        u = field(x)
        jac = jax.jacfwd(field)(x)
        out = -jac @ u
        if self.viscosity:
            out = out + self.viscosity / self.length**2 * laplacian(field, x)
        return out

    def initial_condition(self, x: Float[Array, " 2"]) -> Float[Array, " 2"]:
        """`U(0, X)`."""
        return self.exact(0.0, x)

    def exact(self, t: Any, x: Float[Array, " 2"]) -> Float[Array, " 2"]:
        """The velocity `U(t, X) = u(t, L(X + 1))/L` in network units."""
        return taylor_green_velocity(self.to_physical(x), t, self.viscosity) / self.length

    def exact_pressure(self, t: Any, x: Float[Array, " 2"]) -> Float[Array, " 1"]:
        """The physical pressure `p(t, L(X + 1))` (the splitting's `P` is
        `Δt p/L²` up to a constant)."""
        return taylor_green_pressure(self.to_physical(x), t, self.viscosity)[None]

    def sample_interior(self, key: PRNGKeyArray, n: int, dtype: Any) -> Float[Array, "n 2"]:
        """`n` points uniform on `[−1, 1]²`."""
        return jax.random.uniform(key, (n, 2), dtype, minval=-1.0, maxval=1.0)

    def sample_boundary(self, key: PRNGKeyArray, n: int, dtype: Any) -> Float[Array, "n 2"]:
        """`n` points in bands of half-width `boundary_band` inside the four
        walls, a quarter on each (uniform along the wall)."""
        k_along, k_depth = jax.random.split(key)
        along = jax.random.uniform(k_along, (n,), dtype, minval=-1.0, maxval=1.0)
        depth = 1 - jax.random.uniform(k_depth, (n,), dtype, maxval=self.boundary_band)
        wall = jnp.arange(n) % 4  # 0: x = −1, 1: x = +1, 2: y = −1, 3: y = +1
        sign = jnp.where(wall % 2 == 0, -1.0, 1.0).astype(dtype)
        across = sign * depth
        return jnp.where(
            (wall < 2)[:, None],
            jnp.stack([across, along], -1),
            jnp.stack([along, across], -1),
        )

    def boundary_residual(self, field: Field, t: Any, x: Float[Array, " 2"]) -> Float[Array, " 1"]:
        """Free slip: the normal velocity `U·n` at a wall point."""
        return (field(x) @ wall_normal(x))[None]
