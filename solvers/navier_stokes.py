r"""2-D incompressible Navier–Stokes in vorticity form on the periodic unit square.

$$\partial_t \omega + u\cdot\nabla\omega = \nu\Delta\omega + f, \qquad
u = (\partial_y\psi, -\partial_x\psi), \qquad -\Delta\psi = \omega,$$

the setting of the FNO Navier–Stokes benchmark (Li et al., ICLR 2021). Space is
pseudo-spectral on the grid `x_i = i/s` (`s` even), with the nonlinear term
dealiased by the 2/3 rule (Fourier modes with `3|k_j| >= s` are removed from
`u·∇ω`, so for a field band-limited to the kept modes the product is exact).
Time stepping is semi-implicit: Crank–Nicolson for the viscous term and Heun's
method (explicit trapezoid) for advection and forcing, second order in `dt`:

$$\tilde\omega = \frac{(1 - \tfrac{\nu dt}{2}|k|^2)\hat\omega^n + dt(\hat f - \hat N(\omega^n))}
{1 + \tfrac{\nu dt}{2}|k|^2},\quad
\hat\omega^{n+1} = \frac{(1 - \tfrac{\nu dt}{2}|k|^2)\hat\omega^n
+ dt(\hat f - \tfrac12(\hat N(\omega^n) + \hat N(\tilde\omega)))}{1 + \tfrac{\nu dt}{2}|k|^2}$$

with `|k|² = 4π²(k_x² + k_y²)` and `N(ω) = u·∇ω`. Arrays are indexed
`w[i, j] = ω(x_i, y_j)` (x along axis 0). The default forcing is
`0.1 (sin 2π(x+y) + cos 2π(x+y))`; the initial vorticity is a Gaussian random
field with covariance `7^{3/2}(−Δ + 49 I)^{−2.5}` ([`random_vorticity`][solvers.navier_stokes.random_vorticity]).

Everything is JAX. The solver is the one-sample stepper module
[`NavierStokes`][solvers.navier_stokes.NavierStokes]: `stepper(w)` advances one
field `(1, s, s)` by `dt`; trajectories come from `solvers.stepping`'s `rollout`,
`repeat` and `record`, batches from `jax.vmap`, compilation from the caller's
`jax.jit`. `solve`, `advance` and `make_dataset` are batched, jit-compiled
conveniences over it that take `(s, s)` or `(..., s, s)` and run in float32 or
float64 (the dtype of `w0`).

**Nesting of grids.** The grid `x_i = i/s` at resolution `s` is every second
point of the grid at `2s`, and the random initial field is the same function at
every resolution (band-wise noise, see `solvers._grf`), so
`make_dataset(n, 2s, seed=q)["outputs"][..., ::2, ::2]` equals
`make_dataset(n, s, seed=q)["outputs"]` up to the spatial discretisation error
of the coarse grid.
"""

from __future__ import annotations

import dataclasses
import math
import warnings
from collections.abc import Sequence

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Complex, Float

from ._batched import check_square_fields, record_batch, repeat_batch
from ._checks import check_finite
from ._grf import grf_batch, periodic_grf
from ._grid import (
    check_choice,
    check_dtype,
    check_field,
    check_positive,
    check_resolution,
    dealias_mask,
    rfft_wavenumbers,
)
from .stepping import AbstractStepper, record_increments


__all__ = [
    "NSParams",
    "NavierStokes",
    "SHARED_KEYS",
    "advance",
    "advective_cfl",
    "default_forcing",
    "enstrophy",
    "kinetic_energy",
    "make_dataset",
    "palinstrophy",
    "random_vorticity",
    "solve",
    "taylor_green",
]

#: Keys of `make_dataset`'s output that are shared by all samples (no sample axis).
SHARED_KEYS = ("times",)

_FORCINGS = ("fno", "none")


@dataclasses.dataclass(frozen=True)
class NSParams:
    """Parameters of the Navier–Stokes solver (for `solve`, `advance`,
    `make_dataset`; the stepper [`NavierStokes`][solvers.navier_stokes.NavierStokes]
    takes the same names as keywords).

    - `viscosity`: kinematic viscosity ν > 0 (FNO benchmark: 1e-3, 1e-4, 1e-5).
    - `dt`: time step > 0. Explicit advection needs the advective CFL number
      [`advective_cfl`][solvers.navier_stokes.advective_cfl] `≲ 1`; `solve` and
      `advance` warn above 1.5 and refuse above 2.
    - `forcing`: `"fno"` for `0.1(sin 2π(x+y) + cos 2π(x+y))`, `"none"` for zero.
    - `dealias`: apply the 2/3 rule to the nonlinear term (default True).
    """

    viscosity: float = 1e-3
    dt: float = 1e-4
    forcing: str = "fno"
    dealias: bool = True

    def __post_init__(self):
        check_positive("viscosity", self.viscosity)
        check_positive("dt", self.dt)
        check_choice("forcing", self.forcing, _FORCINGS)


