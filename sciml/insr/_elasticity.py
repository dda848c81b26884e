r"""2-D hyperelastic elastodynamics, the INSR paper's elasticity examples.

The field is the displacement `u = f_θ: (2,) -> (2,)` of a reference
rectangle, the deformation `q(X) = X + u(X)`, `F = ∂q/∂X`. Each sample of
the body carries mass `2k` (kinetic energy `k‖q̇‖²`), elastic energy
`ψ(F) = a Σⱼ(σⱼ − 1)² + b (det F − 1)²` and external force `f`, so that

$$2k\,\ddot q = \nabla_X\!\cdot\frac{\partial\psi}{\partial F} + f,$$

stepped by the paper's implicit-Euler incremental potential
([`IncrementalPotential`][sciml.insr.IncrementalPotential]). Boundary
conditions ([`Clamp`][sciml.insr.Clamp], [`Roller`][sciml.insr.Roller],
[`Pin`][sciml.insr.Pin]) are soft penalties of weight `boundary_weight`; an
optional floor `y = floor` pushes back with the penalty `k_c d²/2` of a
sample `d` below it. Uniform interior points are drawn fresh by the step
solvers, boundary points on the constrained faces. With `exact_boundary` the
constraints hold exactly instead, for any weights: zero displacements by a
distance factor ([`ExactBoundaryField`][sciml.insr.ExactBoundaryField]),
prescribed ones by a lifting ([`LiftedField`][sciml.insr.LiftedField]).

Scenes ([`Elasticity2D.scene`][sciml.insr.Elasticity2D.scene]):

| name | set-up | analytic answer |
| --- | --- | --- |
| `"free_fall"` | no constraints, force `f` every step | translation `dₙ = (f/2k)Δt² n(n+1)/2` |
| `"roller_stretch"` | rollers on `x = ±1`, right face moved `+2`, pin at `(−1, 0)`; quasi-static; a solver check, not a comparison (P1 holds its answer exactly) | homogeneous: `λ₂ = (a + bλ₁)/(a + bλ₁²)` |
| `"clamped_stretch"` | the paper's `elasticity2Dstretch`: the square `[−1, 1]²`, both `x = ±1` faces clamped in both components, the right one moved `(2, 0)`, `a = 1`, `b = 10³`; quasi-static with a load ramp | none (stress singularities at the four clamped corners): a converged mesh (`solvers.hyperelastic_fem`) |
| `"column"` | rollers left / top / bottom (uniaxial strain), released from its first fixed–free mode | `ω₁ = πc/(2L)`, `c = √((a+b)/k)`; energy × `1/(1 + ω₁²Δt²)` per step |
| `"floor"` | a square falling under gravity onto the floor | comes to rest above `y = floor − O(√(weight/k_c))` |
"""

from __future__ import annotations

import math
from typing import Any, ClassVar

import equinox as eqx
import jax
import jax.numpy as jnp
from jaxtyping import Array, Float, PRNGKeyArray

from .._checks import check_pair, check_positive_int, check_real
from .._deprecated import refuse_renamed_scene
from ._constraints import AbstractConstraint, Clamp, ExactBoundaryField, Pin, Roller, is_homogeneous
from ._hyperelastic import energy_density
from ._lifting import LiftedField, with_load
from ._problem import AbstractElasticProblem, AbstractGridProblem, Field


SCENES = ("free_fall", "roller_stretch", "clamped_stretch", "column", "floor")


