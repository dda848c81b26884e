"""Grid helpers shared by the solvers: one resolution check, one wavenumber helper.

The periodic solvers (`navier_stokes`, `burgers`) live on `x_i = i/s` with `s`
even, so the Nyquist mode is the last rfft bin and the 2/3 rule is well defined;
the node-grid solvers (`heat`, `darcy`) hold the boundary and need `s >= 3`.
"""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np

from ._checks import check_finite


def check_resolution(
    s, name: str = "resolution", *, periodic: bool = True, minimum: int | None = None
) -> None:
    """Raises `ValueError` unless `s` is a valid number of grid points per side.

    **Arguments:**

    - `s`: the number of points.
    - `name`: how the caller's argument is called (in the message).
    - `periodic`: `True` for the pseudo-spectral grid `x_i = i/s` (even `s >= 4`),
      `False` for a node grid with its boundary (`s >= 3`).
    - `minimum`: overrides the smallest accepted value.
    """
    if periodic:
        minimum = 4 if minimum is None else minimum
        if not isinstance(s, (int, np.integer)) or isinstance(s, bool) or s < minimum or s % 2:
            raise ValueError(
                f"{name} must be an even integer >= {minimum} for the pseudo-spectral "
                f"solver, got {s!r}."
            )
    else:
        minimum = 3 if minimum is None else minimum
        if not isinstance(s, (int, np.integer)) or isinstance(s, bool) or s < minimum:
            raise ValueError(
                f"{name} must be an integer >= {minimum} (nodes per side, boundary "
                f"included), got {s!r}."
            )


def check_positive(name: str, value) -> None:
    """Raises `ValueError` unless `value` is a positive real number."""
    if isinstance(value, bool) or not (isinstance(value, (int, float)) and value > 0):
        raise ValueError(f"{name} must be a positive number, got {value!r}.")


def check_choice(name: str, value, accepted: tuple) -> None:
    """Raises `ValueError` unless `value` is one of `accepted`."""
    if value not in accepted:
        raise ValueError(
            f"{name} must be one of {', '.join(repr(a) for a in accepted)}, got {value!r}."
        )


def rfft_wavenumbers(s: int, ndim: int) -> tuple[np.ndarray, ...]:
    """Integer wavenumbers of the real FFT of an `s^ndim` grid, one array per axis,
    broadcastable to the rfft layout `(s, …, s, s//2 + 1)`: `fftfreq(s)·s` on
    the leading axes, `rfftfreq(s)·s` on the last (float64 numpy)."""
    ks = []
    for axis in range(ndim):
        k = np.fft.rfftfreq(s) * s if axis == ndim - 1 else np.fft.fftfreq(s) * s
        shape = [1] * ndim
        shape[axis] = k.size
        ks.append(k.reshape(shape))
    return tuple(ks)


def dealias_mask(s: int, ks: tuple[np.ndarray, ...], enabled: bool = True) -> np.ndarray:
    """The 2/3 rule: `True` where every `3|k_j| < s` (all `True` if not `enabled`),
    broadcast to the rfft layout of `ks`."""
    shape = np.broadcast_shapes(*(k.shape for k in ks))
    if not enabled:
        return np.ones(shape, dtype=bool)
    mask = np.ones(shape, dtype=bool)
    for k in ks:
        mask = mask & (3 * np.abs(k) < s)
    return mask


def check_dtype(dtype, name: str = "dtype"):
    """The real floating dtype `dtype` (default: JAX's default float), or `ValueError`."""
    dtype = jnp.result_type(float) if dtype is None else jnp.dtype(dtype)
    if not jnp.issubdtype(dtype, jnp.floating):
        raise ValueError(f"{name} must be a real floating dtype, got {dtype}.")
    return dtype


def check_field(u, stepper_dtype, grid: tuple[int, ...], name: str = "u") -> None:
    """Trace-time check of one field `(1, *grid)` of dtype `stepper_dtype` for a
    one-channel stepper (`ValueError` naming `name` and the fix); a concrete
    field (an eager call) must also be finite."""
    shape = getattr(u, "shape", None)
    if shape != (1, *grid):
        raise ValueError(
            f"{name} must be one field of shape (channels, *grid) = {(1, *grid)}, got "
            f"{shape}. Add the channel axis with u[None]; for a batch use jax.vmap(stepper)."
        )
    if u.dtype != stepper_dtype:
        raise ValueError(
            f"{name} has dtype {u.dtype} but the stepper was built for {stepper_dtype}; "
            f"build it with dtype={u.dtype} (or cast {name})."
        )
    check_finite(name, u)