def _forcing_np(resolution: int) -> np.ndarray:
    x = np.arange(resolution) / resolution
    phase = 2 * np.pi * (x[:, None] + x[None, :])
    return 0.1 * (np.sin(phase) + np.cos(phase))


def _laplacian_symbols(s: int) -> tuple[np.ndarray, ...]:
    """`(kx, ky, −Δ̂, (−Δ̂)⁻¹)` on the rfft grid of `s × s` points on the unit
    square (the mean mode's inverse set to 0), in float64 numpy."""
    kx, ky = rfft_wavenumbers(s, 2)
    lap = 4 * np.pi**2 * (kx**2 + ky**2)
    inv_lap = np.where(lap == 0, 0.0, 1.0 / np.where(lap == 0, 1.0, lap))
    return kx, ky, lap, inv_lap


def default_forcing(resolution: int, dtype=None) -> Float[Array, "s s"]:
    """The FNO forcing `0.1 (sin 2π(x+y) + cos 2π(x+y))` on `x_i = i/s`."""
    return jnp.asarray(_forcing_np(resolution), dtype)


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


def random_vorticity(
    key: jax.Array,
    n: int,
    resolution: int,
    *,
    alpha: float = 2.5,
    tau: float = 7.0,
    sigma: float | None = None,
    dtype=None,
) -> Float[Array, "n s s"]:
    """`n` initial vorticities from the Gaussian random field with covariance
    `sigma² (−Δ + tau² I)^(−alpha)`, by default the FNO benchmark's
    `7^{3/2} (−Δ + 49 I)^{−2.5}` (`sigma = tau^(alpha − 1)` as in the FNO code).

    Sample `i` uses `jax.random.fold_in(key, i)`, and its Fourier coefficients do
    not depend on `resolution` (see the module docstring), so a data set can be
    extended or regenerated at another resolution sample by sample.

    **Returns:** `(n, s, s)` in `dtype` (default: JAX's default float).
    """
    check_resolution(resolution)
    if n < 0:
        raise ValueError(f"n must be >= 0, got {n!r}.")
    sigma = tau ** (alpha - 1.0) if sigma is None else sigma
    return grf_batch(
        periodic_grf,
        key,
        range(n),
        (resolution,) * 2,
        alpha=alpha,
        tau=tau,
        sigma=sigma,
        dtype=dtype,
    )


