r"""2-D heat equation on the unit square with constant boundary temperatures.

$$\partial_t T = \kappa \Delta T \ \text{in } (0,1)^2, \qquad
T = T_{\text{left}}, T_{\text{right}}, T_{\text{bottom}}, T_{\text{top}} \text{ on } x=0, x=1, y=0, y=1,
\qquad T(\cdot, 0) = T_0 \text{ inside},$$

the online-training use case (Meyer et al., ICML 2023): five parameters
`theta = (T0, T_left, T_right, T_bottom, T_top)`. Node grid `x_i = i/(s−1)`
including the boundary (`h = 1/(s−1)`; corner nodes hold the mean of their two
sides and enter no stencil), 5-point Laplacian on the `(s−2)²` interior nodes.

Time stepping: implicit Euler (default), `(I + r L) T^{n+1} = T^n + r B`, with
`r = κ dt / h²`, `L` the `h²`-scaled Dirichlet Laplacian and `B` the boundary
values next to each node ([`ImplicitEuler`][solvers.heat.ImplicitEuler]); or
explicit Euler ([`ExplicitEuler`][solvers.heat.ExplicitEuler], `method="explicit"`
in `HeatParams` and `make_dataset`, stable iff
`r ≤ 1/4`). The implicit solve is exact: `L` is diagonalised by the orthonormal
sine transform `S` (`L = S Λ S`, `Λ_kl = 4 sin²(kπh/2) + 4 sin²(lπh/2)`), applied
as dense matrix products. The solver is the one-sample stepper module
[`Heat`][solvers.heat.Heat] (`(1, s, s) -> (1, s, s)`, callers jit and vmap);
`solve`, `advance` and `make_dataset` are batched, jit-compiled conveniences
over it, in float32/float64.
"""

from __future__ import annotations

import abc
import dataclasses
import math
from collections.abc import Sequence
from typing import Any

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float

from ._batched import check_square_fields, record_batch, repeat_batch
from ._checks import check_finite
from ._grid import check_choice, check_dtype, check_field, check_positive, check_resolution
from .stepping import AbstractStepper


__all__ = [
    "AbstractHeatScheme",
    "ExplicitEuler",
    "Heat",
    "HeatParams",
    "ImplicitEuler",
    "SHARED_KEYS",
    "advance",
    "initial_field",
    "make_dataset",
    "solve",
]

SHARED_KEYS = ("times",)


_METHODS = ("implicit", "explicit")


@dataclasses.dataclass(frozen=True)
class HeatParams:
    """Solver settings: `diffusivity` κ > 0, time step `dt` > 0, `method`
    `"implicit"` (implicit Euler, unconditionally stable) or `"explicit"`
    (forward Euler, needs `κ dt (s−1)² ≤ 1/4`). The stepper
    [`Heat`][solvers.heat.Heat] takes the same names as keywords."""

    diffusivity: float = 1.0
    dt: float = 1e-3
    method: str = "implicit"

    def __post_init__(self):
        check_positive("diffusivity", self.diffusivity)
        check_positive("dt", self.dt)
        check_choice("method", self.method, _METHODS)


def _check_theta(theta):
    if theta.shape[-1:] != (5,):
        raise ValueError(
            "theta must have shape (..., 5): (T0, T_left, T_right, T_bottom, T_top), "
            f"got {theta.shape}."
        )


def _one_initial_field(theta, s):
    t0, left, right, bottom, top = (theta[i] for i in range(5))
    field = jnp.full((s, s), t0, theta.dtype)
    field = field.at[0, :].set(left).at[-1, :].set(right)
    field = field.at[:, 0].set(bottom).at[:, -1].set(top)
    field = field.at[0, 0].set(0.5 * (left + bottom)).at[0, -1].set(0.5 * (left + top))
    field = field.at[-1, 0].set(0.5 * (right + bottom)).at[-1, -1].set(0.5 * (right + top))
    return field


def initial_field(
    theta: Float[Array | np.ndarray, "*batch n_theta"], resolution: int
) -> Float[Array, "*batch s s"]:
    """The temperature at t = 0: `T0` inside, the boundary temperatures on the
    sides (x along axis 0: `T_left` is row 0, `T_bottom` column 0); `theta` has
    `n_theta = 5` entries `(T0, T_left, T_right, T_bottom, T_top)`."""
    check_resolution(resolution, periodic=False)
    theta = jnp.asarray(theta, jnp.result_type(float) if not hasattr(theta, "dtype") else None)
    _check_theta(theta)
    flat = theta.reshape(-1, 5)
    out = jax.vmap(lambda t: _one_initial_field(t, resolution))(flat)
    return out.reshape((*theta.shape[:-1], resolution, resolution))


def _sine_basis(n: int):
    j = np.arange(1, n + 1)
    basis = math.sqrt(2.0 / (n + 1)) * np.sin(np.pi * np.outer(j, j) / (n + 1))
    lam = 4 * np.sin(np.pi * j / (2 * (n + 1))) ** 2
    return basis, lam[:, None] + lam[None, :]


