"""Integral diagnostics of a vorticity field: enstrophy, palinstrophy, kinetic energy."""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float


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