def make_dataset(
    n: int,
    resolution: int,
    *,
    seed: int,
    viscosity: float = 1e-3,
    t_final: float = 10.0,
    record_every: float = 1.0,
    dt: float = 1e-3,
    forcing: str = "fno",
    t_start: float = 0.0,
    start: int = 0,
    batch_size: int = 32,
) -> dict[str, np.ndarray]:
    """Navier–Stokes trajectories from random initial vorticity.

    Sample `i` (global index `start + i`) depends only on `(seed, start + i)`:
    its initial field is `random_vorticity(jax.random.key(seed), ...)`'s sample
    `start + i`. Computed in JAX's default float (float32 unless x64 is on).
    With `t_start > 0` the flow first runs from that random field to
    `t_start`, and `inputs` is the developed vorticity `ω(t_start)` (the forced
    flow forgets its smooth Gaussian start; at ν = 1e-4 it takes about ten time
    units to build the fine filaments of the FNO benchmark's data).

    **Arguments:**

    - `n`, `resolution`: number of samples and grid size `s` (even).
    - `seed`: integer seed.
    - `viscosity`, `dt`, `forcing`: see [`NSParams`][solvers.navier_stokes.NSParams].
    - `t_final`, `record_every`: records at `t_start + record_every,
      t_start + 2·record_every, …, t_final` (multiples of `dt`).
    - `t_start`: time of the input field (a multiple of `dt`, `>= 0`).
    - `start`: index of the first sample (to extend or resume a data set).
    - `batch_size`: trajectories integrated together (memory vs speed only).

    **Returns:** `{"inputs": (n, s, s) vorticity at t_start, "outputs": (n,
    n_records, s, s) vorticity at the record times, "times": (n_records,)}`.
    """
    params = NSParams(viscosity=viscosity, dt=dt, forcing=forcing)
    check_resolution(resolution)
    if not (math.isfinite(t_start) and t_start >= 0):
        raise ValueError(f"t_start must be a finite number >= 0, got {t_start}.")
    span = t_final - t_start
    if not record_every > 0 or not span >= record_every:
        raise ValueError(
            f"need 0 < record_every <= t_final - t_start, got record_every={record_every}, "
            f"t_final={t_final}, t_start={t_start}."
        )
    n_records = int(round(span / record_every))
    if not math.isclose(n_records * record_every, span, rel_tol=1e-9):
        raise ValueError(
            f"t_final - t_start = {span} must be a multiple of record_every={record_every}."
        )
    times = t_start + record_every * np.arange(1, n_records + 1)
    # checks the record times (t_start included) before any work
    record_increments(np.concatenate([[t_start], times]), dt)
    key = jax.random.key(seed)
    inputs, outputs = [], []
    for lo in range(0, n, batch_size):
        m = min(batch_size, n - lo)
        indices = range(start + lo, start + lo + m)
        w0 = grf_batch(
            periodic_grf, key, indices, (resolution,) * 2, alpha=2.5, tau=7.0, sigma=7.0**1.5
        )
        if t_start > 0:
            out = np.asarray(solve(w0, params, np.concatenate([[t_start], times])))
            w0, out = out[:, 0], out[:, 1:]
        else:
            out = np.asarray(solve(w0, params, times))
        if not np.all(np.isfinite(out)):
            raise FloatingPointError(
                f"the Navier–Stokes solution blew up (dt={dt} too large for resolution "
                f"{resolution}?); lower dt."
            )
        inputs.append(np.asarray(w0))
        outputs.append(out)
    dtype = jnp.result_type(float)
    empty = np.zeros((0, resolution, resolution), dtype)
    return {
        "inputs": np.concatenate(inputs) if inputs else empty,
        "outputs": np.concatenate(outputs)
        if outputs
        else np.zeros((0, n_records, resolution, resolution), dtype),
        "times": times,
    }


def taylor_green(
    resolution: int, k: int = 1, amplitude: float = 1.0, dtype=None
) -> Float[Array, "s s"]:
    """The vorticity `amplitude · sin(2πkx) sin(2πky)`: without forcing it is an
    exact solution decaying as `exp(−8π²k²νt)` (the nonlinear term vanishes).

    **Arguments:** `resolution` (even, `>= 4`, as the solver needs), the integer
    wavenumber `k >= 1` (below the Nyquist mode `resolution / 2`), `amplitude`,
    `dtype`.

    **Returns:** `(s, s)` on `x_i = i/s`.
    """
    check_resolution(resolution)
    if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or not 1 <= k < resolution // 2:
        raise ValueError(
            f"`k` must be an integer with 1 <= k < resolution/2 = {resolution // 2}, got {k!r}."
        )
    x = np.arange(resolution) / resolution
    w = amplitude * np.sin(2 * np.pi * k * x)[:, None] * np.sin(2 * np.pi * k * x)[None, :]
    return jnp.asarray(w, dtype)


def _spectral_sums(w, weight_fn):
    s = w.shape[-1]
    w_hat = jnp.fft.fft2(w) / (s * s)
    k = np.fft.fftfreq(s) * s
    k2 = 4 * np.pi**2 * (k[:, None] ** 2 + k[None, :] ** 2)
    return jnp.sum(weight_fn(k2) * jnp.abs(w_hat) ** 2, axis=(-2, -1))


def enstrophy(w: Float[Array | np.ndarray, "*batch s s"]) -> Float[Array, "*batch"]:
    """`∫ ω² dx` over the unit square (Parseval, exact for band-limited ω)."""
    return _spectral_sums(w, lambda k2: np.ones_like(k2))


def palinstrophy(w: Float[Array | np.ndarray, "*batch s s"]) -> Float[Array, "*batch"]:
    """`∫ |∇ω|² dx`; the enstrophy budget is `dZ/dt = −2ν P + 2∫fω`."""
    return _spectral_sums(w, lambda k2: k2)


def kinetic_energy(w: Float[Array | np.ndarray, "*batch s s"]) -> Float[Array, "*batch"]:
    """`∫ |u|² dx = Σ_k |ω̂_k|²/|k|²`; unforced, `dE/dt = −2ν Z`."""
    return _spectral_sums(w, lambda k2: np.where(k2 == 0, 0.0, 1 / np.where(k2 == 0, 1, k2)))
