"""Gaussian random fields whose Fourier coefficients do not depend on the grid.

The white noise behind every field is drawn in dyadic frequency bands: band `b`
holds the modes with `2**(b-1) <= max_j |k_j| < 2**b` and is drawn from its own
key (or seed), always at the same size. A mode's random coefficient is therefore
the same at every resolution, so a field sampled on a fine grid and on a coarse
grid is the same function truncated to the frequencies each grid resolves. That
is what makes `fine[::2, ::2]` a faithful coarse sample.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable

import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float


def _n_bands(k_max: int) -> int:
    """Number of bands needed to cover every mode with `max |k_j| <= k_max`."""
    return 0 if k_max < 1 else int(math.floor(math.log2(k_max))) + 1


def _band_of(kmax_abs: np.ndarray) -> np.ndarray:
    """Band index of each mode from `max_j |k_j|` (0 for the zero mode)."""
    safe = np.maximum(kmax_abs, 1)
    return np.where(kmax_abs == 0, 0, np.floor(np.log2(safe)).astype(int) + 1)


def _key_words(key) -> tuple[int, ...]:
    """The integer words of a JAX PRNG key (typed or raw), to seed numpy."""
    if jnp.issubdtype(getattr(key, "dtype", np.uint32), jax.dtypes.prng_key):
        key = jax.random.key_data(key)
    return tuple(int(w) for w in np.asarray(key).ravel())


def periodic_noise(key: jax.Array, resolution: int) -> np.ndarray:
    """Standard normal real and imaginary parts `(2, s, s)` of the noise of a
    periodic field.

    Entry `[:, i, j]` belongs to the integer wavenumber `(k_i, k_j)` in FFT order
    (`k = fftfreq(s) * s`). Modes with `|k_j| >= s/2` (the Nyquist mode of even
    sizes) are zero. Band `b` is drawn by `numpy.random.default_rng((*words, b))`
    where `words` is the key's data, so the result does not depend on the
    precision or on how samples are batched. Needs a concrete (untraced) key.
    """
    s = resolution
    words = _key_words(key)
    k = np.rint(np.fft.fftfreq(s) * s).astype(int)
    kx, ky = np.meshgrid(k, k, indexing="ij")
    kabs = np.maximum(np.abs(kx), np.abs(ky))
    resolved = (2 * np.abs(kx) < s) & (2 * np.abs(ky) < s)
    band = _band_of(kabs)
    out = np.zeros((2, s, s))
    for b in range(1, _n_bands(int(kabs[resolved].max(initial=0))) + 1):
        size = 2 ** (b + 1)
        draw = np.random.default_rng((*words, b)).standard_normal((2, size, size))
        mask = (band == b) & resolved
        out[:, mask] = draw[:, kx[mask] % size, ky[mask] % size]
    return out


def periodic_grf(
    key: jax.Array,
    resolution: int,
    *,
    alpha: float,
    tau: float,
    sigma: float,
    dtype=None,
) -> Float[Array, "s s"]:
    """One sample (computed in float64 numpy, returned as a JAX array of `dtype`) of the Gaussian field with covariance `sigma² (−Δ + tau² I)^(−alpha)`
    on the periodic unit square, zero mean over the domain, on `x_i = i/s`.

    `w(x) = Re Σ_k sqrt(2) sigma (4π²|k|² + tau²)^(−alpha/2) ξ_k exp(2πi k·x)`
    with `ξ_k` standard complex normal, summed over `0 < max|k_j| < s/2`; its
    covariance is `Σ_k sigma² (4π²|k|² + tau²)^(−alpha) cos(2π k·(x − x'))`
    (the FNO data generator's convention, Nyquist mode left out).
    """
    s = resolution
    noise = periodic_noise(key, s)
    xi = (noise[0] + 1j * noise[1]) / math.sqrt(2.0)
    k = np.fft.fftfreq(s) * s
    k2 = k[:, None] ** 2 + k[None, :] ** 2
    amp = math.sqrt(2.0) * sigma * (4 * math.pi**2 * k2 + tau**2) ** (-alpha / 2)
    amp[0, 0] = 0.0
    field = np.fft.ifft2(amp * xi * (s * s)).real
    return jnp.asarray(field, jnp.result_type(float) if dtype is None else dtype)


def cosine_noise(rng_seed: tuple[int, ...], n_modes: int) -> np.ndarray:
    """Standard normal coefficients `[k1, k2]`, `0 <= k_j < n_modes`, drawn band
    by band from `numpy.random.default_rng((*rng_seed, band))`, so the block for
    `n_modes` is the top-left block of the one for any larger `n_modes`."""
    k = np.arange(n_modes)
    k1, k2 = np.meshgrid(k, k, indexing="ij")
    band = _band_of(np.maximum(k1, k2))
    out = np.zeros((n_modes, n_modes))
    for b in range(0, _n_bands(n_modes - 1) + 1):
        size = 2**b if b > 0 else 1
        draw = np.random.default_rng((*rng_seed, b)).standard_normal((size, size))
        mask = band == b
        out[mask] = draw[k1[mask], k2[mask]]
    return out


def cosine_grf(
    points: np.ndarray,
    noise: np.ndarray,
    *,
    alpha: float,
    tau: float,
    sigma: float,
) -> np.ndarray:
    """Gaussian field with covariance `sigma² (−Δ + tau² I)^(−alpha)` under zero
    Neumann conditions on the unit square (cosine eigenfunctions), mean mode
    left out, evaluated on the tensor grid `points × points`.

    `a(x, y) = Σ_{k≠0} sigma (π²|k|² + tau²)^(−alpha/2) ξ_k φ_k1(x) φ_k2(y)` with
    `φ_0 = 1`, `φ_k = sqrt(2) cos(πkx)` (orthonormal on [0, 1]) and `ξ = noise`.
    """
    m = noise.shape[0]
    k = np.arange(m)
    phi = np.where(k[None, :] == 0, 1.0, math.sqrt(2.0)) * np.cos(
        math.pi * points[:, None] * k[None, :]
    )
    k2 = k[:, None] ** 2 + k[None, :] ** 2
    amp = sigma * (math.pi**2 * k2 + tau**2) ** (-alpha / 2)
    amp[0, 0] = 0.0
    return phi @ (amp * noise) @ phi.T


def periodic_noise_1d(key: jax.Array, resolution: int) -> np.ndarray:
    """The 1-D analogue of `periodic_noise`, shape `(2, s)`: band `b` (modes
    `2**(b-1) <= |k| < 2**b`) drawn at a fixed size; `|k| >= s/2` zero."""
    s = resolution
    words = _key_words(key)
    k = np.rint(np.fft.fftfreq(s) * s).astype(int)
    resolved = 2 * np.abs(k) < s
    band = _band_of(np.abs(k))
    out = np.zeros((2, s))
    for b in range(1, _n_bands(int(np.abs(k)[resolved].max(initial=0))) + 1):
        size = 2 ** (b + 1)
        draw = np.random.default_rng((*words, b)).standard_normal((2, size))
        mask = (band == b) & resolved
        out[:, mask] = draw[:, k[mask] % size]
    return out


def periodic_grf_1d(
    key: jax.Array, resolution: int, *, alpha: float, tau: float, sigma: float, dtype=None
) -> Float[Array, " s"]:
    """1-D periodic field with covariance `sigma² (−d²/dx² + tau²)^(−alpha)` on
    `x_i = i/s`, mean mode left out (same construction as `periodic_grf`)."""
    s = resolution
    noise = periodic_noise_1d(key, s)
    xi = (noise[0] + 1j * noise[1]) / math.sqrt(2.0)
    k = np.fft.fftfreq(s) * s
    amp = math.sqrt(2.0) * sigma * (4 * math.pi**2 * k**2 + tau**2) ** (-alpha / 2)
    amp[0] = 0.0
    field = np.fft.ifft(amp * xi * s).real
    return jnp.asarray(field, jnp.result_type(float) if dtype is None else dtype)


def grf_batch(
    sample: Callable[..., Array],
    key: jax.Array,
    indices: Iterable[int],
    shape: tuple[int, ...],
    **kwargs,
) -> Array:
    """The fields `sample(fold_in(key, i), shape[0], **kwargs)` for `i` in
    `indices`, stacked: `(len(indices), *shape)` (`sample` is `periodic_grf`
    or `periodic_grf_1d`, `shape` one sample's). Sample `i` depends only on
    `(key, i)`, so a data set can be extended or generated in parts."""
    fields = [sample(jax.random.fold_in(key, int(i)), shape[0], **kwargs) for i in indices]
    if fields:
        return jnp.stack(fields)
    dtype = kwargs.get("dtype")
    return jnp.zeros((0, *shape), jnp.result_type(float) if dtype is None else dtype)
