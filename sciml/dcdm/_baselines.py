r"""Classical baselines for DCDM, as direction generators for the same `solve`.

Preconditioned CG with a fixed SPD preconditioner `M` is exactly
[`solve`][sciml.dcdm.solve] with `direction_fn = M⁻¹` and `n_orthogonal ≥ 1`
(the new direction `M⁻¹ r` A-orthogonalised against the previous one is PCG's
`p`, and the line search is PCG's `α`), so every baseline runs through the
same iteration, stopping rule, starting vector and outer-loop precision as
DCDM (the dtype of `b`: float64 needs `jax.config.update("jax_enable_x64",
True)` first): only the direction differs.

Each preconditioner is a final subclass of
[`AbstractPreconditionerBuilder`][sciml.dcdm.AbstractPreconditionerBuilder]
whose `build(matrix, shape)` does the setup
(timed) and returns a [`Preconditioner`][sciml.dcdm.Preconditioner]:

- [`Identity`][sciml.dcdm.Identity]: `M = I`, plain CG; needs no matrix
  (`Identity()` is itself a direction function).
- [`Jacobi`][sciml.dcdm.Jacobi]: `M = diag(A)` (in JAX); matrix-free with
  `Jacobi.from_diagonal(diagonal)`.
- [`IncompleteCholesky`][sciml.dcdm.IncompleteCholesky]: IC(0) or modified
  IC(0) with the sparsity of `A`. Neither scipy (its `spilu` is a threshold
  ILU of SuperLU, not IC(0)) nor pyamg provide an incomplete Cholesky, so the
  factorisation is written here over the CSR in numpy; the triangular solves
  are scipy's, reached through `jax.pure_callback`.
- [`SmoothedAggregationAMG`][sciml.dcdm.SmoothedAggregationAMG]: one V-cycle
  of pyamg's smoothed-aggregation solver (the library's, not ours), also
  through `jax.pure_callback`.

`matrix` is a `scipy.sparse` matrix over all grid cells in C order, with empty
rows for cells that are not unknowns (the layout of the Poisson assembly);
the preconditioner works on the non-empty rows and returns zero elsewhere.

**IC(0) and MIC(0).** Write `A = L_A + D_A + L_Aᵀ` and `M = (E + L_A) E⁻¹
(E + L_Aᵀ)` with a diagonal `E`. For a 5-/7-point stencil in natural order
no two lower neighbours of a cell share a lower neighbour, so IC(0) keeps the
off-diagonals of `A` and only the pivots change:

$$e_i = a_{ii} - \sum_{j<i,\ a_{ij}\neq 0}
\frac{a_{ij}^2 + \tau\, a_{ij}\bigl(u_j - a_{ij}\bigr)}{e_j},\qquad
u_j = \sum_{k>j} a_{jk},$$

with `τ = 0` for IC(0); `τ = 1` is MIC(0), which adds the dropped fill back to
the diagonal so that `M 1 = A 1` (`τ = 0.97` is the usual safer choice). A
pivot below `σ a_ii` is reset to `a_ii`.
"""

from __future__ import annotations

import abc
import functools
import time
from collections.abc import Callable

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import scipy.sparse as sp
import scipy.sparse.linalg as spla
from jaxtyping import Array, ArrayLike, Float

from .._custom_types import Real


class Preconditioner(eqx.Module):
    """A built preconditioner: `p(r) = M⁻¹ r` on the grid, and its setup time.

    Pass it as the `direction_fn` of [`solve`][sciml.dcdm.solve] with
    `n_orthogonal >= 1` to get PCG.
    """

    apply: Callable[[Array], Array] = eqx.field(static=True)
    setup_seconds: float = eqx.field(static=True)
    name: str = eqx.field(static=True)

    def __call__(self, r: Float[Array, "*grid"]) -> Float[Array, "*grid"]:
        return self.apply(r)


def _require_matrix(name: str, matrix) -> None:
    """A clear error for a preconditioner that needs `A`'s entries, given none."""
    if matrix is None or callable(matrix) or not hasattr(matrix, "shape"):
        raise ValueError(
            f"{name} needs the assembled matrix (a scipy.sparse matrix or an array) as "
            f"`matrix`, got {type(matrix).__name__}. With a matrix-free operator use "
            "Identity() (plain CG) or Jacobi.from_diagonal(diagonal) (the diagonal of A on "
            "the grid), or assemble A first."
        )


def _active(matrix, shape) -> tuple[sp.csr_matrix, np.ndarray]:
    matrix = sp.csr_matrix(matrix)
    size = int(np.prod(shape))
    if matrix.shape != (size, size):
        raise ValueError(
            f"`matrix` must be {size}×{size} (one row per cell of the grid {tuple(shape)}), "
            f"got {matrix.shape}."
        )
    active = np.flatnonzero(matrix.diagonal() != 0)
    return matrix[active][:, active].tocsr(), active


