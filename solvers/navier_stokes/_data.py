"""Random initial vorticity and Navier–Stokes data sets."""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float

from .._grf import grf_batch, periodic_grf
from .._grid import (
    check_resolution,
)
from ..stepping import record_increments
from ._params import NSParams
from ._stepper import solve


#: Keys of `make_dataset`'s output that are shared by all samples (no sample axis).
SHARED_KEYS = ("times",)


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
