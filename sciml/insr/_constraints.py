r"""Boundary conditions of the 2-D elastic body, enforced as soft penalties.

A constraint is met where its residual is zero; `Elasticity2D` draws boundary
points on every constraint's face (or at its pin) and adds
`λ/N_b Σ_b ‖c(x_b)‖²` to the step objective (the paper's Dirichlet penalty,
weight `λ` ~ 1e3–1e4). A prescribed displacement `d` is applied as `s(t) d`
with the problem's load ramp `s(t)`.

- [`Clamp`][sciml.insr.Clamp]: `u = d` on a face (both components);
- [`Roller`][sciml.insr.Roller]: `n·u = d` on a face, tangential motion free;
- [`Pin`][sciml.insr.Pin]: `u = d` at one point (removes rigid motions).

Faces of the reference rectangle are named `"left"` (`x = lower₀`),
`"right"` (`x = upper₀`), `"bottom"` (`y = lower₁`), `"top"` (`y = upper₁`).
"""

from __future__ import annotations

import abc
from typing import Any, ClassVar

import equinox as eqx
import jax
import jax.numpy as jnp
from jaxtyping import Array, Float, PRNGKeyArray

from .._checks import check_pair


FACES = ("left", "right", "bottom", "top")


def _check_face(face: Any) -> str:
    if face not in FACES:
        raise ValueError(f"`face` must be one of {FACES}, got {face!r}.")
    return face


def face_axis_value(face: str, lower: tuple, upper: tuple) -> tuple[int, float]:
    """`(axis, coordinate)` of a face: the face is `x[axis] = coordinate`."""
    axis = 0 if face in ("left", "right") else 1
    value = lower[axis] if face in ("left", "bottom") else upper[axis]
    return axis, value


class AbstractConstraint(eqx.Module):
    """Base of the boundary constraints: points to sample, where they apply,
    and the residual `(size,)` of the displacement there."""

    size: eqx.AbstractClassVar[int]

    @abc.abstractmethod
    def sample(
        self, key: PRNGKeyArray, n: int, lower: tuple, upper: tuple, dtype: Any
    ) -> Float[Array, "n 2"]:
        """`n` points where the constraint applies."""

    @abc.abstractmethod
    def applies(self, x: Float[Array, " 2"], lower: tuple, upper: tuple) -> Array:
        """Whether `x` (a sampled boundary point) belongs to this constraint."""

    @abc.abstractmethod
    def residual(self, u: Float[Array, " 2"], scale: Any) -> Float[Array, " size"]:
        """The residual of the displacement `u` at load scale `scale`."""


class _Face(AbstractConstraint):
    face: eqx.AbstractVar[str]

    def sample(self, key, n, lower, upper, dtype):
        axis, value = face_axis_value(self.face, lower, upper)
        other = 1 - axis
        along = jax.random.uniform(key, (n,), dtype, minval=lower[other], maxval=upper[other])
        fixed = jnp.full((n,), value, dtype)
        return jnp.stack([fixed, along] if axis == 0 else [along, fixed], axis=1)

    def applies(self, x, lower, upper):
        axis, value = face_axis_value(self.face, lower, upper)
        return x[axis] == jnp.asarray(value, x.dtype)


class Clamp(_Face):
    """`u = s(t)·displacement` on `face` (both components).

    **Arguments:** `face` (`"left"`, `"right"`, `"bottom"`, `"top"`);
    `displacement` (two numbers, default `(0, 0)`).
    """

    face: str = eqx.field(static=True)
    displacement: tuple[float, float] = eqx.field(static=True)
    size: ClassVar[int] = 2

    def __init__(self, face: str, displacement: Any = (0.0, 0.0)):
        self.face = _check_face(face)
        self.displacement = check_pair("displacement", displacement)

    def residual(self, u, scale):
        return u - scale * jnp.asarray(self.displacement, u.dtype)


class Roller(_Face):
    """`n·u = s(t)·displacement` on `face` (the normal component; tangential
    motion free).

    **Arguments:** `face`; `displacement` (a number along the face's normal
    axis, `+x` for left/right and `+y` for bottom/top; default 0).
    """

    face: str = eqx.field(static=True)
    displacement: float = eqx.field(static=True)
    size: ClassVar[int] = 1

    def __init__(self, face: str, displacement: float = 0.0):
        self.face = _check_face(face)
        if not (isinstance(displacement, int | float) and jnp.isfinite(displacement)):
            raise ValueError(f"`displacement` must be a finite number, got {displacement!r}.")
        self.displacement = float(displacement)

    def residual(self, u, scale):
        axis = 0 if self.face in ("left", "right") else 1
        return (u[axis] - scale * self.displacement)[None]


