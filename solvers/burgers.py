r"""1-D viscous Burgers equation on the periodic unit interval.

$$\partial_t u + \partial_x (u^2/2) = \nu\, \partial_{xx} u, \qquad x \in [0, 1) \text{ periodic},$$

the FNO 1-D benchmark (Li et al., ICLR 2021: `ν = 0.1`, `u_0 ~ N(0, 625(−Δ + 25 I)^{−2})`,
map `u_0 ↦ u(·, 1)`). Pseudo-spectral on `x_i = i/s` (`s` even) with the
nonlinear term dealiased by the 2/3 rule, integrated by the exponential time
differencing fourth-order Runge–Kutta scheme ETDRK4 (Cox & Matthews 2002), with
its coefficients evaluated by contour integrals (Kassam & Trefethen 2005), so
the stiff diffusion is exact and the scheme is fourth order in `dt`. JAX: jit,
vmap over initial conditions, float32/float64 (the dtype of `u0`).

**Nesting:** the grid at `s` is every second point of the grid at `2s`, and the
random initial condition is the same function at every resolution.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float

from ._grf import periodic_grf_1d


__all__ = ["BurgersParams", "SHARED_KEYS", "cole_hopf", "make_dataset", "random_initial", "solve"]

SHARED_KEYS = ("times",)


@dataclasses.dataclass(frozen=True)
class BurgersParams:
    """Solver settings: `viscosity` ν > 0, time step `dt` > 0, `dealias` (2/3
    rule on the nonlinear term, default True)."""

    viscosity: float = 0.1
    dt: float = 1e-3
    dealias: bool = True

    def __post_init__(self):
        if not (isinstance(self.viscosity, (int, float)) and self.viscosity > 0):
            raise ValueError(f"viscosity must be a positive number, got {self.viscosity!r}.")
        if not (isinstance(self.dt, (int, float)) and self.dt > 0):
            raise ValueError(f"dt must be a positive number, got {self.dt!r}.")


def _check_resolution(s, name="resolution"):
    if not isinstance(s, (int, np.integer)) or s < 4 or s % 2:
        raise ValueError(f"{name} must be an even integer >= 4, got {s!r}.")


def _etdrk4_coefficients(s: int, params: BurgersParams, n_contour: int = 64):
    """ETDRK4 coefficients (float64 numpy, rfft layout)."""
    k = np.fft.rfftfreq(s) * s
    lin = -params.viscosity * (2 * np.pi * k) ** 2
    h = params.dt
    roots = np.exp(1j * np.pi * (np.arange(1, n_contour + 1) - 0.5) / n_contour)
    lr = h * lin[:, None] + roots[None, :]
    mean = lambda z: np.real(np.mean(z, axis=1))  # noqa: E731
    return {
        "e": np.exp(h * lin),
        "e2": np.exp(h * lin / 2),
        "q": h * mean((np.exp(lr / 2) - 1) / lr),
        "f1": h * mean((-4 - lr + np.exp(lr) * (4 - 3 * lr + lr**2)) / lr**3),
        "f2": h * mean((2 + lr + np.exp(lr) * (-2 + lr)) / lr**3),
        "f3": h * mean((-4 - 3 * lr - lr**2 + np.exp(lr) * (4 - lr)) / lr**3),
        "g": -0.5j * 2 * np.pi * k * ((3 * k < s) if params.dealias else np.ones_like(k)),
    }


def _solve_one(u0, params: BurgersParams, increments):
    s = u0.shape[-1]
    cdtype = jnp.result_type(u0.dtype, jnp.complex64)
    c = {name: jnp.asarray(v, cdtype) for name, v in _etdrk4_coefficients(s, params).items()}

    def nonlin(v):
        return c["g"] * jnp.fft.rfft(jnp.fft.irfft(v, n=s) ** 2)

    def step(_, v):
        nv = nonlin(v)
        a = c["e2"] * v + c["q"] * nv
        na = nonlin(a)
        b = c["e2"] * v + c["q"] * na
        nb = nonlin(b)
        cc = c["e2"] * a + c["q"] * (2 * nb - nv)
        nc = nonlin(cc)
        return c["e"] * v + nv * c["f1"] + 2 * (na + nb) * c["f2"] + nc * c["f3"]

    def record(v, count):
        v = jax.lax.fori_loop(0, count, step, v)
        return v, jnp.fft.irfft(v, n=s)

    return jax.lax.scan(record, jnp.fft.rfft(u0), increments)[1]


@eqx.filter_jit
def _solve_batch(u0, params, increments):
    return jax.vmap(_solve_one, in_axes=(0, None, None))(u0, params, increments)


def solve(
    u0: Float[Array | np.ndarray, "*batch s"],
    params: BurgersParams,
    record_times: Sequence[float] | np.ndarray,
) -> Float[Array, "*batch n_records s"]:
    """Integrates from `u0` (t = 0) and returns `u` at `record_times`.

    **Arguments:**

    - `u0`: `(s,)` or `(..., s)` on `x_i = i/s`, `s` even; float32 or float64.
    - `params`: [`BurgersParams`][solvers.burgers.BurgersParams].
    - `record_times`: non-decreasing multiples of `params.dt`.

    **Returns:** `(..., n_records, s)`.
    """
    u0 = jnp.asarray(u0)
    if u0.ndim < 1 or not jnp.issubdtype(u0.dtype, jnp.floating):
        raise ValueError(f"u0 must be a real floating array (..., s), got {u0.shape} {u0.dtype}.")
    _check_resolution(u0.shape[-1], "u0.shape[-1]")
    times = np.asarray(record_times, dtype=float).reshape(-1)
    if times.size == 0 or np.any(times < 0) or np.any(np.diff(times) < 0):
        raise ValueError(f"record_times must be non-empty, >= 0 and non-decreasing, got {times}.")
    steps = np.rint(times / params.dt).astype(np.int64)
    if not np.allclose(steps * params.dt, times, rtol=1e-9, atol=1e-12):
        raise ValueError(f"record_times must be integer multiples of dt={params.dt}, got {times}.")
    increments = jnp.asarray(np.diff(np.concatenate([[0], steps])))
    flat = u0.reshape(-1, u0.shape[-1])
    out = _solve_batch(flat, params, increments)
    return out.reshape((*u0.shape[:-1], *out.shape[1:]))


def random_initial(
    key: jax.Array,
    n: int,
    resolution: int,
    *,
    alpha: float = 2.0,
    tau: float = 5.0,
    sigma: float = 25.0,
    dtype=None,
) -> Float[Array, "n s"]:
    """`n` initial conditions from `N(0, sigma² (−Δ + tau² I)^(−alpha))`, by
    default the FNO benchmark's `625 (−Δ + 25 I)^{−2}`. Sample `i` uses
    `fold_in(key, i)` and is the same function at every resolution."""
    _check_resolution(resolution)
    return _grf_batch(key, range(n), resolution, alpha, tau, sigma, dtype)


def _grf_batch(key, indices, resolution, alpha, tau, sigma, dtype):
    fields = [
        periodic_grf_1d(
            jax.random.fold_in(key, int(i)),
            resolution,
            alpha=alpha,
            tau=tau,
            sigma=sigma,
            dtype=dtype,
        )
        for i in indices
    ]
    dtype = jnp.result_type(float) if dtype is None else dtype
    return jnp.stack(fields) if fields else jnp.zeros((0, *(resolution,) * 1), dtype)


def cole_hopf(
    x: np.ndarray, t: float, viscosity: float, eps: float = 0.5, k: int = 1
) -> np.ndarray:
    """Exact periodic solution `u = −2ν φ_x / φ` with
    `φ = 1 + eps·exp(−4π²k²νt) cos(2πkx)` (`|eps| < 1`), from the Cole–Hopf
    transform (`φ` solves the heat equation)."""
    decay = eps * np.exp(-4 * np.pi**2 * k**2 * viscosity * t)
    phi = 1 + decay * np.cos(2 * np.pi * k * x)
    phi_x = -2 * np.pi * k * decay * np.sin(2 * np.pi * k * x)
    return -2 * viscosity * phi_x / phi


def make_dataset(
    n: int,
    resolution: int,
    *,
    seed: int,
    viscosity: float = 0.1,
    t_final: float = 1.0,
    n_records: int = 1,
    dt: float = 1e-3,
    start: int = 0,
) -> dict[str, np.ndarray]:
    """Burgers trajectories from FNO-benchmark random initial conditions.

    Sample `i` depends only on `(seed, start + i)`.

    **Returns:** `{"inputs": u0 (n, s), "outputs": u (n, n_records, s) at
    t_final·j/n_records, j = 1..n_records, "times": (n_records,)}`.
    """
    params = BurgersParams(viscosity=viscosity, dt=dt)
    _check_resolution(resolution)
    if n_records < 1:
        raise ValueError(f"n_records must be >= 1, got {n_records!r}.")
    times = t_final * np.arange(1, n_records + 1) / n_records
    key = jax.random.key(seed)
    u0 = _grf_batch(key, range(start, start + n), resolution, 2.0, 5.0, 25.0, None)
    out = np.asarray(solve(u0, params, times)) if n else np.zeros((0, n_records, resolution))
    if not np.all(np.isfinite(out)):
        raise FloatingPointError(f"the Burgers solution blew up; lower dt (now {dt}).")
    return {"inputs": np.asarray(u0), "outputs": out, "times": times}