def _host(fn, active, shape):
    """`r ↦ scatter(fn(gather(r)))` through `jax.pure_callback`."""
    size = int(np.prod(shape))

    def host(r, dtype):
        # the output dtype is fixed at trace time: the callback may run where
        # 64-bit mode is off and hand over a float32 copy of a float64 input
        r = np.asarray(r)
        out = np.zeros(size)
        out[active] = fn(r.reshape(-1)[active].astype(np.float64))
        return out.reshape(r.shape).astype(dtype)

    def apply(r):
        return jax.pure_callback(
            functools.partial(host, dtype=r.dtype),
            jax.ShapeDtypeStruct(r.shape, r.dtype),
            r,
            vmap_method="sequential",
        )

    return apply


class AbstractPreconditionerBuilder(eqx.Module):
    """A classical preconditioner before its setup: `build(matrix, shape)` does
    the setup (timed) and returns a [`Preconditioner`][sciml.dcdm.Preconditioner].

    Subclasses are final and implement `build`; those that need `A`'s entries
    share the setup plumbing (the check of `matrix`, its active rows, the
    timing) through `_timed_build`.
    """

    @abc.abstractmethod
    def build(self, matrix, shape: tuple[int, ...]) -> Preconditioner:
        """The preconditioner of `matrix` (scipy.sparse, one row per grid cell in C
        order, empty rows for cells that are not unknowns) on a grid of `shape`."""


def _timed_build(
    name: str,
    matrix,
    shape: tuple[int, ...],
    setup: Callable[[sp.csr_matrix, np.ndarray], tuple[Callable, str]],
    *,
    on_host: bool = True,
) -> Preconditioner:
    """The build of `name`: checks `matrix`, keeps its active rows (`A`, and
    their cell indices `active`) and times `setup(A, active) -> (fn, label)`.
    With `on_host`, `fn` is a numpy function on the active unknowns, applied on
    the grid through a host callback; otherwise `fn` is already `r ↦ M⁻¹ r` on
    the grid in JAX."""
    _require_matrix(f"{name}.build", matrix)
    start = time.perf_counter()
    A, active = _active(matrix, shape)
    fn, label = setup(A, active)
    apply = _host(fn, active, shape) if on_host else fn
    return Preconditioner(apply, time.perf_counter() - start, label)


class Identity(AbstractPreconditionerBuilder):
    """`M = I`: `solve` with these directions is conjugate gradients.

    Needs no matrix: pass `Identity()` itself as the `direction_fn` of
    [`solve`][sciml.dcdm.solve] (it maps `r ↦ r`), or `Identity().build(None)`
    where a [`Preconditioner`][sciml.dcdm.Preconditioner] is expected.
    """

    def __call__(self, r: Float[Array, "*grid"]) -> Float[Array, "*grid"]:
        return r

    def build(self, matrix=None, shape: tuple[int, ...] | None = None) -> Preconditioner:
        if matrix is not None and not callable(matrix) and shape is not None:
            _active(matrix, shape)
        return Preconditioner(lambda r: r, 0.0, "CG")


def _jacobi(diagonal: np.ndarray) -> Callable[[Array], Array]:
    """`r ↦ r / d` on the grid, zero where `d` is zero."""
    d = np.asarray(diagonal)
    inv = jnp.asarray(np.where(d != 0, 1 / np.where(d != 0, d, 1), 0))
    return lambda r: r * inv.astype(r.dtype)


class Jacobi(AbstractPreconditionerBuilder):
    """`M = diag(A)`, applied in JAX (zero where the diagonal is zero: empty rows).

    From an assembled matrix with `build(matrix, shape)`, or matrix-free from
    the diagonal on the grid with `Jacobi.from_diagonal(diagonal)`.
    """

    def build(self, matrix, shape: tuple[int, ...]) -> Preconditioner:
        def setup(A, active):
            d = np.zeros(int(np.prod(shape)), A.dtype)
            d[active] = A.diagonal()
            return _jacobi(d.reshape(shape)), "Jacobi-PCG"

        return _timed_build("Jacobi", matrix, shape, setup, on_host=False)

    @staticmethod
    def from_diagonal(diagonal: Float[ArrayLike, "*grid"]) -> Preconditioner:
        """`r ↦ r / diag(A)` from the diagonal of `A` on the grid (shape of `b`),
        for a matrix-free operator; cells with a zero diagonal map to zero."""
        diagonal = np.asarray(diagonal)
        if not np.issubdtype(diagonal.dtype, np.floating) and not np.issubdtype(
            diagonal.dtype, np.integer
        ):
            raise ValueError(f"`diagonal` must be a real array, got dtype {diagonal.dtype}.")
        if not np.all(np.isfinite(diagonal)) or np.any(diagonal < 0):
            raise ValueError(
                "`diagonal` must be finite and >= 0 (the diagonal of an SPD matrix; zero on "
                "cells that are not unknowns)."
            )
        return Preconditioner(_jacobi(diagonal.astype(np.float64)), 0.0, "Jacobi-PCG")


