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
values next to each node; or explicit Euler (`method="explicit"`, stable iff
`r ≤ 1/4`). The implicit solve is exact: `L` is diagonalised by the orthonormal
sine transform `S` (`L = S Λ S`, `Λ_kl = 4 sin²(kπh/2) + 4 sin²(lπh/2)`), applied
as dense matrix products. Written in JAX (jit, vmap over parameter sets,
float32/float64).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float


__all__ = [
    "HeatParams",
    "SHARED_KEYS",
    "advance",
    "initial_field",
    "make_dataset",
    "solve",
]

SHARED_KEYS = ("times",)


@dataclasses.dataclass(frozen=True)
class HeatParams:
    """Solver settings: `diffusivity` κ > 0, time step `dt` > 0, `method`
    `"implicit"` (implicit Euler, unconditionally stable) or `"explicit"`
    (forward Euler, needs `κ dt (s−1)² ≤ 1/4`)."""

    diffusivity: float = 1.0
    dt: float = 1e-3
    method: str = "implicit"

    def __post_init__(self):
        if not (isinstance(self.diffusivity, (int, float)) and self.diffusivity > 0):
            raise ValueError(f"diffusivity must be a positive number, got {self.diffusivity!r}.")
        if not (isinstance(self.dt, (int, float)) and self.dt > 0):
            raise ValueError(f"dt must be a positive number, got {self.dt!r}.")
        if self.method not in ("implicit", "explicit"):
            raise ValueError(f"method must be 'implicit' or 'explicit', got {self.method!r}.")


def _check_resolution(s) -> None:
    if not isinstance(s, (int, np.integer)) or s < 3:
        raise ValueError(
            f"resolution must be an integer >= 3 (nodes per side, boundary included), got {s!r}."
        )


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
    theta: Float[Array | np.ndarray, "*batch 5"], resolution: int
) -> Float[Array, "*batch s s"]:
    """The temperature at t = 0: `T0` inside, the boundary temperatures on the
    sides (x along axis 0: `T_left` is row 0, `T_bottom` column 0)."""
    _check_resolution(resolution)
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


def _make_step(s, params: HeatParams, dtype):
    r = params.diffusivity * params.dt * (s - 1) ** 2
    if params.method == "explicit":
        if r > 0.25 + 1e-12:
            raise ValueError(
                f"explicit Euler is unstable for r = diffusivity*dt*(s-1)^2 = {r:.4g} > 1/4; "
                "lower dt or use method='implicit'."
            )

        def step(interior, bterm):
            return interior - r * (_laplacian_h2(interior) - bterm)

        return step
    basis, lam = _sine_basis(s - 2)
    basis = jnp.asarray(basis, dtype)
    denom = jnp.asarray(1 + r * lam, dtype)

    def step(interior, bterm):
        rhs = interior + r * bterm
        return basis @ ((basis @ rhs @ basis) / denom) @ basis

    return step


def _run_one(field, params: HeatParams, increments):
    s = field.shape[-1]
    step = _make_step(s, params, field.dtype)
    bterm = _boundary_term(field)

    def record(interior, count):
        interior = jax.lax.fori_loop(0, count, lambda _, u: step(u, bterm), interior)
        return interior, field.at[1:-1, 1:-1].set(interior)

    return jax.lax.scan(record, field[1:-1, 1:-1], increments)[1]


@eqx.filter_jit
def _run_batch(fields, params, increments):
    return jax.vmap(_run_one, in_axes=(0, None, None))(fields, params, increments)


def _steps(record_times, dt):
    times = np.asarray(record_times, dtype=float).reshape(-1)
    if times.size == 0 or np.any(times < 0) or np.any(np.diff(times) < 0):
        raise ValueError(f"record_times must be non-empty, >= 0 and non-decreasing, got {times}.")
    steps = np.rint(times / dt).astype(np.int64)
    if not np.allclose(steps * dt, times, rtol=1e-9, atol=1e-12):
        raise ValueError(f"record_times must be integer multiples of dt={dt}, got {times}.")
    return np.diff(np.concatenate([[0], steps]))


def advance(
    field: Float[Array | np.ndarray, "*batch s s"], params: HeatParams, n_steps: int
) -> Float[Array, "*batch s s"]:
    """Advances a temperature field (boundary values included and kept fixed) by
    `n_steps` steps, for streaming a simulation step by step or chunk by chunk."""
    field = jnp.asarray(field)
    if field.ndim < 2 or field.shape[-1] != field.shape[-2]:
        raise ValueError(f"field must have shape (..., s, s), got {field.shape}.")
    _check_resolution(field.shape[-1])
    flat = field.reshape(-1, *field.shape[-2:])
    out = _run_batch(flat, params, jnp.asarray([int(n_steps)]))[:, 0]
    return out.reshape(field.shape)


def solve(
    theta: Float[Array | np.ndarray, "*batch 5"],
    resolution: int,
    params: HeatParams,
    record_times: Sequence[float] | np.ndarray,
) -> Float[Array, "*batch n_records s s"]:
    """Temperature fields at `record_times` for the parameters `theta`.

    **Arguments:**

    - `theta`: `(..., 5)` = `(T0, T_left, T_right, T_bottom, T_top)`; its dtype
      sets the precision.
    - `resolution`: nodes per side `s` (boundary included), `>= 3`.
    - `params`: [`HeatParams`][solvers.heat.HeatParams].
    - `record_times`: non-decreasing multiples of `params.dt`.

    **Returns:** `(..., n_records, s, s)`, boundary nodes included.
    """
    theta = jnp.asarray(theta)
    if not jnp.issubdtype(theta.dtype, jnp.floating):
        theta = theta.astype(jnp.result_type(float))
    _check_theta(theta)
    fields = initial_field(theta, resolution).reshape(-1, resolution, resolution)
    out = _run_batch(fields, params, jnp.asarray(_steps(record_times, params.dt)))
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
    _check_resolution(resolution)
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
