"""Cell labels and the seeded random scene generator for the Poisson systems."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np


FLUID = 0
SOLID = 1
AIR = 2


def check_labels(labels) -> np.ndarray:
    """Validates a label grid and returns it as an int8 array.

    Raises `ValueError` unless `labels` is a 2-D or 3-D grid of `FLUID` (0),
    `SOLID` (1) and `AIR` (2) holding at least one `FLUID` cell.
    """
    labels = np.asarray(labels)
    if labels.ndim not in (2, 3):
        raise ValueError(f"labels must be a 2-D or 3-D grid, got shape {labels.shape}.")
    if not np.issubdtype(labels.dtype, np.integer):
        raise ValueError(f"labels must be integers (FLUID=0, SOLID=1, AIR=2), got {labels.dtype}.")
    if labels.size and not np.isin(labels, (FLUID, SOLID, AIR)).all():
        raise ValueError("labels may only hold FLUID=0, SOLID=1 and AIR=2.")
    if not np.any(labels == FLUID):
        raise ValueError("labels: the scene has no FLUID cells, so there are no unknowns.")
    return labels.astype(np.int8)


def _open_neighbours(labels: np.ndarray) -> np.ndarray:
    open_ = np.pad(labels != SOLID, 1)
    count = np.zeros(labels.shape, np.int64)
    centre = [slice(1, -1)] * labels.ndim
    for axis in range(labels.ndim):
        for shift in (-1, 1):
            sl = list(centre)
            sl[axis] = slice(1 + shift, open_.shape[axis] - 1 + shift)
            count += open_[tuple(sl)]
    return count


def remove_isolated_fluid(labels: np.ndarray) -> np.ndarray:
    """Relabels as SOLID every FLUID cell whose faces are all SOLID (it would be
    an empty row of `A`). Returns a new array."""
    labels = np.array(labels, dtype=np.int8)
    isolated = (labels == FLUID) & (_open_neighbours(labels) == 0)
    labels[isolated] = SOLID
    return labels


def make_scene(
    resolution: int,
    *,
    dim: int = 2,
    seed: int | Sequence[int] = 0,
    n_obstacles: int = 3,
    shapes: Sequence[str] = ("box", "sphere"),
    size_range: tuple[float, float] = (0.05, 0.2),
    free_surface: bool = False,
    level_range: tuple[float, float] = (0.5, 0.8),
    wave_amplitude: float = 0.05,
) -> np.ndarray:
    """A random voxel scene: a closed tank of fluid with obstacles, optionally
    with air above a wavy free surface.

    The last axis is "up". With `free_surface`, cells whose centre lies above
    `level + wave_amplitude·sin(2π(x·f) + φ)` (level drawn from `level_range`,
    per-axis frequencies `f ∈ {1, 2}`) are AIR. Then `n_obstacles` obstacles,
    each a `"box"` (half-widths drawn per axis) or `"sphere"` (radius) with size
    drawn from `size_range` (fractions of the domain) and centre uniform in
    `[0.15, 0.85]^dim`, are made SOLID. FLUID cells left with no open face are
    relabelled SOLID. Deterministic in `seed` (an int or a tuple of ints).

    **Returns:** int8 labels of shape `(resolution,) * dim`.
    """
    if dim not in (2, 3):
        raise ValueError(f"dim must be 2 or 3, got {dim!r}.")
    if not isinstance(resolution, (int, np.integer)) or resolution < 2:
        raise ValueError(f"resolution must be an integer >= 2, got {resolution!r}.")
    if n_obstacles < 0:
        raise ValueError(f"n_obstacles must be >= 0, got {n_obstacles!r}.")
    bad = [s for s in shapes if s not in ("box", "sphere")]
    if bad or not shapes:
        raise ValueError(f"shapes must be a non-empty subset of ('box', 'sphere'), got {shapes!r}.")
    rng = np.random.default_rng(seed)
    centres = (np.arange(resolution) + 0.5) / resolution
    coords = np.meshgrid(*([centres] * dim), indexing="ij")
    labels = np.full((resolution,) * dim, FLUID, np.int8)
    if free_surface:
        level = rng.uniform(*level_range)
        height = np.full(labels.shape, level)
        for axis in range(dim - 1):
            freq = rng.integers(1, 3)
            height = height + wave_amplitude * np.sin(
                2 * np.pi * freq * coords[axis] + rng.uniform(0, 2 * np.pi)
            )
        labels[coords[-1] > height] = AIR
    for _ in range(n_obstacles):
        kind = shapes[rng.integers(len(shapes))]
        centre = rng.uniform(0.15, 0.85, dim)
        if kind == "box":
            half = rng.uniform(*size_range, dim)
            inside = np.all([np.abs(coords[a] - centre[a]) <= half[a] for a in range(dim)], axis=0)
        else:
            radius = rng.uniform(*size_range)
            inside = sum((coords[a] - centre[a]) ** 2 for a in range(dim)) <= radius**2
        labels[inside] = SOLID
    labels = remove_isolated_fluid(labels)
    if not np.any(labels == FLUID):
        raise ValueError("the generated scene has no FLUID cells; use fewer or smaller obstacles.")
    return labels