def ic0_pivots(matrix, *, tau: Real = 0.0, sigma: Real = 0.25) -> np.ndarray:
    """The pivots `e` of (modified) IC(0) for a symmetric matrix with a 5-/7-point
    stencil pattern (see the module docstring); `tau = 0` is IC(0), `tau = 1`
    MIC(0). A pivot below `sigma · a_ii` is reset to `a_ii`.

    **Returns:** `e`, one pivot per row (all rows must have `a_ii > 0`).
    """
    A = sp.csr_matrix(matrix)
    diag = A.diagonal()
    if np.any(diag <= 0):
        raise ValueError("`matrix` must have a positive diagonal (drop empty rows first).")
    lower = sp.tril(A, k=-1, format="csr")
    upper_sum = np.asarray(sp.triu(A, k=1).sum(axis=1)).ravel()
    indptr, indices, data = lower.indptr, lower.indices.tolist(), lower.data.tolist()
    e = np.empty(A.shape[0])
    e_list = [0.0] * A.shape[0]
    diag_list, u = diag.tolist(), upper_sum.tolist()
    tau, sigma = float(tau), float(sigma)
    for i in range(A.shape[0]):
        s = diag_list[i]
        for p in range(indptr[i], indptr[i + 1]):
            j, a = indices[p], data[p]
            s -= (a * a + tau * a * (u[j] - a)) / e_list[j]
        if s < sigma * diag_list[i]:
            s = diag_list[i]
        e_list[i] = s
    e[:] = e_list
    return e


class IncompleteCholesky(AbstractPreconditionerBuilder):
    """IC(0) (`modified=False`) or MIC(0) (`modified=True`) preconditioner.

    **Arguments:**

    - `modified`: add the dropped fill to the diagonal (MIC).
    - `tau`: the MIC weight (0.97; 1 is pure MIC(0)); ignored for IC(0).
    - `sigma`: pivot safeguard (a pivot below `sigma · a_ii` becomes `a_ii`).
    """

    modified: bool = False
    tau: Real = 0.97
    sigma: Real = 0.25

    def __check_init__(self):
        if not 0.0 <= float(self.tau) <= 1.0:
            raise ValueError(f"`tau` must be in [0, 1] (1 is pure MIC(0)), got {self.tau}.")
        if not 0.0 <= float(self.sigma) < 1.0:
            raise ValueError(
                f"`sigma` must be in [0, 1) (a fraction of the diagonal), got {self.sigma}."
            )

    def build(self, matrix, shape: tuple[int, ...]) -> Preconditioner:
        return _timed_build("IncompleteCholesky", matrix, shape, self._factorise)

    def _factorise(self, A, active):
        """`r ↦ M⁻¹ r` on the active unknowns (numpy; two triangular solves) and its
        label, from the factorisation of `A` (active rows only)."""
        e = ic0_pivots(A, tau=self.tau if self.modified else 0.0, sigma=self.sigma)
        E = sp.diags(e)
        lower = (E + sp.tril(A, k=-1)).tocsr()
        upper = (E + sp.triu(A, k=1)).tocsr()

        def solve_m(r):
            y = spla.spsolve_triangular(lower, r, lower=True)
            return spla.spsolve_triangular(upper, e * y, lower=False)

        name = "MIC(0)-PCG" if self.modified else "IC(0)-PCG"
        return solve_m, name


class SmoothedAggregationAMG(AbstractPreconditionerBuilder):
    """One V-cycle of `pyamg.smoothed_aggregation_solver(A)` per application.

    **Arguments:** `max_coarse`: the size below which pyamg solves directly;
    the V-cycle is symmetric (pyamg's default symmetric Gauss–Seidel sweeps),
    so PCG applies.
    """

    max_coarse: int = 10

    def build(self, matrix, shape: tuple[int, ...]) -> Preconditioner:
        import pyamg

        def setup(A, active):
            ml = pyamg.smoothed_aggregation_solver(A, max_coarse=self.max_coarse)
            return ml.aspreconditioner(cycle="V").matvec, "AMG-PCG"

        return _timed_build("SmoothedAggregationAMG", matrix, shape, setup)
