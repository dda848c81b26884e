"""Multi-grid domain decomposition (MG-TFNO, Kossaifi et al.), in any number of dims.

A field `(C, H_1, ..., H_d)` is cut into `n = 2^L` tiles per axis, core size
`h_a = H_a / n`. Each tile is widened by `p_a = round(H_a · padding_fraction)`
pixels on both sides (circularly, the fields are periodic), giving windows of
`w_a = h_a + 2 p_a` pixels. For every level `l = 1..L` a context window of the
same pixel size is cut from the field subsampled by `2^l`, centred on the same
point, so it sees a `2^l` times larger neighbourhood. The `L + 1` windows are
stacked on the channel axis: the model sees `(C·(L+1), w_1, ..., w_d)`.
After the model, the `p_a` border pixels are cropped and the tiles stitched.

Level-`l` pixel `j` of the window of tile `t` along an axis is the field pixel
`(t h − p + c + 2^l (j − c)) mod H`, `c = w // 2`: all levels share the centre
pixel `c`. When `h/2^{l+1}` is an integer this is exactly `neuraloperator`'s
`MultigridPatching2D` (plain striding `u[::2^l]`, circular padding
`ceil(h(1−2^{−l})/2) + p`, stride `h/2^l`); windows may wrap around the domain
more than once.
"""

from collections.abc import Sequence

import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float

from .._custom_types import Real


def _check(grid: Sequence[int], levels: int, padding_fraction: Real | Sequence[Real]):
    if not isinstance(levels, int) or levels < 0:
        raise ValueError(f"`levels` must be an int >= 0, got {levels!r}.")
    n = 2**levels
    for axis, size in enumerate(grid):
        if size % n:
            raise ValueError(
                f"grid size {size} along axis {axis} is not divisible by 2**levels = {n} "
                f"(levels={levels}); accepted: sizes that are multiples of {n}."
            )
    fractions = (
        (float(padding_fraction),) * len(grid)
        if isinstance(padding_fraction, int | float)
        else tuple(float(f) for f in padding_fraction)
    )
    if len(fractions) != len(grid) or any(not f >= 0 for f in fractions):
        raise ValueError(
            f"`padding_fraction` must be one fraction >= 0 or {len(grid)} of them, "
            f"got {padding_fraction!r}."
        )
    return n, tuple(int(round(size * f)) for size, f in zip(grid, fractions))


def patch_padding(grid: Sequence[int], levels: int, padding_fraction) -> tuple[int, ...]:
    """The border `p_a = round(H_a · padding_fraction)` added to every tile."""
    return _check(tuple(grid), levels, padding_fraction)[1]


def window_indices(size: int, levels: int, level: int, padding: int) -> np.ndarray:
    """Field indices `(n_tiles, window)` of the level-`level` windows along one axis."""
    n = 2**levels
    h = size // n
    width = h + 2 * padding
    centre = width // 2
    tiles = np.arange(n)[:, None]
    pixels = np.arange(width)[None, :]
    return (tiles * h - padding + centre + 2**level * (pixels - centre)) % size


def multigrid_patches(
    x: Float[Array, " channels *grid"], levels: int, padding_fraction: Real | Sequence[Real] = 0.0
) -> Float[Array, " tiles channels_levels *window"]:
    """Tiles `x` with multi-grid context windows.

    **Arguments:** `x` one sample `(C, H_1, ..., H_d)`; `levels` L (each `H_a`
    divisible by `2^L`); `padding_fraction` (one or one per axis).

    **Returns:** `(2^{L d}, C·(L+1), h_1 + 2p_1, ..., h_d + 2p_d)`; tiles in
    row-major order of their tile index, channels level-major (level 0 first).
    """
    grid = tuple(x.shape[1:])
    d = len(grid)
    n, padding = _check(grid, levels, padding_fraction)
    per_level = []
    for level in range(levels + 1):
        y = x
        for axis, (size, p) in enumerate(zip(grid, padding)):
            idx = window_indices(size, levels, level, p)
            dim = 1 + 2 * axis
            y = jnp.take(y, jnp.asarray(idx.reshape(-1)), axis=dim)
            y = y.reshape(y.shape[:dim] + idx.shape + y.shape[dim + 1 :])
        # (C, n, w_1, ..., n, w_d) -> (n, ..., n, C, w_1, ..., w_d)
        order = [1 + 2 * a for a in range(d)] + [0] + [2 + 2 * a for a in range(d)]
        y = jnp.transpose(y, order)
        per_level.append(y.reshape((n**d, x.shape[0]) + y.shape[d + 1 :]))
    return jnp.concatenate(per_level, axis=1)


def stitch_patches(
    tiles: Float[Array, " tiles channels *window"],
    grid: Sequence[int],
    levels: int,
    padding_fraction: Real | Sequence[Real] = 0.0,
) -> Float[Array, " channels *grid"]:
    """Crops the border of every tile and reassembles the field `(C, *grid)`.

    The inverse of the level-0 part of `multigrid_patches`.
    """
    grid = tuple(grid)
    d = len(grid)
    n, padding = _check(grid, levels, padding_fraction)
    if tiles.ndim != d + 2 or tiles.shape[0] != n**d:
        raise ValueError(
            f"`tiles` must have shape ({n**d}, channels, *window) for a {d}-D grid and "
            f"levels={levels}, got {tiles.shape}."
        )
    core = tuple(size // n for size in grid)
    crop = tuple(slice(p, p + h) for p, h in zip(padding, core))
    y = tiles[(slice(None), slice(None)) + crop]
    channels = y.shape[1]
    y = y.reshape((n,) * d + (channels,) + core)
    # (n, ..., n, C, h_1, ..., h_d) -> (C, n, h_1, ..., n, h_d)
    order = [d]
    for a in range(d):
        order += [a, d + 1 + a]
    return jnp.transpose(y, order).reshape((channels,) + grid)


def split_tiles(
    y: Float[Array, " channels *grid"], levels: int
) -> Float[Array, " tiles channels *core"]:
    """Cuts a field into its `2^{L d}` core tiles (no border): training targets
    when the loss is taken per tile (`stitching=False`)."""
    grid = tuple(y.shape[1:])
    d = len(grid)
    n, _ = _check(grid, levels, 0.0)
    core = tuple(size // n for size in grid)
    shape = (y.shape[0],)
    for h in core:
        shape += (n, h)
    z = y.reshape(shape)
    order = [1 + 2 * a for a in range(d)] + [0] + [2 + 2 * a for a in range(d)]
    return jnp.transpose(z, order).reshape((n**d, y.shape[0]) + core)


def domain_reduction(grid: Sequence[int], levels: int, padding_fraction) -> float:
    """How many times fewer grid points one model input has than the full field."""
    n, padding = _check(tuple(grid), levels, padding_fraction)
    window = np.prod([size // n + 2 * p for size, p in zip(grid, padding)])
    return float(np.prod(grid) / window)
