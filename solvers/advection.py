r"""1-D linear advection `∂ₜu + a∂ₓu = 0` on a uniform grid: Crank–Nicolson steppers.

The grid baselines of the INSR comparison (Chen et al., ICML 2023): nodes
`x_i = lower + i h`, `i = 0..n−1`. Dirichlet (`periodic=False`): `h = L/(n−1)`,
both end nodes held at 0. Periodic: `h = L/n` (node `n` is node `0`). In time,
Crank–Nicolson (second order, unconditionally stable for these operators):

$$\Big(I - \tfrac{\Delta t}{2} D\Big) u^{n+1} = \Big(I + \tfrac{\Delta t}{2} D\Big) u^n,$$

with the spatial operator `D ≈ −a∂ₓ`:

- [`UpwindCN`][solvers.advection.UpwindCN]: first-order upwind,
  `(Du)_i = −a(u_i − u_{i−1})/h` for `a > 0` (the paper's grid baseline;
  numerical diffusion `ah/2`);
- [`CentralCN`][solvers.advection.CentralCN]: second-order central,
  `(Du)_i = −a(u_{i+1} − u_{i−1})/(2h)` (no numerical diffusion, dispersive).

The step matrix `(I − Δt D/2)⁻¹(I + Δt D/2)` is formed once (dense, `n × n`);
a step is one matrix–vector product. Memory of the representation: `n` values.
"""

from __future__ import annotations

import equinox as eqx
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float

from ._checks import check_finite
from .stepping import AbstractStepper


__all__ = ["CentralCN", "UpwindCN", "advection_grid", "advection_operator", "crank_nicolson_matrix"]


def advection_grid(n: int, lower: float, upper: float, *, periodic: bool) -> np.ndarray:
    """The `n` node positions (see the module docstring)."""
    if periodic:
        return lower + (upper - lower) * np.arange(n) / n
    return np.linspace(lower, upper, n)


def advection_operator(
    n: int, h: float, velocity: float, *, scheme: str, periodic: bool
) -> np.ndarray:
    """The `n × n` matrix `D ≈ −a∂ₓ` for `scheme` `"upwind"` (first order, upwind
    side of the sign of `a`) or `"central"` (second order); Dirichlet rows of
    the end nodes are zero."""
    if scheme not in ("upwind", "central"):
        raise ValueError(f"`scheme` must be 'upwind' or 'central', got {scheme!r}.")
    i = np.arange(n)
    D = np.zeros((n, n))
    if scheme == "central":
        D[i, (i + 1) % n] -= velocity / (2 * h)
        D[i, (i - 1) % n] += velocity / (2 * h)
    elif velocity >= 0:
        D[i, i] -= velocity / h
        D[i, (i - 1) % n] += velocity / h
    else:
        D[i, i] += velocity / h
        D[i, (i + 1) % n] -= velocity / h
    if not periodic:
        D[0, :] = 0
        D[-1, :] = 0
    return D


def crank_nicolson_matrix(D: np.ndarray, dt: float) -> np.ndarray:
    """`(I − Δt D/2)⁻¹ (I + Δt D/2)`."""
    eye = np.eye(D.shape[0])
    return np.linalg.solve(eye - 0.5 * dt * D, eye + 0.5 * dt * D)


class _AdvectionCN(AbstractStepper):
    matrix: Float[Array, "n n"]
    dt: float = eqx.field(static=True)
    n: int = eqx.field(static=True)
    periodic: bool = eqx.field(static=True)

    def _build(self, scheme, n, lower, upper, velocity, dt, periodic, dtype):
        if isinstance(n, bool) or not isinstance(n, int) or n < 3:
            raise ValueError(f"`n` must be an integer >= 3, got {n!r}.")
        if not (np.isfinite(dt) and dt > 0):
            raise ValueError(f"`dt` must be finite and > 0, got {dt!r}.")
        if not upper > lower:
            raise ValueError(f"need `lower` < `upper`, got {lower!r}, {upper!r}.")
        h = (upper - lower) / (n if periodic else n - 1)
        D = advection_operator(n, h, float(velocity), scheme=scheme, periodic=periodic)
        self.matrix = jnp.asarray(crank_nicolson_matrix(D, float(dt)), dtype)
        self.dt, self.n, self.periodic = float(dt), n, bool(periodic)

    def check(self, u):
        if jnp.shape(u) != (1, self.n):
            raise ValueError(
                f"`u` must have shape (1, {self.n}) (one channel), got {jnp.shape(u)}."
            )
        check_finite("u", u)

    def step_state(self, state):
        return (self.matrix @ state[0].astype(self.matrix.dtype))[None].astype(state.dtype)


class UpwindCN(_AdvectionCN):
    """Crank–Nicolson with first-order upwind differences: one field `(1, n)`
    per step. The paper's 1-D grid baseline.

    **Arguments:** `n` (nodes), `lower`, `upper`, `velocity` (`a`), `dt`,
    `periodic` (default False: Dirichlet 0 at both ends), `dtype` (default: JAX's default float).
    """

    def __init__(self, n, lower=-2.0, upper=2.0, velocity=0.25, *, dt, periodic=False, dtype=None):
        self._build("upwind", n, lower, upper, velocity, dt, periodic, dtype)


class CentralCN(_AdvectionCN):
    """Crank–Nicolson with second-order central differences: one field `(1, n)`
    per step (second order in space and time).

    **Arguments:** as [`UpwindCN`][solvers.advection.UpwindCN].
    """

    def __init__(self, n, lower=-2.0, upper=2.0, velocity=0.25, *, dt, periodic=False, dtype=None):
        self._build("central", n, lower, upper, velocity, dt, periodic, dtype)
