"""The Taylor–Green vorticity, an exact unforced solution."""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float

from .._grid import (
    check_resolution,
)


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
