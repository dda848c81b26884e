"""Matrix-free JAX application of the voxel Poisson matrix."""

from __future__ import annotations

import equinox as eqx
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float, Int

from ._scenes import FLUID, SOLID, _open_neighbours, check_labels


def _shifted(x, axis, shift):
    """`x` moved by one cell along `axis`, zero filled: out[i] = x[i + shift]."""
    pad = [(0, 0)] * x.ndim
    pad[axis] = (1, 1)
    p = jnp.pad(x, pad)
    return jnp.take(p, jnp.arange(1 + shift, 1 + shift + x.shape[axis]), axis=axis)


def _check_float(x):
    """`x` as an array; a `TypeError` unless it is floating point: an integer
    field would be multiplied in integer arithmetic, and `A x` truncated."""
    x = jnp.asarray(x)
    if not jnp.issubdtype(x.dtype, jnp.inexact):
        raise TypeError(
            f"`x` must be a floating-point array (float32 or float64), got dtype {x.dtype}; "
            "convert it, e.g. `x.astype(jnp.float32)`."
        )
    return x


def _apply(fluid, diag, x):
    x = x * fluid
    out = diag * x
    for axis in range(x.ndim):
        for shift in (-1, 1):
            out = out - _shifted(x, axis, shift)
    return out * fluid


def apply_poisson(
    labels: Int[Array | np.ndarray, "*grid"], x: Float[Array | np.ndarray, "*grid"]
) -> Float[Array, "*grid"]:
    """`A x` for the label grid `labels` (traceable: `labels` may be a JAX
    array), without forming `A`. `x` lives on the grid; the result is zero at
    non-fluid cells, and values of `x` there are ignored. `x` must be floating
    point (a `TypeError` otherwise)."""
    labels = jnp.asarray(labels)
    x = _check_float(x)
    if labels.shape != jnp.shape(x) or labels.ndim not in (2, 3):
        raise ValueError(
            f"labels and x must be 2-D or 3-D grids of one shape, got {labels.shape} and "
            f"{jnp.shape(x)}."
        )
    fluid = (labels == FLUID).astype(x.dtype)
    open_ = (labels != SOLID).astype(x.dtype)
    diag = sum(_shifted(open_, a, s) for a in range(labels.ndim) for s in (-1, 1))
    return _apply(fluid, diag, x)


class PoissonOperator(eqx.Module):
    """The voxel Poisson matrix as a matrix-free JAX operator.

    Built once from a label grid (numpy); `op(x)` applies `A` to a field `x` of
    the grid's shape (one sample; `jax.vmap` over a batch) in the dtype of `x`,
    which must be floating point (a `TypeError` otherwise).
    Equal to `solvers.poisson.assemble(labels) @ x.ravel()`.

    **Arguments:** `labels`: `(n, n)` or `(n, n, n)` FLUID/SOLID/AIR grid.
    """

    fluid: Float[Array, "*grid"]
    diag: Float[Array, "*grid"]

    def __init__(self, labels):
        labels = check_labels(np.asarray(labels))
        self.fluid = jnp.asarray(labels == FLUID, jnp.float32)
        self.diag = jnp.asarray(_open_neighbours(labels) * (labels == FLUID), jnp.float32)

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(self.fluid.shape)

    def __call__(self, x: Float[Array | np.ndarray, "*grid"]) -> Float[Array, "*grid"]:
        x = _check_float(x)
        if jnp.shape(x) != self.fluid.shape:
            raise ValueError(f"x must have the grid shape {self.fluid.shape}, got {jnp.shape(x)}.")
        return _apply(self.fluid.astype(x.dtype), self.diag.astype(x.dtype), x)
