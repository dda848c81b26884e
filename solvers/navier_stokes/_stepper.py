"""The Navier–Stokes stepper module, its stability check, and the batched
`solve` / `advance` over it."""

from __future__ import annotations

import math
import warnings
from collections.abc import Sequence

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Complex, Float

from .._batched import check_square_fields, record_batch, repeat_batch
from .._checks import check_finite
from .._grid import (
    check_choice,
    check_dtype,
    check_field,
    check_positive,
    check_resolution,
    dealias_mask,
)
from ..stepping import AbstractStepper
from ._params import _FORCINGS, NSParams, _forcing_np, _laplacian_symbols


class NavierStokes(AbstractStepper):
    r"""One Crank–Nicolson / Heun step of the vorticity equation (module docstring)
    on the periodic unit square, for one field `(1, s, s)`.

    The state between steps is the rfft of the vorticity, so
    [`rollout`][solvers.stepping.rollout], [`repeat`][solvers.stepping.repeat]
    and [`record`][solvers.stepping.record] transform once per run.

    **Arguments:**

    - `resolution`: grid size `s` (even, `>= 4`) of `x_i = i/s`.
    - `viscosity`, `dt`, `forcing`, `dealias`: as in
      [`NSParams`][solvers.navier_stokes.NSParams].
    - `dtype`: float32 or float64 (default: JAX's default float); the fields the
      stepper takes must have this dtype.
    """

    resolution: int = eqx.field(static=True)
    viscosity: float = eqx.field(static=True)
    dt: float = eqx.field(static=True)
    forcing: str = eqx.field(static=True)
    dealias: bool = eqx.field(static=True)
    ikx: Complex[Array, "s k"]
    iky: Complex[Array, "s k"]
    inv_lap: Float[Array, "s k"]
    mask: Float[Array, "s k"]
    f_hat: Complex[Array, "s k"]
    lhs: Float[Array, "s k"]
    rhs: Float[Array, "s k"]

    def __init__(
        self,
        resolution: int,
        *,
        viscosity: float = 1e-3,
        dt: float = 1e-4,
        forcing: str = "fno",
        dealias: bool = True,
        dtype=None,
    ):
        check_resolution(resolution)
        check_positive("viscosity", viscosity)
        check_positive("dt", dt)
        check_choice("forcing", forcing, _FORCINGS)
        dtype = check_dtype(dtype)
        s = int(resolution)
        self.resolution, self.viscosity, self.dt = s, float(viscosity), float(dt)
        self.forcing, self.dealias = forcing, bool(dealias)
        kx, ky, lap, inv_lap = _laplacian_symbols(s)
        if forcing == "fno":
            f_hat = np.fft.rfft2(_forcing_np(s))
        else:
            f_hat = np.zeros_like(lap, dtype=complex)
        cdtype = jnp.result_type(dtype, jnp.complex64)
        self.ikx = jnp.asarray(2j * np.pi * kx * np.ones_like(ky), cdtype)
        self.iky = jnp.asarray(2j * np.pi * np.ones_like(kx) * ky, cdtype)
        self.inv_lap = jnp.asarray(inv_lap, dtype)
        self.mask = jnp.asarray(dealias_mask(s, (kx, ky), self.dealias), dtype)
        self.f_hat = jnp.asarray(f_hat, cdtype)
        self.lhs = jnp.asarray(1 + 0.5 * dt * viscosity * lap, dtype)
        self.rhs = jnp.asarray(1 - 0.5 * dt * viscosity * lap, dtype)

    @classmethod
    def from_params(cls, resolution: int, params: NSParams, dtype=None) -> NavierStokes:
        """The stepper of an [`NSParams`][solvers.navier_stokes.NSParams]."""
        return cls(
            resolution,
            viscosity=params.viscosity,
            dt=params.dt,
            forcing=params.forcing,
            dealias=params.dealias,
            dtype=dtype,
        )

    def check(self, u):
        check_field(u, self.inv_lap.dtype, (self.resolution,) * 2)

    def to_state(self, u: Float[Array, "1 s s"]) -> Complex[Array, "1 s k"]:
        return jnp.fft.rfft2(u)

    def from_state(self, w_hat: Complex[Array, "1 s k"]) -> Float[Array, "1 s s"]:
        s = self.resolution
        return jnp.fft.irfft2(w_hat, s=(s, s))

    def nonlinear(self, w_hat: Complex[Array, "*c s k"]) -> Complex[Array, "*c s k"]:
        """Transform of `u·∇ω` (dealiased) from the transform of ω."""
        s = self.resolution
        psi_hat = w_hat * self.inv_lap
        irfft = lambda a: jnp.fft.irfft2(a, s=(s, s))  # noqa: E731
        u = irfft(self.iky * psi_hat)
        v = -irfft(self.ikx * psi_hat)
        wx = irfft(self.ikx * w_hat)
        wy = irfft(self.iky * w_hat)
        return jnp.fft.rfft2(u * wx + v * wy) * self.mask

    def step_state(self, w_hat: Complex[Array, "1 s k"]) -> Complex[Array, "1 s k"]:
        """One Crank–Nicolson / Heun step in Fourier space."""
        dt = self.dt
        n0 = self.nonlinear(w_hat)
        base = self.rhs * w_hat + dt * self.f_hat
        w_tilde = (base - dt * n0) / self.lhs
        n1 = self.nonlinear(w_tilde)
        return (base - 0.5 * dt * (n0 + n1)) / self.lhs


