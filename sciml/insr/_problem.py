r"""The abstract PDE problem a neural field is stepped on.

A problem is `∂ₜu = F(u)` on a domain, with an initial condition and
boundary conditions. It provides per-point pieces, and an integrator
([`sciml.insr.Midpoint`][] etc.) turns them into the per-step residual. Each
method takes a **field** — any callable on one point `(d,) -> (C,)` — so
spatial derivatives are taken by autodiff of that callable.

A new problem is a final subclass that sets `in_size`, `out_size`,
`boundary_weight` and the class attribute `integrators` (the integrator
classes it can be stepped with) and implements the abstract methods.
"""

from __future__ import annotations

import abc
from collections.abc import Callable
from typing import Any

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
    `integrators`: the integrator classes the problem can be stepped with
    (`integrate` refuses any other before it computes anything).
    """

    in_size: eqx.AbstractVar[int]
    out_size: eqx.AbstractVar[int]
    boundary_weight: eqx.AbstractVar[float]
    integrators: eqx.AbstractClassVar[tuple[type, ...]]

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
