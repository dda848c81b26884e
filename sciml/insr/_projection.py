r"""The pressure sub-problem of the operator splitting: its per-point residuals.

Given the intermediate velocity `U*` and the step's initial velocity `Uⁿ`
(network units, `[−1, 1]²`), the pressure `P` (`ρ` and `Δt` absorbed) is the
least-squares solution of one of:

- [`StrongProjection`][sciml.insr.StrongProjection] (the paper's): residual
  `∇·U* − ΔP` per point plus a Neumann penalty `∂P/∂n = 0` on the walls
  (second derivatives of `P`; the problem's boundary weight);
- [`VariationalProjection`][sciml.insr.VariationalProjection]: residual
  `(U* − Uⁿ) − ∇P` (two components) per point; its least squares is
  `min_P ∫|U* − Uⁿ − ∇P|²`, whose Euler–Lagrange equation is
  `ΔP = ∇·(U* − Uⁿ)` with the natural condition `(∇P − U* + Uⁿ)·n = 0`
  (first derivatives only; no boundary term). For a divergence-free `Uⁿ`
  with `Uⁿ·n = 0` (orthogonal to every gradient) this is
  `min_P ∫|U* − ∇P|²`. Subtracting `Uⁿ` is a control variate: the residual
  of `U* − ∇P` keeps the whole divergence-free part of `U*` (`O(1)`) at its
  optimum, and its Monte-Carlo estimate on `N` points then perturbs `P` (an
  `O(Δt)` signal) by `O(|U|/√N)` — measured 450% relative error for
  `N = 1000`; that of `U* − Uⁿ − ∇P` is `O(Δt)`. The price: divergence that
  earlier steps left in `Uⁿ` is carried along, not removed as by the strong form.

[`Splitting`][sciml.insr.Splitting] takes one as `projection=`; the strings
`"strong"` and `"variational"` name them (`PROJECTIONS`).
"""

from __future__ import annotations

import abc
from typing import Any

import equinox as eqx
import jax.numpy as jnp
from jaxtyping import Array, Float

from ._differential import divergence, gradient, laplacian, wall_normal
from ._problem import AbstractProblem, Field


class AbstractProjection(eqx.Module):
    """Base of the pressure sub-problems: per-point `interior` and `boundary`
    residuals of the pressure field and the weight of the boundary term."""

    @abc.abstractmethod
    def interior(
        self, pressure: Field, velocity: Field, previous: Field, x: Float[Array, " 2"]
    ) -> Float[Array, " k"]:
        """The residual at an interior point `x` for the intermediate velocity
        `velocity` (`U*`) and the step's initial velocity `previous` (`Uⁿ`)."""

    @abc.abstractmethod
    def boundary(self, pressure: Field, x: Float[Array, " 2"]) -> Float[Array, " b"]:
        """The residual at a wall point `x`."""

    @abc.abstractmethod
    def boundary_weight(self, problem: AbstractProblem) -> float:
        """The weight of the boundary term for `problem`."""


class StrongProjection(AbstractProjection):
    """The paper's pressure Poisson residual `∇·U* − ΔP` with the Neumann
    penalty `∂P/∂n = 0` (weight: the problem's `boundary_weight`)."""

    def interior(self, pressure, velocity, previous, x):
        return (divergence(velocity, x) - laplacian(pressure, x)[0])[None]

    def boundary(self, pressure, x):
        return (gradient(pressure, x) @ wall_normal(x))[None]

    def boundary_weight(self, problem):
        return problem.boundary_weight


class VariationalProjection(AbstractProjection):
    """The first-derivative residual `U* − Uⁿ − ∇P`; no boundary term (its
    boundary condition is natural)."""

    def interior(self, pressure, velocity, previous, x):
        return velocity(x) - previous(x) - gradient(pressure, x)

    def boundary(self, pressure, x):
        return jnp.zeros((0,), x.dtype)

    def boundary_weight(self, problem):
        return 0.0


PROJECTIONS = {"strong": StrongProjection, "variational": VariationalProjection}


def as_projection(projection: Any) -> AbstractProjection:
    """`projection` itself if it is an `AbstractProjection`, the module a name of
    `PROJECTIONS` stands for, else a `ValueError` naming both forms."""
    if isinstance(projection, AbstractProjection):
        return projection
    if isinstance(projection, str) and projection in PROJECTIONS:
        return PROJECTIONS[projection]()
    raise ValueError(
        "`projection` must be StrongProjection() or VariationalProjection() (or one of "
        f"{', '.join(map(repr, PROJECTIONS))}), got {projection!r}."
    )