#: `advective_cfl` above which `solve` / `advance` warn, and above which they refuse.
CFL_WARN, CFL_LIMIT = 1.5, 2.0


def advective_cfl(
    w: Float[Array | np.ndarray, "*batch s1 s2"], dt: float, *, dealias: bool = True
) -> float:
    r"""The advective CFL number `y = dt · 2π k_max · (max|u| + max|v|)` of the
    vorticity `w` (largest over the batch) for the scheme of this module.

    **Derivation.** Linearised about a frozen velocity `(u, v)`, advection of a
    Fourier mode `k` has the eigenvalue `−2πi(u k_x + v k_y)`, at most
    `y / dt` in modulus, with `k_max` the largest kept integer wavenumber
    (`⌈s/3⌉ − 1` under the 2/3 rule, `s/2` without). Heun's method multiplies a
    mode by `R(z) = 1 + z + z²/2`, and on the imaginary axis `|R(iy)|² = 1 + y⁴/4`:
    no `y > 0` is strictly stable, the growth per step is about `y⁴/8`, so
    `y ≲ 1` is the working limit. The viscous term is Crank–Nicolson, which is
    A-stable: there is no viscous time-step limit (its factor
    `(1 − a)/(1 + a)`, `a = ν dt |k|²/2`, has modulus below 1 for every `dt`), so
    the advective number is the one that matters. Measured with FNO random
    initial fields and forcing (`ν = 1e-3`, float64, 400 steps): at `s = 64`
    finite at `y = 1`, NaN after 234, 158 and 79 steps at `y = 1.5, 2, 3`; at
    `s = 32` NaN after 209 steps already at `y = 1` (the forcing speeds the flow
    up after t = 0, which the initial field cannot see). The second-order
    convergence test of this module runs a smooth field at `y = 1.08`. Hence
    `solve` and `advance` warn above `y = 1.5` and refuse
    above `y = 2` (`CFL_WARN`, `CFL_LIMIT`), where every run measured blew up.

    **Arguments:**

    - `w`: vorticity `(s, s)` or `(..., s, s)` on `x_i = i/s`.
    - `dt`: time step.
    - `dealias`: whether the 2/3 rule is applied (it lowers `k_max`).

    **Returns:** `y` as a Python float.
    """
    w = np.asarray(w, np.float64)
    s = w.shape[-1]
    kx, ky, _, inv_lap = _laplacian_symbols(s)
    psi_hat = np.fft.rfft2(w) * inv_lap
    u = np.fft.irfft2(2j * np.pi * ky * psi_hat, s=(s, s))
    v = -np.fft.irfft2(2j * np.pi * kx * psi_hat, s=(s, s))
    speed = np.abs(u).reshape(-1, s * s).max(-1) + np.abs(v).reshape(-1, s * s).max(-1)
    k_max = (math.ceil(s / 3) - 1) if dealias else s // 2
    return float(dt * 2 * np.pi * k_max * speed.max(initial=0.0))