class Pin(AbstractConstraint):
    """`u = s(t)·displacement` at the reference point `point`.

    **Arguments:** `point` (two numbers on the body); `displacement` (default `(0, 0)`).
    """

    point: tuple[float, float] = eqx.field(static=True)
    displacement: tuple[float, float] = eqx.field(static=True)
    size: ClassVar[int] = 2

    def __init__(self, point: Any, displacement: Any = (0.0, 0.0)):
        self.point = check_pair("point", point)
        self.displacement = check_pair("displacement", displacement)

    def sample(self, key, n, lower, upper, dtype):
        return jnp.broadcast_to(jnp.asarray(self.point, dtype), (n, 2))

    def applies(self, x, lower, upper):
        return jnp.all(x == jnp.asarray(self.point, x.dtype))

    def residual(self, u, scale):
        return u - scale * jnp.asarray(self.displacement, u.dtype)


def fixes(constraint: AbstractConstraint) -> tuple[bool, bool]:
    """Which displacement components `constraint` fixes (a roller: its
    face's normal one; a clamp or pin: both)."""
    if isinstance(constraint, Roller):
        axis = 0 if constraint.face in ("left", "right") else 1
        return (axis == 0, axis == 1)
    return (True, True)


def component_distances(
    constraint: AbstractConstraint, lower: tuple, upper: tuple, x: Float[Array, " 2"]
) -> Float[Array, " 2"]:
    """`(2,)` distances of `x` to one constraint, per displacement component:
    for each component it fixes, the distance to its face divided by the
    body's length along that axis (signed) or the squared scaled distance to
    its pin, zero where the constraint applies; one for the components it
    leaves free."""
    scale = jnp.asarray([u - lo for lo, u in zip(lower, upper)], x.dtype)
    if isinstance(constraint, Pin):
        distance = jnp.sum(((x - jnp.asarray(constraint.point, x.dtype)) / scale) ** 2)
    else:
        axis, value = face_axis_value(constraint.face, lower, upper)
        distance = (x[axis] - value) / scale[axis]
    return jnp.where(jnp.asarray(fixes(constraint)), distance, 1.0)


def boundary_factor(
    constraints: tuple, lower: tuple, upper: tuple, x: Float[Array, " 2"]
) -> Float[Array, " 2"]:
    """`φ(x)` `(2,)`: per component, the product of `component_distances` over
    the constraints, zero on every face (or pin) fixing that component."""
    out = jnp.ones((2,), x.dtype)
    for c in constraints:
        out = out * component_distances(c, lower, upper, x)
    return out


def is_homogeneous(constraints: tuple) -> bool:
    """Whether every constraint prescribes zero displacement."""
    return all(not any(jnp.atleast_1d(jnp.asarray(c.displacement)) != 0) for c in constraints)


def check_homogeneous(constraints: tuple) -> None:
    """Raises `ValueError` unless every constraint prescribes zero displacement
    (what distance-function factors alone impose exactly)."""
    for c in constraints:
        if not is_homogeneous((c,)):
            raise ValueError(
                "ExactBoundaryField imposes zero displacements only; "
                f"{type(c).__name__} prescribes displacement={c.displacement!r}. "
                "Use LiftedField (Elasticity2D(exact_boundary=True).constrain does) for "
                "prescribed displacements."
            )


class ExactBoundaryField(eqx.Module):
    """A displacement field that meets zero-displacement constraints exactly:
    `u(x) = φ(x) ⊙ N(x)`, with `φ_c(x)` the product, over the constraints
    fixing component `c`, of the distance to the constraint's face (divided by
    the body's length along that axis; squared distance for a pin). `φ_c`
    vanishes on every constrained face, so `u` meets the constraints for any
    network `N: (2,) -> (2,)` and the step needs no penalty rows.

    **Arguments:** `network`; `constraints` (Clamp / Roller / Pin, zero
    displacement); `lower`, `upper` (the reference rectangle).
    """

    network: Any
    constraints: tuple[AbstractConstraint, ...] = eqx.field(static=True)
    lower: tuple[float, float] = eqx.field(static=True)
    upper: tuple[float, float] = eqx.field(static=True)

    def __check_init__(self):
        check_homogeneous(self.constraints)

    def factor(self, x: Float[Array, " 2"]) -> Float[Array, " 2"]:
        """`φ(x)`, `(2,)`."""
        return boundary_factor(self.constraints, self.lower, self.upper, x)

    def __call__(self, x: Float[Array, " 2"]) -> Float[Array, " 2"]:
        return self.factor(x) * self.network(x)
