"""Per-channel normalisation: fitted on training data, inverted on predictions."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import equinox as eqx
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float

from .._checks import check_finite


class Normalizer(eqx.Module):
    r"""`encode(x) = (x − mean) / std`, one `mean` and `std` per channel, and its
    `inverse`.

    The statistics have shape `(channels, 1, …, 1)`, one trailing 1 per spatial
    axis, so they broadcast against one sample `(channels, *grid)` (the house
    layout of a module's input) and against any batch `(…, channels, *grid)`
    alike. A module (a pytree of two arrays): it is saved and restored with
    the model, or on its own with [`save`][sciml.data.Normalizer.save] /
    [`load`][sciml.data.Normalizer.load].

    **Fields:** `mean`, `std` (`std` already includes `eps`, so it is positive).
    """

    mean: Float[Array, " channels *ones"]
    std: Float[Array, " channels *ones"]

    def __check_init__(self):
        if self.mean.shape != self.std.shape:
            raise ValueError(
                f"`mean` and `std` must have one shape, got {self.mean.shape} and {self.std.shape}."
            )

    @classmethod
    def fit(
        cls, x: Any, *, channel_axis: int = 1, eps: float = 1e-8, dtype: Any = None
    ) -> Normalizer:
        """The per-channel mean and standard deviation of training data `x`.

        **Arguments:**

        - `x`: training data `(sample, …, channel, *grid)`; every axis but
          `channel_axis` is averaged over.
        - `channel_axis`: the channel axis of `x` (default 1: `(sample,
          channel, *grid)`; use the data set's
          [`channel_axis`][sciml.data.Dataset.channel_axis]).
        - `eps`: added to the standard deviation (a constant channel divides by
          `eps`, not by zero).
        - `dtype`: of the statistics (default: `x`'s floating dtype).

        **Returns:** the fitted `Normalizer`. Statistics are computed in float64.
        """
        x = np.asarray(check_finite("x", x))
        if not np.issubdtype(x.dtype, np.floating):
            raise ValueError(f"`x` must be a floating array, got dtype {x.dtype}.")
        if isinstance(channel_axis, bool) or not isinstance(channel_axis, int):
            raise ValueError(f"`channel_axis` must be an integer, got {channel_axis!r}.")
        if not -x.ndim <= channel_axis < x.ndim:
            raise ValueError(
                f"`channel_axis` = {channel_axis} is out of range for `x` of shape {x.shape}."
            )
        if not eps >= 0:
            raise ValueError(f"`eps` must be >= 0, got {eps!r}.")
        axis = channel_axis % x.ndim
        others = tuple(a for a in range(x.ndim) if a != axis)
        mean = x.mean(axis=others, dtype=np.float64)
        std = x.std(axis=others, dtype=np.float64) + eps
        if not (std > 0).all():
            raise ValueError("a channel of `x` is constant and `eps` = 0: its std is 0.")
        shape = (x.shape[axis],) + (1,) * (x.ndim - axis - 1)
        dtype = x.dtype if dtype is None else dtype
        return cls(jnp.asarray(mean.reshape(shape), dtype), jnp.asarray(std.reshape(shape), dtype))

    def encode(self, x: Float[Array | np.ndarray, "..."]) -> Float[Array, "..."]:
        """`(x − mean) / std`, per channel."""
        return (x - self.mean) / self.std

    def __call__(self, x: Float[Array | np.ndarray, "..."]) -> Float[Array, "..."]:
        """Same as [`encode`][sciml.data.Normalizer.encode]."""
        return self.encode(x)

    def inverse(self, y: Float[Array | np.ndarray, "..."]) -> Float[Array, "..."]:
        """`y · std + mean`: back to physical units (e.g. a model's prediction)."""
        return y * self.std + self.mean

    def save(self, path: str | Path) -> Path:
        """Writes `mean` and `std` to the `.npz` file `path` (no pickles)."""
        path = Path(path)
        np.savez(path, mean=np.asarray(self.mean), std=np.asarray(self.std))
        return path if path.suffix == ".npz" else path.with_name(path.name + ".npz")

    @classmethod
    def load(cls, path: str | Path) -> Normalizer:
        """The `Normalizer` saved to `path` by [`save`][sciml.data.Normalizer.save]."""
        with np.load(path, allow_pickle=False) as f:
            return cls(jnp.asarray(f["mean"]), jnp.asarray(f["std"]))
