"""Differential operators of a field on one point by autodiff, and the wall
normal of the box `[−1, 1]²` (the domain of the fluid problems in network units).

A field is any callable on one point `(d,) -> (C,)`; the operators act on it
at a point `x`, so a residual built from them is vmapped over the points.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from jaxtyping import Array, Float

from ._problem import Field


def laplacian(field: Field, x: Float[Array, " d"]) -> Float[Array, " C"]:
    """`Δf(x)` of a field `(d,) -> (C,)` by forward-over-forward autodiff."""
    hessian = jax.jacfwd(jax.jacfwd(field))(x)  # (C, d, d)
    return jnp.trace(hessian, axis1=-2, axis2=-1)


def divergence(field: Field, x: Float[Array, " d"]) -> Float[Array, ""]:
    """`∇·f(x)` of a field `(d,) -> (d,)`."""
    return jnp.trace(jax.jacfwd(field)(x))


def gradient(field: Field, x: Float[Array, " d"]) -> Float[Array, " d"]:
    """`∇f(x)` of a scalar field `(d,) -> (1,)`."""
    return jax.jacfwd(field)(x)[0]


def wall_normal(x: Float[Array, " 2"]) -> Float[Array, " 2"]:
    """The outward unit normal of the wall of `[−1, 1]²` nearest to `x`."""
    distance = 1 - jnp.abs(x)
    axis = jnp.argmin(distance)
    return jnp.where(jnp.arange(2) == axis, jnp.sign(x), 0).astype(x.dtype)
