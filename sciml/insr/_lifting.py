r"""Prescribed, non-zero boundary displacements imposed exactly: a lifting.

A field that meets `u = d_i` on the constraints `i` (faces or pins, each
fixing some displacement components) for any network `N` is

$$u(x) = s\,g(x) + \varphi(x)\odot N(x),$$

with `φ` the distance factor of
[`ExactBoundaryField`][sciml.insr.ExactBoundaryField] (zero on every
constraint), `s` the load scale of the problem's ramp and `g` a **lift**: a
smooth displacement equal to `d_i` on constraint `i`. Per component `c`, over
the constraints fixing it, `g` blends the prescribed values with the weights
of transfinite (inverse-distance) interpolation,

$$g_c(x) = \sum_i d_{i,c}\,w_i(x),\qquad
w_i = \frac{\prod_{j\ne i}|\varphi_j|}{\sum_k\prod_{j\ne k}|\varphi_j|},$$

so `w_i = 1` on constraint `i` and `0` on the others (Sukumar and Srivastava,
"Exact imposition of boundary conditions with distance functions in
physics-informed deep neural networks", CMAME 2022). For two clamped opposite
faces it is the linear interpolation between their displacements. Where two
constrained faces meet (a corner, where values that differ leave no right
answer) `g` is the mean of the values prescribed for that component.
"""

from __future__ import annotations

from typing import Any

import equinox as eqx
import jax
import jax.numpy as jnp
from jaxtyping import Array, Float

from ._constraints import AbstractConstraint, boundary_factor, component_distances, fixes


def _prescribed(constraint: AbstractConstraint, component: int) -> float:
    """The displacement `constraint` prescribes for `component` (a roller's
    number is its normal component)."""
    d = constraint.displacement
    return d[component] if isinstance(d, tuple) else d


def boundary_lift(
    constraints: tuple, lower: tuple, upper: tuple, x: Float[Array, " 2"]
) -> Float[Array, " 2"]:
    """The lift `g(x)` `(2,)` at full load (module docstring): the prescribed
    displacement on each constraint, blended in between."""
    out = []
    for c in range(2):
        fixing = [k for k in constraints if fixes(k)[c]]
        prescribed = [_prescribed(k, c) for k in fixing]
        if not any(prescribed):
            out.append(jnp.zeros((), x.dtype))
            continue
        values = jnp.asarray(prescribed, x.dtype)
        phi = jnp.stack([jnp.abs(component_distances(k, lower, upper, x)[c]) for k in fixing])
        # w_i ∝ Π_{j≠i} φ_j, zero on every constraint but i
        weights = jnp.stack([jnp.prod(jnp.delete(phi, i)) for i in range(len(fixing))])
        total = jnp.sum(weights)
        ok = total > 0  # where two constraints meet, the mean of their values
        blended = jnp.sum(values * weights) / jnp.where(ok, total, 1.0)
        out.append(jnp.where(ok, blended, jnp.mean(values)))
    return jnp.stack(out)


class LiftedField(eqx.Module):
    """A displacement field that meets prescribed displacements exactly:
    `u(x) = s·g(x) + φ(x) ⊙ N(x)` (module docstring). The load scale `s` is an
    array held outside the gradient (its Jacobian column is zero, so a step
    solver leaves it as it is); the problem sets it before each step
    ([`Elasticity2D.prescribe`][sciml.insr.Elasticity2D.prescribe]).

    **Arguments:** `network`; `constraints` (Clamp / Roller / Pin);
    `lower`, `upper` (the reference rectangle); `load` (a scalar array, `s`).
    """

    network: Any
    load: Float[Array, ""]
    constraints: tuple[AbstractConstraint, ...] = eqx.field(static=True)
    lower: tuple[float, float] = eqx.field(static=True)
    upper: tuple[float, float] = eqx.field(static=True)

    def __check_init__(self):
        if jnp.shape(self.load) != ():
            raise ValueError(f"`load` must be a scalar array, got shape {jnp.shape(self.load)}.")

    def factor(self, x: Float[Array, " 2"]) -> Float[Array, " 2"]:
        """`φ(x)`, `(2,)`."""
        return boundary_factor(self.constraints, self.lower, self.upper, x)

    def lift(self, x: Float[Array, " 2"]) -> Float[Array, " 2"]:
        """`g(x)` at full load, `(2,)`."""
        return boundary_lift(self.constraints, self.lower, self.upper, x)

    def __call__(self, x: Float[Array, " 2"]) -> Float[Array, " 2"]:
        load = jax.lax.stop_gradient(self.load).astype(x.dtype)
        return load * self.lift(x) + self.factor(x) * self.network(x)


def with_load(field: Any, load: Any) -> Any:
    """`field` with its load scale set to `load` if it is a `LiftedField`, else `field`."""
    if not isinstance(field, LiftedField):
        return field
    return eqx.tree_at(lambda f: f.load, field, jnp.asarray(load, field.load.dtype))