def _boundary_term(field):
    """Sum of the boundary neighbours of each interior node."""
    b = jnp.zeros_like(field[1:-1, 1:-1])
    b = b.at[0, :].add(field[0, 1:-1]).at[-1, :].add(field[-1, 1:-1])
    b = b.at[:, 0].add(field[1:-1, 0]).at[:, -1].add(field[1:-1, -1])
    return b


def _laplacian_h2(interior):
    """`L u` for the h²-scaled Dirichlet Laplacian with zero boundary."""
    p = jnp.pad(interior, 1)
    return 4 * interior - p[:-2, 1:-1] - p[2:, 1:-1] - p[1:-1, :-2] - p[1:-1, 2:]


class AbstractHeatScheme(eqx.Module):
    """A time-stepping scheme of [`Heat`][solvers.heat.Heat]: `init` builds its
    operators once per stepper, `step` advances the interior nodes."""

    @abc.abstractmethod
    def init(self, s: int, r: float, dtype) -> Any:
        """Operators for `s` nodes per side and `r = κ dt (s−1)²` (or `ValueError`)."""

    @abc.abstractmethod
    def step(
        self, operators: Any, interior: Float[Array, "m m"], bterm: Float[Array, "m m"], r: float
    ) -> Float[Array, "m m"]:
        """One step of the interior nodes given the boundary term."""


class ImplicitEuler(AbstractHeatScheme):
    """`(I + r L) T^{n+1} = T^n + r B`, solved exactly in the orthonormal sine
    basis (dense matrix products); unconditionally stable."""

    def init(self, s, r, dtype):
        basis, lam = _sine_basis(s - 2)
        return jnp.asarray(basis, dtype), jnp.asarray(1 + r * lam, dtype)

    def step(self, operators, interior, bterm, r):
        basis, denom = operators
        rhs = interior + r * bterm
        return basis @ ((basis @ rhs @ basis) / denom) @ basis


class ExplicitEuler(AbstractHeatScheme):
    """`T^{n+1} = T^n − r (L T^n − B)`; stable iff `r ≤ 1/4`, refused otherwise."""

    def init(self, s, r, dtype):
        if r > 0.25 + 1e-12:
            raise ValueError(
                f"explicit Euler is unstable for r = diffusivity*dt*(s-1)^2 = {r:.4g} "
                "> 1/4; lower dt or use method='implicit' (scheme=ImplicitEuler())."
            )
        return None

    def step(self, operators, interior, bterm, r):
        return interior - r * (_laplacian_h2(interior) - bterm)


_SCHEMES = {"implicit": ImplicitEuler, "explicit": ExplicitEuler}


class Heat(AbstractStepper):
    """One Euler step of the heat equation (module docstring) for one temperature
    field `(1, s, s)`, boundary nodes included and kept fixed.

    The state between steps is `(interior, boundary term, field)`: the boundary
    sums next to each interior node are formed once per run, as the interior
    alone evolves.

    **Arguments:**

    - `resolution`: nodes per side `s` (boundary included), `>= 3`.
    - `diffusivity`, `dt`: as in [`HeatParams`][solvers.heat.HeatParams].
    - `scheme`: [`ImplicitEuler()`][solvers.heat.ImplicitEuler] (default, `None`) or
      [`ExplicitEuler()`][solvers.heat.ExplicitEuler] (refused when
      `r = κ dt (s−1)² > 1/4`: unstable).
    - `dtype`: float32 or float64 (default: JAX's default float); the fields the
      stepper takes must have this dtype.
    """

    resolution: int = eqx.field(static=True)
    diffusivity: float = eqx.field(static=True)
    dt: float = eqx.field(static=True)
    scheme: AbstractHeatScheme
    r: float = eqx.field(static=True)
    operators: Any
    dtype: Any = eqx.field(static=True)

    def __init__(
        self,
        resolution: int,
        *,
        diffusivity: float = 1.0,
        dt: float = 1e-3,
        scheme=None,
        dtype=None,
    ):
        check_resolution(resolution, periodic=False)
        check_positive("diffusivity", diffusivity)
        check_positive("dt", dt)
        scheme = ImplicitEuler() if scheme is None else scheme
        if not isinstance(scheme, AbstractHeatScheme):
            raise ValueError(
                f"scheme must be ImplicitEuler() or ExplicitEuler() (an AbstractHeatScheme), "
                f"got {scheme!r}."
            )
        self.dtype = check_dtype(dtype)
        s = int(resolution)
        self.resolution, self.scheme = s, scheme
        self.diffusivity, self.dt = float(diffusivity), float(dt)
        self.r = self.diffusivity * self.dt * (s - 1) ** 2
        self.operators = scheme.init(s, self.r, self.dtype)

    @classmethod
    def from_params(cls, resolution: int, params: HeatParams, dtype=None) -> Heat:
        """The stepper of a [`HeatParams`][solvers.heat.HeatParams] (its `method`
        string names the scheme)."""
        return cls(
            resolution,
            diffusivity=params.diffusivity,
            dt=params.dt,
            scheme=_SCHEMES[params.method](),
            dtype=dtype,
        )

    def check(self, u):
        check_field(u, self.dtype, (self.resolution,) * 2)

    def to_state(self, u: Float[Array, "1 s s"]):
        return u[:, 1:-1, 1:-1], jax.vmap(_boundary_term)(u), u

    def from_state(self, state) -> Float[Array, "1 s s"]:
        interior, _, field = state
        return field.at[:, 1:-1, 1:-1].set(interior)

    def step_interior(
        self, interior: Float[Array, "m m"], bterm: Float[Array, "m m"]
    ) -> Float[Array, "m m"]:
        """One step of the interior nodes given the boundary term."""
        return self.scheme.step(self.operators, interior, bterm, self.r)

    def step_state(self, state):
        interior, bterm, field = state
        return jax.vmap(self.step_interior)(interior, bterm), bterm, field


