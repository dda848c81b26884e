"""Navier–Stokes parameters, forcing and the spectral symbols the stepper uses."""

from __future__ import annotations

import dataclasses

import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float

from .._grid import (
    check_choice,
    check_positive,
    rfft_wavenumbers,
)


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
