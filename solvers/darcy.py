r"""Steady Darcy flow `−∇·(a ∇u) = f` on the unit square, `u = 0` on the boundary.

The FNO Darcy benchmark (Li et al., ICLR 2021): the coefficient is a thresholded
Gaussian random field, `a = 12` where `g ≥ 0` and `a = 3` where `g < 0`, with
`g ~ N(0, (−Δ + 9 I)^{−2})` under zero Neumann conditions (cosine series).

Discretisation: the node grid `x_i = i/(s−1)`, `i = 0..s−1` (boundary nodes
included, `h = 1/(s−1)`), second-order finite differences in conservation form
with harmonic-mean face coefficients,

$$\frac{1}{h^2}\Big[\sum_{\text{faces}} a_{f}\Big] u_{ij}
- \frac{1}{h^2}\sum_{\text{neighbours}} a_{f}\, u_{\text{nb}} = f_{ij},\qquad
a_{i+1/2,j} = \frac{2 a_{ij} a_{i+1,j}}{a_{ij} + a_{i+1,j}},$$

over the `(s−2)²` interior nodes, assembled as a `scipy.sparse` CSR matrix and
solved by a sparse direct (SuperLU) factorisation. Plain numpy/scipy.

**Nesting of grids.** With boundary nodes included, `s_fine = 2 s_coarse − 1`
nests: `x_fine[2i] = x_coarse[i]`. The random coefficient is the same function
at every resolution (a fixed number `n_modes` of cosine modes with band-wise
noise), so `a_fine[::2, ::2] == a_coarse` exactly and
`u_fine[::2, ::2] ≈ u_coarse` up to the coarse grid's discretisation error.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import scipy.sparse as sp
import scipy.sparse.linalg as spla

from ._grf import cosine_grf, cosine_noise
from ._grid import check_resolution


__all__ = [
    "DarcyParams",
    "SHARED_KEYS",
    "assemble",
    "harmonic_faces",
    "make_dataset",
    "random_coefficient",
    "solve",
]

#: Keys of `make_dataset`'s output shared by all samples (none for Darcy).
SHARED_KEYS: tuple[str, ...] = ()


@dataclasses.dataclass(frozen=True)
class DarcyParams:
    """Parameters of the random coefficient and the right-hand side.

    - `a_high`, `a_low`: coefficient values where the field is `≥ 0` / `< 0`
      (FNO: 12 and 3).
    - `alpha`, `tau`: the field's covariance `(−Δ + tau² I)^(−alpha)` (FNO: 2, 3).
    - `n_modes`: cosine modes per axis of the field (fixed, so that every
      resolution samples the same function).
    - `forcing`: the constant right-hand side `f` (FNO: 1).
    """

    a_high: float = 12.0
    a_low: float = 3.0
    alpha: float = 2.0
    tau: float = 3.0
    n_modes: int = 64
    forcing: float = 1.0

    def __post_init__(self):
        if not (self.a_high > 0 and self.a_low > 0):
            raise ValueError(
                f"a_high and a_low must be positive, got {self.a_high!r}, {self.a_low!r}."
            )
        if not (isinstance(self.n_modes, (int, np.integer)) and self.n_modes >= 2):
            raise ValueError(f"n_modes must be an integer >= 2, got {self.n_modes!r}.")
        if not (self.alpha > 0 and self.tau > 0):
            raise ValueError(f"alpha and tau must be positive, got {self.alpha!r}, {self.tau!r}.")


def random_coefficient(
    seed: int, index: int, resolution: int, params: DarcyParams = DarcyParams()
) -> np.ndarray:
    """The thresholded random coefficient of sample `index` for `seed`.

    **Returns:** `(s, s)` array of `params.a_high` / `params.a_low` on the nodes
    `x_i = i/(s−1)`; depends only on `(seed, index, params)`, not on `s` beyond
    where it is sampled.
    """
    check_resolution(resolution, periodic=False)
    noise = cosine_noise((int(seed), int(index)), params.n_modes)
    x = np.linspace(0.0, 1.0, resolution)
    g = cosine_grf(
        x, noise, alpha=params.alpha, tau=params.tau, sigma=params.tau ** (params.alpha - 1)
    )
    return np.where(g >= 0, params.a_high, params.a_low)


def harmonic_faces(a: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Harmonic means of `a` across the faces between neighbouring nodes.

    **Returns:** `(ax, ay)` with `ax[i, j] = 2 a[i,j] a[i+1,j] / (a[i,j] + a[i+1,j])`,
    shape `(s−1, s)`, and `ay` likewise along axis 1, shape `(s, s−1)`.
    """
    ax = 2 * a[1:, :] * a[:-1, :] / (a[1:, :] + a[:-1, :])
    ay = 2 * a[:, 1:] * a[:, :-1] / (a[:, 1:] + a[:, :-1])
    return ax, ay


