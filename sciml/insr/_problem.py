r"""The abstract PDE problem a neural field is stepped on.

A problem is `∂ₜu = F(u)` on a domain, with an initial condition and
boundary conditions. It provides per-point pieces, and an integrator
([`sciml.insr.Midpoint`][] etc.) turns them into the per-step residual. Each
method takes a **field** — any callable on one point `(d,) -> (C,)` — so
spatial derivatives are taken by autodiff of that callable.

A new problem is a final subclass of one of the kinds below that sets
`in_size`, `out_size` and `boundary_weight` and implements the abstract
methods. The kind says which integrators step it: each integrator declares the
kinds it serves (`AbstractIntegrator.problems`), so a new integrator needs no
edit of the problems, and no problem imports an integrator.

| kind | what the integrator may rely on | stepped by |
| --- | --- | --- |
| `AbstractEvolutionProblem` | `rhs` is the whole of `F` | the one-step integrators (`Midpoint`, ...) |
| `AbstractIncompressibleProblem` | `rhs` without the pressure gradient; `viscosity`, `length` | `Splitting` |
| `AbstractElasticProblem` | the hyperelastic energy's pieces | `IncrementalPotential` |

A problem with a fixed quadrature grid also subclasses `AbstractGridProblem`
(`Collocation(n_grid=...)` reads it).
"""

from __future__ import annotations

import abc
from collections.abc import Callable
from typing import Any, ClassVar

import equinox as eqx
import jax
from jaxtyping import Array, Float, PRNGKeyArray

from .._checks import check_finite


Field = Callable[[Array], Array]


def check_finite_weights(field: Any, name: str = "field") -> None:
    """Raises `ValueError` naming `name` and the array if a floating-point
    array of `field` holds NaN or Inf: a step started from such weights only
    fails inside its solver, with a message that names neither. Traced
    weights (inside `jit`) pass unchecked, as in `sciml._checks.check_finite`."""
    params = eqx.filter(field, eqx.is_inexact_array)
    for path, leaf in jax.tree_util.tree_leaves_with_path(params):
        try:
            check_finite(f"{name}{jax.tree_util.keystr(path)}", leaf)
        except ValueError as error:
            raise ValueError(
                f"the weights of `{name}` must be finite: {error} Re-initialise the field, "
                "or look at the fit or step that produced it."
            ) from None


class AbstractProblem(eqx.Module):
    """Base of the problems: `∂ₜu = F(u)` for a field `u: (in_size,) -> (out_size,)`.

    **Attributes:** `in_size` (`d`), `out_size` (`C`), `boundary_weight`
    (`λ`, the weight of the soft boundary penalty); class attribute
    `initial_gradient_weight` (`ℓ` of [`InitialObjective`][sciml.insr.InitialObjective],
    default 0: the initial fit matches values only).
    """

    in_size: eqx.AbstractVar[int]
    out_size: eqx.AbstractVar[int]
    boundary_weight: eqx.AbstractVar[float]
    initial_gradient_weight: ClassVar[float] = 0.0

    @abc.abstractmethod
    def rhs(self, field: Field, t: Any, x: Float[Array, " d"]) -> Float[Array, " C"]:
        """`F(u)(x)` at time `t` for the field `u` (a callable on one point)."""

    @abc.abstractmethod
    def initial_condition(self, x: Float[Array, " d"]) -> Float[Array, " C"]:
        """`u(0, x)`."""

    @abc.abstractmethod
    def sample_interior(self, key: PRNGKeyArray, n: int, dtype: Any) -> Float[Array, "n d"]:
        """`n` uniform random points in the domain."""

    @abc.abstractmethod
    def sample_boundary(self, key: PRNGKeyArray, n: int, dtype: Any) -> Float[Array, "m d"]:
        """Random points for the boundary penalty (`m = 0` when there is none)."""

    @abc.abstractmethod
    def boundary_residual(self, field: Field, t: Any, x: Float[Array, " d"]) -> Float[Array, " b"]:
        """The boundary condition's residual at a boundary point (`0` when met)."""

    def check_field(self, field: Any, name: str = "field") -> None:
        """Raises `ValueError` (at trace time) unless `field` maps `(in_size,)`
        to `(out_size,)`."""
        if not callable(field):
            raise ValueError(f"`{name}` must be a callable on one point, got {type(field)}.")
        point = jax.ShapeDtypeStruct((self.in_size,), jax.numpy.float32)
        try:
            out = eqx.filter_eval_shape(field, point)
        except Exception as error:  # noqa: BLE001 - re-raised with the fix
            raise ValueError(
                f"`{name}` could not be evaluated on one point of shape ({self.in_size},) "
                f"for {type(self).__name__}: {error}"
            ) from error
        if getattr(out, "shape", None) != (self.out_size,):
            raise ValueError(
                f"`{name}` must map a point ({self.in_size},) to ({self.out_size},) for "
                f"{type(self).__name__}, got output shape {getattr(out, 'shape', out)}."
            )


class AbstractEvolutionProblem(AbstractProblem):
    """A problem `∂ₜu = F(u)` whose `rhs` is the whole of `F` (no constraint
    besides the boundary penalty): the one-step integrators
    ([`AbstractPointwiseIntegrator`][sciml.insr.AbstractPointwiseIntegrator])
    step it."""


class AbstractIncompressibleProblem(AbstractProblem):
    """Incompressible flow of a velocity field `(2,) -> (2,)` in network units:
    `rhs` is the momentum equation without its pressure gradient, which the
    pressure projection of [`Splitting`][sciml.insr.Splitting] supplies.

    **Attributes:** `viscosity` (`ν`), `length` (`L`, network to physical units).
    """

    viscosity: eqx.AbstractVar[float]
    length: eqx.AbstractVar[float]


class AbstractElasticProblem(AbstractProblem):
    """Hyperelastic elastodynamics of a displacement field, stepped by
    [`IncrementalPotential`][sciml.insr.IncrementalPotential], which reads
    these pieces of the energy.

    **Attributes:** `a`, `b` (moduli of `ψ`), `mass` (`k`), `force` (`f`),
    `floor` (`y` of a floor plane or `None`), `contact_stiffness` (`k_c`).
    """

    a: eqx.AbstractVar[float]
    b: eqx.AbstractVar[float]
    mass: eqx.AbstractVar[float]
    force: eqx.AbstractVar[tuple[float, float]]
    floor: eqx.AbstractVar[float | None]
    contact_stiffness: eqx.AbstractVar[float]

    @abc.abstractmethod
    def deformation_gradient(self, field: Field, x: Float[Array, " d"]) -> Float[Array, "d d"]:
        """`F = I + ∂u/∂X` at `x`."""

    @abc.abstractmethod
    def force_scale(self, steps_taken: Any) -> Array:
        """The factor of the external force after `steps_taken` steps."""

    @abc.abstractmethod
    def prescribe(self, field: Any, t: Any) -> Any:
        """`field` meeting the prescribed boundary displacements of time `t`
        (a field that imposes them exactly carries their load scale)."""


class AbstractGridProblem(AbstractProblem):
    """A problem with a fixed quadrature grid, which
    [`Collocation`][sciml.insr.Collocation]`(n_grid=...)` adds to the random points."""

    @abc.abstractmethod
    def grid_interior(self, n: int, dtype: Any) -> Float[Array, "m d"]:
        """At most `n` fixed interior points (e.g. cell midpoints of a grid)."""