def _check_stability(w, params: NSParams, name: str) -> None:
    """Warns above `CFL_WARN` and raises above `CFL_LIMIT` (concrete `w` only)."""
    if isinstance(w, jax.core.Tracer) or w.size == 0:
        return
    y = advective_cfl(w, params.dt, dealias=params.dealias)
    if y <= CFL_WARN:
        return
    message = (
        f"`dt` = {params.dt} gives the advective CFL number {y:.3g} for the initial "
        f"field `{name}` (working limit 1, see solvers.navier_stokes.advective_cfl)"
    )
    if y > CFL_LIMIT:
        raise ValueError(
            f"{message}; the explicit advection step is unstable this far above it "
            f"(the run would return NaN). Use dt <= {params.dt / y:.3g}."
        )
    warnings.warn(
        f"{message}; the run may blow up. Use dt <= {params.dt / y:.3g}.",
        RuntimeWarning,
        stacklevel=3,
    )


def advance(
    w: Float[Array | np.ndarray, "*batch s1 s2"], params: NSParams, n_steps: int
) -> Float[Array, "*batch s1 s2"]:
    """Advances the vorticity by `n_steps` steps of size `params.dt`.

    A batched convenience over [`repeat`][solvers.stepping.repeat]`(NavierStokes(...),
    n_steps)`, jit-compiled once per shape, dtype and `params` (`n_steps` is a
    traced value, so changing it does not recompile). For streaming a trajectory
    chunk by chunk: calling `advance` k times with `n_steps = m` equals one call
    with `k·m` (up to one FFT round trip of rounding per chunk).

    **Arguments:**

    - `w`: vorticity `(..., s, s)` on `x_i = i/s`, `s` even.
    - `params`: [`NSParams`][solvers.navier_stokes.NSParams].
    - `n_steps`: non-negative number of steps.

    **Returns:** the vorticity after `n_steps` steps, same shape and dtype.

    Raises `ValueError` for a concrete `w` with a NaN or an infinity, or when
    `params.dt` is far above the stability limit
    ([`advective_cfl`][solvers.navier_stokes.advective_cfl] `> 2`; a
    `RuntimeWarning` above 1.5).
    """
    w = jnp.asarray(check_finite("w", w))
    check_square_fields(w, "w", periodic=True)
    _check_stability(w, params, "w")
    s = w.shape[-1]
    stepper = NavierStokes.from_params(s, params, w.dtype)
    return repeat_batch(stepper, w.reshape(-1, 1, s, s), n_steps).reshape(w.shape)


def solve(
    w0: Float[Array | np.ndarray, "*batch s1 s2"],
    params: NSParams,
    record_times: Sequence[float] | np.ndarray,
) -> Float[Array, "*batch n_records s1 s2"]:
    """Integrates from `w0` at t = 0 and returns the vorticity at `record_times`.

    A batched convenience over [`record`][solvers.stepping.record] with the
    stepper [`NavierStokes`][solvers.navier_stokes.NavierStokes] (vmapped and
    jit-compiled here).

    **Arguments:**

    - `w0`: initial vorticity `(s, s)` or a batch `(..., s, s)` on `x_i = i/s`;
      `s` even; float32 or float64 (the computation runs in this dtype).
    - `params`: [`NSParams`][solvers.navier_stokes.NSParams].
    - `record_times`: non-decreasing times, each an integer multiple of
      `params.dt` (t = 0 returns `w0` itself after one FFT round trip).

    **Returns:** `(..., n_records, s, s)`.

    Raises `ValueError` for a concrete `w0` with a NaN or an infinity, or when
    `params.dt` is far above the stability limit
    ([`advective_cfl`][solvers.navier_stokes.advective_cfl] `> 2`; a
    `RuntimeWarning` above 1.5).
    """
    w0 = jnp.asarray(check_finite("w0", w0))
    check_square_fields(w0, "w0", periodic=True)
    _check_stability(w0, params, "w0")
    s = w0.shape[-1]
    stepper = NavierStokes.from_params(s, params, w0.dtype)
    out = record_batch(stepper, w0.reshape(-1, 1, s, s), record_times)[:, :, 0]
    return out.reshape((*w0.shape[:-2], *out.shape[1:]))