def advance(
    field: Float[Array | np.ndarray, "*batch s1 s2"], params: HeatParams, n_steps: int
) -> Float[Array, "*batch s1 s2"]:
    """Advances a temperature field (boundary values included and kept fixed) by
    `n_steps` steps, for streaming a simulation step by step or chunk by chunk.

    A batched, jit-compiled convenience over
    [`repeat`][solvers.stepping.repeat]`(Heat(...), n_steps)`."""
    field = jnp.asarray(check_finite("field", field))
    check_square_fields(field, "field", periodic=False)
    s = field.shape[-1]
    stepper = Heat.from_params(s, params, field.dtype)
    return repeat_batch(stepper, field.reshape(-1, 1, s, s), n_steps).reshape(field.shape)


def solve(
    theta: Float[Array | np.ndarray, "*batch n_theta"],
    resolution: int,
    params: HeatParams,
    record_times: Sequence[float] | np.ndarray,
) -> Float[Array, "*batch n_records s s"]:
    """Temperature fields at `record_times` for the parameters `theta`.

    A batched, jit-compiled convenience over [`record`][solvers.stepping.record]
    with the stepper [`Heat`][solvers.heat.Heat].

    **Arguments:**

    - `theta`: `(..., 5)` = `(T0, T_left, T_right, T_bottom, T_top)`; its dtype
      sets the precision.
    - `resolution`: nodes per side `s` (boundary included), `>= 3`.
    - `params`: [`HeatParams`][solvers.heat.HeatParams].
    - `record_times`: non-decreasing multiples of `params.dt`.

    **Returns:** `(..., n_records, s, s)`, boundary nodes included.
    """
    theta = jnp.asarray(check_finite("theta", theta))
    if not jnp.issubdtype(theta.dtype, jnp.floating):
        theta = theta.astype(jnp.result_type(float))
    _check_theta(theta)
    s = resolution
    fields = initial_field(theta, s).reshape(-1, 1, s, s)
    stepper = Heat.from_params(s, params, fields.dtype)
    out = record_batch(stepper, fields, record_times)[:, :, 0]
    return out.reshape((*theta.shape[:-1], *out.shape[1:]))


def make_dataset(
    n: int,
    resolution: int,
    *,
    seed: int,
    diffusivity: float = 1.0,
    dt: float = 1e-3,
    n_steps: int = 100,
    record_every: int = 1,
    low: float = 0.0,
    high: float = 1.0,
    method: str = "implicit",
    start: int = 0,
) -> dict[str, np.ndarray]:
    """Heat trajectories for parameters drawn uniformly from `[low, high]^5`.

    Sample `i` draws `theta` from `numpy.random.default_rng((seed, start + i))`.

    **Returns:** `{"inputs": theta (n, 5), "outputs": (n, n_steps // record_every,
    s, s) temperatures at t = record_every·dt, 2·record_every·dt, …,
    "times": (n_records,)}`.
    """
    check_resolution(resolution, periodic=False)
    if not high > low:
        raise ValueError(f"need low < high, got low={low}, high={high}.")
    if n_steps < 1 or record_every < 1 or n_steps % record_every:
        raise ValueError(
            f"n_steps ({n_steps}) must be a positive multiple of record_every ({record_every})."
        )
    params = HeatParams(diffusivity=diffusivity, dt=dt, method=method)
    theta = np.array(
        [np.random.default_rng((seed, start + i)).uniform(low, high, 5) for i in range(n)]
    ).reshape(n, 5)
    times = dt * record_every * np.arange(1, n_steps // record_every + 1)
    dtype = jnp.result_type(float)
    outputs = (
        np.asarray(solve(jnp.asarray(theta, dtype), resolution, params, times))
        if n
        else np.zeros((0, times.size, resolution, resolution), dtype)
    )
    return {"inputs": theta.astype(dtype), "outputs": outputs, "times": times}
