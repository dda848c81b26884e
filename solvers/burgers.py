r"""1-D viscous Burgers equation on the periodic unit interval.

$$\partial_t u + \partial_x (u^2/2) = \nu\, \partial_{xx} u, \qquad x \in [0, 1) \text{ periodic},$$

the FNO 1-D benchmark (Li et al., ICLR 2021: `ν = 0.1`, `u_0 ~ N(0, 625(−Δ + 25 I)^{−2})`,
map `u_0 ↦ u(·, 1)`). Pseudo-spectral on `x_i = i/s` (`s` even) with the
nonlinear term dealiased by the 2/3 rule, integrated by the exponential time
differencing fourth-order Runge–Kutta scheme ETDRK4 (Cox & Matthews 2002), with
its coefficients evaluated by contour integrals (Kassam & Trefethen 2005), so
the stiff diffusion is exact and the scheme is fourth order in `dt`. The solver
is the one-sample stepper module [`Burgers`][solvers.burgers.Burgers]
(`(1, s) -> (1, s)`, callers jit and vmap); `solve` and `make_dataset` are
batched, jit-compiled conveniences over it, in float32/float64 (the dtype of `u0`).

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
from jaxtyping import Array, Complex, Float

from ._batched import record_batch
from ._checks import check_finite
from ._grf import grf_batch, periodic_grf_1d
from ._grid import (
    check_dtype,
    check_field,
    check_positive,
    check_resolution,
    dealias_mask,
    rfft_wavenumbers,
)
from .stepping import AbstractStepper


__all__ = [
    "Burgers",
    "BurgersParams",
    "SHARED_KEYS",
    "cole_hopf",
    "make_dataset",
    "random_initial",
    "solve",
]

SHARED_KEYS = ("times",)


@dataclasses.dataclass(frozen=True)
class BurgersParams:
    """Solver settings: `viscosity` ν > 0, time step `dt` > 0, `dealias` (2/3
    rule on the nonlinear term, default True). The stepper
    [`Burgers`][solvers.burgers.Burgers] takes the same names as keywords."""

    viscosity: float = 0.1
    dt: float = 1e-3
    dealias: bool = True

    def __post_init__(self):
        check_positive("viscosity", self.viscosity)
        check_positive("dt", self.dt)


def _etdrk4_coefficients(s: int, viscosity: float, dt: float, dealias: bool, n_contour: int):
    """ETDRK4 coefficients (float64 numpy, rfft layout)."""
    (k,) = rfft_wavenumbers(s, 1)
    lin = -viscosity * (2 * np.pi * k) ** 2
    h = dt
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
        "g": -0.5j * 2 * np.pi * k * dealias_mask(s, (k,), dealias),
    }


class Burgers(AbstractStepper):
    """One ETDRK4 step of viscous Burgers (module docstring) for one field `(1, s)`.

    The state between steps is the rfft of `u`, so
    [`rollout`][solvers.stepping.rollout], [`repeat`][solvers.stepping.repeat]
    and [`record`][solvers.stepping.record] transform once per run.

    **Arguments:**

    - `resolution`: grid size `s` (even, `>= 4`) of `x_i = i/s`.
    - `viscosity`, `dt`, `dealias`: as in [`BurgersParams`][solvers.burgers.BurgersParams].
    - `n_contour`: points of the contour integrals for the coefficients (64).
    - `dtype`: float32 or float64 (default: JAX's default float); the fields the
      stepper takes must have this dtype.
    """

    resolution: int = eqx.field(static=True)
    viscosity: float = eqx.field(static=True)
    dt: float = eqx.field(static=True)
    dealias: bool = eqx.field(static=True)
    e: Complex[Array, " k"]
    e2: Complex[Array, " k"]
    q: Complex[Array, " k"]
    f1: Complex[Array, " k"]
    f2: Complex[Array, " k"]
    f3: Complex[Array, " k"]
    g: Complex[Array, " k"]

    def __init__(
        self,
        resolution: int,
        *,
        viscosity: float = 0.1,
        dt: float = 1e-3,
        dealias: bool = True,
        n_contour: int = 64,
        dtype=None,
    ):
        check_resolution(resolution)
        check_positive("viscosity", viscosity)
        check_positive("dt", dt)
        if isinstance(n_contour, bool) or not isinstance(n_contour, int) or n_contour < 1:
            raise ValueError(f"n_contour must be a positive integer, got {n_contour!r}.")
        dtype = check_dtype(dtype)
        self.resolution, self.viscosity, self.dt = int(resolution), float(viscosity), float(dt)
        self.dealias = bool(dealias)
        cdtype = jnp.result_type(dtype, jnp.complex64)
        coefficients = _etdrk4_coefficients(
            self.resolution, viscosity, dt, self.dealias, int(n_contour)
        )
        for name, value in coefficients.items():
            setattr(self, name, jnp.asarray(value, cdtype))

    @classmethod
    def from_params(cls, resolution: int, params: BurgersParams, dtype=None) -> Burgers:
        """The stepper of a [`BurgersParams`][solvers.burgers.BurgersParams]."""
        return cls(
            resolution,
            viscosity=params.viscosity,
            dt=params.dt,
            dealias=params.dealias,
            dtype=dtype,
        )

    def check(self, u):
        check_field(u, jnp.finfo(self.e.dtype).dtype, (self.resolution,))

    def to_state(self, u: Float[Array, "1 s"]) -> Complex[Array, "1 k"]:
        return jnp.fft.rfft(u)

    def from_state(self, v: Complex[Array, "1 k"]) -> Float[Array, "1 s"]:
        return jnp.fft.irfft(v, n=self.resolution)

    def nonlinear(self, v: Complex[Array, "*c k"]) -> Complex[Array, "*c k"]:
        """Transform of `−(u²/2)_x` (dealiased) from the transform of `u`."""
        return self.g * jnp.fft.rfft(jnp.fft.irfft(v, n=self.resolution) ** 2)

    def step_state(self, v: Complex[Array, "1 k"]) -> Complex[Array, "1 k"]:
        """One ETDRK4 step in Fourier space (Kassam & Trefethen 2005)."""
        nv = self.nonlinear(v)
        a = self.e2 * v + self.q * nv
        na = self.nonlinear(a)
        b = self.e2 * v + self.q * na
        nb = self.nonlinear(b)
        cc = self.e2 * a + self.q * (2 * nb - nv)
        nc = self.nonlinear(cc)
        return self.e * v + nv * self.f1 + 2 * (na + nb) * self.f2 + nc * self.f3


def solve(
    u0: Float[Array | np.ndarray, "*batch s"],
    params: BurgersParams,
    record_times: Sequence[float] | np.ndarray,
) -> Float[Array, "*batch n_records s"]:
    """Integrates from `u0` (t = 0) and returns `u` at `record_times`.

    A batched convenience over [`record`][solvers.stepping.record] with the
    stepper [`Burgers`][solvers.burgers.Burgers] (vmapped and jit-compiled here).

    **Arguments:**

    - `u0`: `(s,)` or `(..., s)` on `x_i = i/s`, `s` even; float32 or float64.
    - `params`: [`BurgersParams`][solvers.burgers.BurgersParams].
    - `record_times`: non-decreasing multiples of `params.dt`.

    **Returns:** `(..., n_records, s)`.
    """
    u0 = jnp.asarray(check_finite("u0", u0))
    if u0.ndim < 1 or not jnp.issubdtype(u0.dtype, jnp.floating):
        raise ValueError(f"u0 must be a real floating array (..., s), got {u0.shape} {u0.dtype}.")
    s = u0.shape[-1]
    check_resolution(s, "u0.shape[-1]")
    stepper = Burgers.from_params(s, params, u0.dtype)
    out = record_batch(stepper, u0.reshape(-1, 1, s), record_times)[:, :, 0]
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
    check_resolution(resolution)
    return grf_batch(
        periodic_grf_1d,
        key,
        range(n),
        (resolution,),
        alpha=alpha,
        tau=tau,
        sigma=sigma,
        dtype=dtype,
    )


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
    check_resolution(resolution)
    if n_records < 1:
        raise ValueError(f"n_records must be >= 1, got {n_records!r}.")
    times = t_final * np.arange(1, n_records + 1) / n_records
    key = jax.random.key(seed)
    u0 = grf_batch(
        periodic_grf_1d, key, range(start, start + n), (resolution,), alpha=2.0, tau=5.0, sigma=25.0
    )
    out = np.asarray(solve(u0, params, times)) if n else np.zeros((0, n_records, resolution))
    if not np.all(np.isfinite(out)):
        raise FloatingPointError(f"the Burgers solution blew up; lower dt (now {dt}).")
    return {"inputs": np.asarray(u0), "outputs": out, "times": times}
