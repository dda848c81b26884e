"""Channels-last convolution, pooling and upsampling for the linear V-cycle.

The multilevel generator runs inside `solve`'s `lax.while_loop`. There XLA's
CPU backend keeps a `(channels, *grid)` convolution in that layout (outside a
loop it switches to channels-last by itself) and runs it through a generic
loop nest several times slower than its channels-last convolution, so one DCDM
iteration cost about ten network passes. These functions keep every feature map
as `(*grid, channels)` and every kernel as `(*window, in, out)`, the layout the
fast convolution takes, and give the transpose of each linear map explicitly,
so `Nᵀ` needs no `jax.linear_transpose` (whose adjoint convolutions come back
in the slow layout).
"""

from __future__ import annotations

import jax.numpy as jnp
from jax import lax
from jaxtyping import Array, Float


_NHWC = ("NHWC", "HWIO", "NHWC")


def kernel(
    weight: Float[Array, "out in *window"], residual: bool
) -> Float[Array, "*window in out"]:
    """An `eqx.nn.Conv` weight `(out, in, *window)` as a channels-last kernel;
    `residual=True` adds the identity at the centre tap, so the convolution
    with it is `h ↦ h + K h` (3×3(×3) windows, `in == out`)."""
    dim = weight.ndim - 2
    if residual:
        centre = (slice(None), slice(None)) + (1,) * dim
        weight = weight.at[centre].add(jnp.eye(weight.shape[0], dtype=weight.dtype))
    return jnp.transpose(weight, (*range(2, 2 + dim), 1, 0))


def transposed(k: Float[Array, "*window in out"]) -> Float[Array, "*window out in"]:
    """The kernel of the adjoint convolution: window reversed, channels swapped."""
    dim = k.ndim - 2
    flipped = k[(slice(None, None, -1),) * dim]
    return jnp.swapaxes(flipped, -1, -2)


def conv(h: Float[Array, "*grid c_in"], k: Float[Array, "*window c_in c_out"]) -> Array:
    """Cross-correlation with zero padding keeping the grid (`eqx.nn.Conv` with
    `padding=1` for a 3-wide window), channels last.

    In 3-D it is one 2-D convolution with the depth as the batch: the three
    depth-shifted copies of `h` stacked on the channels, against the kernel
    with its depth taps stacked the same way. XLA's CPU backend runs 3-D
    channels-last convolutions inside a loop slower still than channels-first
    ones, and this form faster than either.
    """
    if h.ndim == 3:
        return lax.conv_general_dilated(h[None], k, (1, 1), "SAME", dimension_numbers=_NHWC)[0]
    depth, c_in, c_out = h.shape[0], k.shape[-2], k.shape[-1]
    hp = jnp.pad(h, ((1, 1), (0, 0), (0, 0), (0, 0)))
    stacked = jnp.concatenate([hp[dz : dz + depth] for dz in range(3)], axis=-1)
    k2 = jnp.transpose(k, (1, 2, 0, 3, 4)).reshape(3, 3, 3 * c_in, c_out)
    return lax.conv_general_dilated(stacked, k2, (1, 1), "SAME", dimension_numbers=_NHWC)


def pool(h: Float[Array, "*grid c"]) -> Float[Array, "*half c"]:
    """2×2(×2) average pooling, channels last. Its transpose is `upsample(h) / 2^dim`."""
    *grid, c = h.shape
    split = []
    for n in grid:
        split += [n // 2, 2]
    return h.reshape(*split, c).mean(axis=tuple(range(1, 2 * len(grid), 2)))


def upsample(h: Float[Array, "*half c"]) -> Float[Array, "*grid c"]:
    """Nearest-neighbour upsampling ×2, channels last. Its transpose is `2^dim · pool(h)`."""
    for axis in range(h.ndim - 1):
        h = jnp.repeat(h, 2, axis=axis)
    return h
