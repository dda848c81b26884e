r"""Pressure-Poisson systems on voxel grids (2-D and 3-D), as used by DCDM.

Every cell of an `(n, n)` or `(n, n, n)` grid carries a label: `FLUID` (an
unknown), `SOLID` (obstacle: zero normal flux, Neumann) or `AIR` (free surface:
`p = 0`, Dirichlet). Outside the grid counts as `SOLID`. The `h²`-scaled
5-point (2-D) / 7-point (3-D) Laplacian in SPD sign, for a FLUID cell `i`:

$$A_{ii} = \#\{\text{face neighbours that are FLUID or AIR}\}, \qquad
A_{ij} = -1 \ \text{for each FLUID face neighbour } j,$$

faces towards SOLID cells are dropped; rows and columns of non-fluid cells are
empty. `A` is symmetric positive semidefinite; each connected FLUID component
that touches no AIR cell contributes exactly one null vector, the constant on
that component, and `A` is definite on the others. [`project_rhs`][solvers.poisson.project_rhs] makes a
right-hand side consistent (`b ∈ range(A)`).

Provided both as a `scipy.sparse` CSR matrix over all cells (the layout of the
reference DCDM code, empty rows for non-fluid cells) or over fluid cells only,
and as a matrix-free JAX operator ([`PoissonOperator`][solvers.poisson.PoissonOperator]) that applies the same
matrix to a field on the grid.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
import scipy.ndimage as ndi
import scipy.sparse as sp
import scipy.sparse.linalg as spla

from ._poisson_jax import PoissonOperator, apply_poisson
from ._scenes import (
    AIR,
    FLUID,
    SOLID,
    _open_neighbours,
    check_labels,
    make_scene,
    remove_isolated_fluid,
)


__all__ = [
    "AIR",
    "FLUID",
    "SHARED_KEYS",
    "SOLID",
    "PoissonOperator",
    "apply_poisson",
    "assemble",
    "check_labels",
    "closed_components",
    "direct_solver",
    "make_dataset",
    "make_scene",
    "neighbour_counts",
    "project_rhs",
    "random_rhs",
    "remove_isolated_fluid",
    "solve",
    "velocity_divergence",
]

SHARED_KEYS: tuple[str, ...] = ()


def neighbour_counts(labels: np.ndarray) -> np.ndarray:
    """Number of face neighbours of each cell that are FLUID or AIR (the
    diagonal of `A` at fluid cells; neighbours outside the grid are SOLID)."""
    return _open_neighbours(check_labels(labels))


def assemble(labels: np.ndarray, *, reduced: bool = False) -> sp.csr_matrix:
    """The Poisson matrix of a label grid as CSR.

    **Arguments:**

    - `labels`: integer grid `(n, n)` or `(n, n, n)` of `FLUID`/`SOLID`/`AIR`.
    - `reduced`: if False (default) the matrix has one row per cell (C order,
      `x.ravel()`), empty for non-fluid cells; if True only fluid cells, in the
      order of `np.flatnonzero(labels.ravel() == FLUID)`.

    **Returns:** a symmetric `scipy.sparse.csr_matrix` (float64).
    """
    labels = check_labels(labels)
    shape = labels.shape
    fluid = labels == FLUID
    index = np.arange(labels.size).reshape(shape)
    rows = [index[fluid]]
    cols = [index[fluid]]
    vals = [neighbour_counts(labels)[fluid].astype(float)]
    for axis in range(labels.ndim):
        lo = [slice(None)] * labels.ndim
        hi = [slice(None)] * labels.ndim
        lo[axis] = slice(None, -1)
        hi[axis] = slice(1, None)
        both = fluid[tuple(lo)] & fluid[tuple(hi)]
        a, b = index[tuple(lo)][both], index[tuple(hi)][both]
        rows += [a, b]
        cols += [b, a]
        vals += [-np.ones(a.size), -np.ones(a.size)]
    matrix = sp.coo_matrix(
        (np.concatenate(vals), (np.concatenate(rows), np.concatenate(cols))),
        shape=(labels.size, labels.size),
    ).tocsr()
    if reduced:
        keep = np.flatnonzero(fluid.ravel())
        matrix = matrix[keep][:, keep].tocsr()
    return matrix


def closed_components(labels: np.ndarray) -> list[np.ndarray]:
    """Boolean masks of the face-connected FLUID components touching no AIR
    cell: exactly the supports of the null vectors of `A`."""
    labels = check_labels(labels)
    comp, count = ndi.label(labels == FLUID)
    air_near = ndi.binary_dilation(
        labels == AIR, structure=ndi.generate_binary_structure(labels.ndim, 1)
    )
    touching = set(np.unique(comp[air_near & (comp > 0)]).tolist())
    return [comp == c for c in range(1, count + 1) if c not in touching]


def null_space(labels: np.ndarray) -> np.ndarray:
    """An orthonormal basis of the null space of `A`, shape `(k, *labels.shape)`:
    one normalised indicator per closed fluid component (`k = 0` when every
    component touches air)."""
    masks = closed_components(labels)
    basis = np.zeros((len(masks), *np.shape(labels)))
    for i, mask in enumerate(masks):
        basis[i][mask] = 1 / np.sqrt(mask.sum())
    return basis


def project_rhs(labels: np.ndarray, b: np.ndarray) -> np.ndarray:
    """`b` made consistent: zero at non-fluid cells and zero mean on every
    closed fluid component, i.e. the orthogonal projection onto `range(A)`."""
    labels = check_labels(labels)
    b = np.where(labels == FLUID, np.asarray(b, dtype=float), 0.0)
    for mask in closed_components(labels):
        b[mask] -= b[mask].mean()
    return b


def velocity_divergence(labels: np.ndarray, velocity: np.ndarray) -> np.ndarray:
    """The discrete divergence `div u` on the cells of a cell-centred velocity
    `velocity` (`(dim, *grid)`), in grid units (`h = 1`).

    Face velocities are the mean of the two cells a face joins, and zero on
    every face of a SOLID cell and on the grid's boundary (a wall), so that
    `div u` summed over a closed fluid component is zero (no flux through its
    walls): `−div u` is a consistent right-hand side of the scene's matrix.
    Returns `(*grid)`, zero at non-fluid cells.
    """
    labels = check_labels(labels)
    velocity = np.asarray(velocity, dtype=float)
    if velocity.shape != (labels.ndim, *labels.shape):
        raise ValueError(
            f"velocity must have shape {(labels.ndim, *labels.shape)} (one component per "
            f"axis on the grid), got {velocity.shape}."
        )
    open_ = labels != SOLID
    div = np.zeros(labels.shape)
    for axis in range(labels.ndim):
        u = np.moveaxis(velocity[axis], axis, 0)
        o = np.moveaxis(open_, axis, 0)
        # the interior faces along `axis`; boundary faces stay zero
        face = 0.5 * (u[1:] + u[:-1]) * (o[1:] & o[:-1])
        flux = np.zeros((u.shape[0] + 1, *u.shape[1:]))
        flux[1:-1] = face
        div += np.moveaxis(flux[1:] - flux[:-1], 0, axis)
    return np.where(labels == FLUID, div, 0.0)


def random_rhs(
    labels: np.ndarray,
    *,
    seed: int | Sequence[int],
    kind: str = "smooth",
    smoothing: float = 2.0,
) -> np.ndarray:
    """A unit-norm right-hand side in `range(A)`, deterministic in `seed`.

    `kind`: `"noise"` (white noise on fluid cells), `"smooth"` (white noise
    blurred by a Gaussian of `smoothing` cells, closer to the divergence of a
    velocity field), `"range"` (`A z` for white noise `z`) or `"divergence"`
    (`b = −div u*` of a random smooth velocity `u*`, a pressure projection's
    right-hand side: see [`velocity_divergence`][solvers.poisson.velocity_divergence],
    each component white noise blurred by `smoothing` cells). Every kind is
    then projected with [`project_rhs`][solvers.poisson.project_rhs] and normalised.
    """
    labels = check_labels(labels)
    rng = np.random.default_rng(seed)
    if kind == "divergence":
        velocity = rng.standard_normal((labels.ndim, *labels.shape))
        velocity = np.stack([ndi.gaussian_filter(u, smoothing, mode="wrap") for u in velocity])
        b = -velocity_divergence(labels, velocity)
    else:
        z = rng.standard_normal(labels.shape)
    if kind == "noise":
        b = z
    elif kind == "smooth":
        b = ndi.gaussian_filter(z, smoothing, mode="wrap")
    elif kind == "range":
        b = (assemble(labels) @ np.where(labels == FLUID, z, 0).ravel()).reshape(labels.shape)
    elif kind != "divergence":
        raise ValueError(f"kind must be 'noise', 'smooth', 'range' or 'divergence', got {kind!r}.")
    b = project_rhs(labels, b)
    norm = np.linalg.norm(b)
    if norm == 0:
        raise ValueError("the scene's fluid cells admit no non-zero consistent right-hand side.")
    return b / norm


def direct_solver(labels: np.ndarray) -> Callable[[np.ndarray], np.ndarray]:
    """Factorises the scene's matrix once (sparse LU); returns `b ↦ x` with
    `A x = b`, as [`solve`][solvers.poisson.solve] but without refactorising
    for every right-hand side (a 32³ scene: one factorisation, then a pair of
    triangular solves per `b`).

    `b` must be consistent (see [`project_rhs`][solvers.poisson.project_rhs]); on every closed component
    the solution is fixed by pinning one cell and then shifting it to zero mean
    (the minimum-norm solution). The returned function gives `x` on the grid,
    zero at non-fluid cells.
    """
    labels = check_labels(labels)
    fluid_idx = np.flatnonzero(labels.ravel() == FLUID)
    closed = closed_components(labels)
    matrix = assemble(labels, reduced=True)
    position = np.full(labels.size, -1)
    position[fluid_idx] = np.arange(fluid_idx.size)
    pinned = np.array([position[np.flatnonzero(m.ravel())[0]] for m in closed], dtype=int)
    free = np.setdiff1d(np.arange(fluid_idx.size), pinned)
    factor = spla.splu(matrix[free][:, free].tocsc()) if free.size else None

    def apply(b: np.ndarray) -> np.ndarray:
        b = np.asarray(b, dtype=float)
        if b.shape != labels.shape:
            raise ValueError(f"b must have the shape of labels {labels.shape}, got {b.shape}.")
        for mask in closed:
            mean = b[mask].mean()
            if abs(mean) > 1e-8 * max(1.0, np.abs(b[mask]).max()):
                raise ValueError(
                    "b is not in the range of A: it has non-zero mean on a fluid region "
                    "that touches no air cell; pass it through project_rhs first."
                )
        sol = np.zeros(fluid_idx.size)
        if factor is not None:
            sol[free] = factor.solve(b.ravel()[fluid_idx][free])
        x = np.zeros(labels.size)
        x[fluid_idx] = sol
        x = x.reshape(labels.shape)
        for mask in closed:
            x[mask] -= x[mask].mean()
        return x

    return apply


def solve(labels: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Solves `A x = b` by a sparse direct factorisation (one right-hand side;
    for many, factorise once with [`direct_solver`][solvers.poisson.direct_solver]).

    `b` must be consistent (see [`project_rhs`][solvers.poisson.project_rhs]); on every closed component
    the solution is fixed by pinning one cell and then shifting it to zero mean
    (the minimum-norm solution). **Returns:** `x` on the grid, zero at non-fluid
    cells.
    """
    return direct_solver(labels)(b)


def make_dataset(
    n: int,
    resolution: int,
    *,
    seed: int,
    dim: int = 2,
    n_obstacles: int = 3,
    free_surface: bool = True,
    rhs: str = "smooth",
    start: int = 0,
) -> dict[str, np.ndarray]:
    """Random scenes with a consistent right-hand side and its solution.

    Sample `i` depends only on `(seed, start + i)`.

    **Returns:** `{"inputs": b (n, *grid), "outputs": x (n, *grid), "labels":
    (n, *grid) int8}` with `grid = (resolution,) * dim`.
    """
    shape = (n, *(resolution,) * dim)
    out = {
        "inputs": np.zeros(shape),
        "outputs": np.zeros(shape),
        "labels": np.zeros(shape, np.int8),
    }
    for i in range(n):
        labels = make_scene(
            resolution,
            dim=dim,
            seed=(seed, start + i),
            n_obstacles=n_obstacles,
            free_surface=free_surface,
        )
        b = random_rhs(labels, seed=(seed, start + i, 1), kind=rhs)
        out["labels"][i] = labels
        out["inputs"][i] = b
        out["outputs"][i] = solve(labels, b)
    return out