def assemble(a: np.ndarray) -> sp.csr_matrix:
    """The finite-difference matrix of `−∇·(a∇·)` with zero Dirichlet boundary.

    **Arguments:** `a`: positive coefficient on the `(s, s)` node grid.

    **Returns:** CSR matrix of size `(s−2)² × (s−2)²` acting on the interior
    nodes in row-major order (`u[1:-1, 1:-1].ravel()`), scaled by `1/h²`.
    Symmetric positive definite.
    """
    a = np.asarray(a, dtype=float)
    if a.ndim != 2 or a.shape[0] != a.shape[1] or a.shape[0] < 3:
        raise ValueError(f"a must be a square (s, s) array with s >= 3, got shape {a.shape}.")
    if not np.all(a > 0):
        raise ValueError("a must be positive everywhere.")
    s = a.shape[0]
    m = s - 2
    h = 1.0 / (s - 1)
    ax, ay = harmonic_faces(a)
    west, east = ax[:-1, 1:-1], ax[1:, 1:-1]  # faces (i-1/2, j), (i+1/2, j) at interior nodes
    south, north = ay[1:-1, :-1], ay[1:-1, 1:]
    idx = np.arange(m * m).reshape(m, m)
    rows = [idx.ravel()]
    cols = [idx.ravel()]
    vals = [(west + east + south + north).ravel()]
    for coef, shift, axis in ((west, -1, 0), (east, 1, 0), (south, -1, 1), (north, 1, 1)):
        sl_self = [slice(None), slice(None)]
        sl_nb = [slice(None), slice(None)]
        sl_self[axis] = slice(1, None) if shift < 0 else slice(None, -1)
        sl_nb[axis] = slice(None, -1) if shift < 0 else slice(1, None)
        rows.append(idx[tuple(sl_self)].ravel())
        cols.append(idx[tuple(sl_nb)].ravel())
        vals.append(-coef[tuple(sl_self)].ravel())
    matrix = sp.coo_matrix(
        (np.concatenate(vals) / h**2, (np.concatenate(rows), np.concatenate(cols))),
        shape=(m * m, m * m),
    )
    return matrix.tocsr()


def solve(a: np.ndarray, f: float | np.ndarray = 1.0) -> np.ndarray:
    """Solves `−∇·(a∇u) = f`, `u = 0` on the boundary of the unit square.

    **Arguments:**

    - `a`: positive coefficient on the node grid `(s, s)`, `x_i = i/(s−1)`.
    - `f`: right-hand side, a constant or an `(s, s)` array (boundary values
      ignored).

    **Returns:** `u` of shape `(s, s)` with zero boundary rows and columns.
    """
    matrix = assemble(a)
    s = np.shape(a)[0]
    f = np.asarray(f, dtype=float)
    if f.shape not in ((), (s, s)):
        raise ValueError(
            f"`f` must be a number or an array of the node grid of `a` {(s, s)}, got shape "
            f"{f.shape}."
        )
    rhs = np.broadcast_to(f, (s, s))[1:-1, 1:-1].ravel()
    u = np.zeros((s, s))
    u[1:-1, 1:-1] = spla.spsolve(matrix.tocsc(), rhs).reshape(s - 2, s - 2)
    return u


def make_dataset(
    n: int,
    resolution: int,
    *,
    seed: int,
    a_high: float = 12.0,
    a_low: float = 3.0,
    alpha: float = 2.0,
    tau: float = 3.0,
    n_modes: int = 64,
    forcing: float = 1.0,
    start: int = 0,
) -> dict[str, np.ndarray]:
    """Darcy samples `(a, u)`; sample `i` depends only on `(seed, start + i)`.

    **Arguments:** `n` samples at `resolution` nodes per side (boundary
    included), `seed`, the [`DarcyParams`][solvers.darcy.DarcyParams] fields,
    and `start`, the index of the first sample.

    **Returns:** `{"inputs": a (n, s, s), "outputs": u (n, s, s)}` in float64.
    """
    check_resolution(resolution, periodic=False)
    if n < 0:
        raise ValueError(f"n must be >= 0, got {n!r}.")
    params = DarcyParams(a_high, a_low, alpha, tau, n_modes, forcing)
    a = np.zeros((n, resolution, resolution))
    u = np.zeros((n, resolution, resolution))
    for i in range(n):
        a[i] = random_coefficient(seed, start + i, resolution, params)
        u[i] = solve(a[i], params.forcing)
    return {"inputs": a, "outputs": u}