class Elasticity2D(AbstractElasticProblem, AbstractGridProblem):
    """A hyperelastic rectangle `[lower, upper]` whose displacement field `(2,) -> (2,)`
    is stepped by [`IncrementalPotential`][sciml.insr.IncrementalPotential].

    **Arguments:**

    - `lower`, `upper`: corners of the reference rectangle (default `(−1, −1)`, `(1, 1)`).
    - `a`, `b`: ARAP and volume moduli of `ψ` (`a > 0`, `b ≥ 0`).
    - `mass`: `k > 0`, half the mass per sample (kinetic energy `k‖q̇‖²`).
    - `force`: external force per sample `f` (two numbers, default `(0, 0)`).
    - `n_force_steps`: apply `f` in the first this many steps only (`None`: always).
    - `constraints`: a tuple of [`Clamp`][sciml.insr.Clamp] /
      [`Roller`][sciml.insr.Roller] / [`Pin`][sciml.insr.Pin].
    - `boundary_weight`: `λ` of the constraint penalty (default 1e3).
    - `floor`: `y` of a floor plane (`None`: none); `contact_stiffness`: `k_c > 0`.
    - `ramp_time`: prescribed displacements grow linearly to their value at
      this time (`0`, the default: applied in full from the first step).
    - `exact_boundary`: impose the constraints exactly (wrap the network with
      [`constrain`][sciml.insr.Elasticity2D.constrain]: a distance factor, plus
      a lifting for prescribed displacements; no boundary points, no
      penalty). Default False: the paper's penalty.
    - `initial_amplitude`: initial displacement `A sin(π(X₀ − lower₀)/(2L₀)) e_x`,
      the first fixed–free mode along `x` (`L₀ = upper₀ − lower₀`; default 0,
      the body at rest in its reference shape). Initial velocity is zero.
    """

    lower: tuple[float, float] = eqx.field(static=True)
    upper: tuple[float, float] = eqx.field(static=True)
    a: float = eqx.field(static=True)
    b: float = eqx.field(static=True)
    mass: float = eqx.field(static=True)
    force: tuple[float, float] = eqx.field(static=True)
    n_force_steps: int | None = eqx.field(static=True)
    constraints: tuple[AbstractConstraint, ...] = eqx.field(static=True)
    boundary_weight: float = eqx.field(static=True)
    floor: float | None = eqx.field(static=True)
    contact_stiffness: float = eqx.field(static=True)
    ramp_time: float = eqx.field(static=True)
    initial_amplitude: float = eqx.field(static=True)
    exact_boundary: bool = eqx.field(static=True)
    in_size: int = eqx.field(static=True)
    out_size: int = eqx.field(static=True)
    # the initial fit matches gradients too (`InitialObjective`): the energy is in ∇u
    initial_gradient_weight: ClassVar[float] = 1.0

    def __init__(
        self,
        lower: Any = (-1.0, -1.0),
        upper: Any = (1.0, 1.0),
        *,
        a: float = 1.0,
        b: float = 10.0,
        mass: float = 1.0,
        force: Any = (0.0, 0.0),
        n_force_steps: int | None = None,
        constraints: Any = (),
        boundary_weight: float = 1e3,
        floor: float | None = None,
        contact_stiffness: float = 1e4,
        ramp_time: float = 0.0,
        initial_amplitude: float = 0.0,
        exact_boundary: bool = False,
    ):
        self.lower, self.upper = check_pair("lower", lower), check_pair("upper", upper)
        if not all(u > lo for lo, u in zip(self.lower, self.upper)):
            raise ValueError(f"need `lower` < `upper` per axis, got {lower!r} and {upper!r}.")
        self.a = check_real("a", a, positive=True)
        self.b = check_real("b", b, minimum=0)
        self.mass = check_real("mass", mass, positive=True)
        self.force = check_pair("force", force)
        self.n_force_steps = check_positive_int("n_force_steps", n_force_steps, allow_none=True)
        constraints = tuple(constraints)
        for c in constraints:
            if not isinstance(c, AbstractConstraint):
                raise ValueError(
                    "`constraints` must be Clamp / Roller / Pin constraints, got "
                    f"{type(c).__name__}."
                )
        self.constraints = constraints
        self.boundary_weight = check_real("boundary_weight", boundary_weight)
        if self.boundary_weight < 0:
            raise ValueError(f"`boundary_weight` must be >= 0, got {boundary_weight!r}.")
        self.floor = check_real("floor", floor, allow_none=True)
        self.contact_stiffness = check_real("contact_stiffness", contact_stiffness, positive=True)
        self.ramp_time = check_real("ramp_time", ramp_time)
        if self.ramp_time < 0:
            raise ValueError(f"`ramp_time` must be >= 0, got {ramp_time!r}.")
        self.initial_amplitude = check_real("initial_amplitude", initial_amplitude)
        if not isinstance(exact_boundary, bool):
            raise ValueError(f"`exact_boundary` must be True or False, got {exact_boundary!r}.")
        self.exact_boundary = exact_boundary
        self.in_size, self.out_size = 2, 2

    @classmethod
    def scene(cls, name: str, **overrides: Any) -> Elasticity2D:
        """One of the paper's / verification scenes (table in the module
        docstring) by `name` in `SCENES`; `overrides` replace any constructor
        argument. The two stretches are meant for
        `IncrementalPotential(quasi_static=True)` with a `ramp_time`."""
        refuse_renamed_scene(name)
        if name not in SCENES:
            raise ValueError(f"`name` must be one of {SCENES}, got {name!r}.")
        settings: dict[str, Any] = {
            "free_fall": dict(lower=(-1.0, -0.5), upper=(1.0, 0.5), force=(0.0, -1.0)),
            "roller_stretch": dict(
                lower=(-1.0, -0.5),
                upper=(1.0, 0.5),
                a=1.0,
                b=1e3,
                constraints=(Roller("left"), Roller("right", 2.0), Pin((-1.0, 0.0))),
                boundary_weight=1e4,
            ),
            "clamped_stretch": dict(
                a=1.0,
                b=1e3,
                constraints=(Clamp("left"), Clamp("right", (2.0, 0.0))),
                boundary_weight=1e4,
            ),
            "column": dict(
                lower=(-1.0, -0.25),
                upper=(1.0, 0.25),
                a=1.0,
                b=9.0,
                constraints=(Roller("left"), Roller("bottom"), Roller("top")),
                initial_amplitude=0.1,
            ),
            "floor": dict(
                lower=(-0.5, -0.5),
                upper=(0.5, 0.5),
                a=10.0,
                b=100.0,
                force=(0.0, -2.0),
                floor=-0.8,
                contact_stiffness=1e4,
            ),
        }[name]
        settings.update(overrides)
        return cls(**settings)

    # --- physics -----------------------------------------------------------------

    def force_scale(self, steps_taken: Any) -> Array:
        """`1` while the external force acts (step index `< n_force_steps`), else `0`."""
        if self.n_force_steps is None:
            return jnp.ones_like(steps_taken)
        return jnp.where(steps_taken < self.n_force_steps, 1.0, 0.0).astype(steps_taken.dtype)

    def load_scale(self, t: Any) -> Any:
        """The ramp `s(t)` of prescribed displacements: `min(1, t/ramp_time)` (1 if no ramp)."""
        if self.ramp_time == 0:
            return 1.0
        return jnp.minimum(1.0, t / self.ramp_time)

    def deformation_gradient(self, field: Field, x: Float[Array, " 2"]) -> Float[Array, "2 2"]:
        """`F = I + ∂u/∂X` at `x` (forward-mode Jacobian of the displacement)."""
        return jnp.eye(2, dtype=x.dtype) + jax.jacfwd(field)(x)

    def energy_density(self, field: Field, x: Float[Array, " 2"]) -> Float[Array, ""]:
        """`ψ(F(x))` per sample."""
        return energy_density(self.deformation_gradient(field, x), self.a, self.b)

    def rhs(self, field: Field, t: Any, x: Float[Array, " 2"]) -> Float[Array, " 2"]:
        """The acceleration `(∇·∂ψ/∂F + f)/(2k)` of the field (full force; no
        contact). Not used by the incremental potential, which minimises the
        energy instead; for explicit checks."""

        def stress(y):
            return jax.grad(energy_density)(self.deformation_gradient(field, y), self.a, self.b)

        divergence = jnp.trace(jax.jacfwd(stress)(x), axis1=1, axis2=2)
        return (divergence + jnp.asarray(self.force, x.dtype)) / (2 * self.mass)

    def initial_condition(self, x: Float[Array, " 2"]) -> Float[Array, " 2"]:
        """`A sin(π(X₀ − lower₀)/(2L₀)) e_x` (zero unless `initial_amplitude` is set)."""
        length = self.upper[0] - self.lower[0]
        ux = self.initial_amplitude * jnp.sin(jnp.pi * (x[0] - self.lower[0]) / (2 * length))
        return jnp.stack([ux, jnp.zeros_like(ux)])

    # --- sampling and constraints ------------------------------------------------

    def sample_interior(self, key: PRNGKeyArray, n: int, dtype: Any) -> Float[Array, "n 2"]:
        """`n` points uniform on the reference rectangle."""
        lo, hi = jnp.asarray(self.lower, dtype), jnp.asarray(self.upper, dtype)
        return jax.random.uniform(key, (n, 2), dtype, minval=lo, maxval=hi)

    def grid_interior(self, n: int, dtype: Any) -> Float[Array, "m 2"]:
        """The cell midpoints of an `nx × ny` grid of the rectangle with
        `nx·ny ≤ n` and cells about square (a fixed quadrature grid)."""
        lengths = [u - lo for lo, u in zip(self.lower, self.upper)]
        ny = max(1, round(math.sqrt(n * lengths[1] / lengths[0])))
        nx = max(1, n // ny)
        axes = [
            lo + length * (jnp.arange(m, dtype=dtype) + 0.5) / m
            for lo, length, m in zip(self.lower, lengths, (nx, ny))
        ]
        return jnp.stack(jnp.meshgrid(*axes, indexing="ij"), -1).reshape(-1, 2)

    def constrain(self, network: Any) -> Any:
        """`network` wrapped so that it meets the constraints exactly when
        `exact_boundary`, else `network` itself: an
        [`ExactBoundaryField`][sciml.insr.ExactBoundaryField] for zero
        displacements, else a [`LiftedField`][sciml.insr.LiftedField] at the
        load scale of `t = 0`."""
        if not self.exact_boundary:
            return network
        if is_homogeneous(self.constraints):
            return ExactBoundaryField(network, self.constraints, self.lower, self.upper)
        dtype = jax.tree_util.tree_leaves(eqx.filter(network, eqx.is_inexact_array))[0].dtype
        load = jnp.asarray(self.load_scale(0.0), dtype)
        return LiftedField(network, load, self.constraints, self.lower, self.upper)

    def prescribe(self, field: Any, t: Any) -> Any:
        """`field` with its prescribed displacements at time `t`: a
        `LiftedField`'s load set to `s(t)`; any other field as it is."""
        return with_load(field, self.load_scale(t))

    def sample_boundary(self, key: PRNGKeyArray, n: int, dtype: Any) -> Float[Array, "m 2"]:
        """`⌈n/c⌉` points for each of the `c` constraints (on its face or at its
        pin); none without constraints or with `exact_boundary`."""
        if not self.constraints or self.exact_boundary:
            return jnp.zeros((0, 2), dtype)
        per = -(-n // len(self.constraints))
        keys = jax.random.split(key, len(self.constraints))
        return jnp.concatenate(
            [
                c.sample(k, per, self.lower, self.upper, dtype)
                for c, k in zip(self.constraints, keys)
            ]
        )

    def boundary_residual(self, field: Field, t: Any, x: Float[Array, " 2"]) -> Float[Array, " b"]:
        """Every constraint's residual at `x`, zero for those `x` is not on."""
        u = field(x)
        scale = self.load_scale(t)
        parts = [
            jnp.where(c.applies(x, self.lower, self.upper), c.residual(u, scale), 0.0)
            for c in self.constraints
        ]
        return jnp.concatenate(parts) if parts else jnp.zeros((0,), x.dtype)
