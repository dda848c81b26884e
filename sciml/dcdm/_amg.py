r"""An algebraic-multigrid V-cycle applied in JAX, so that it runs on the device.

[`SmoothedAggregationAMG`][sciml.dcdm.SmoothedAggregationAMG] applies pyamg's
V-cycle through a host callback: on a GPU every application copies the
residual to the host and back, and pyamg's default smoother (symmetric
Gauss–Seidel) is sequential. [`DeviceAMG`][sciml.dcdm.DeviceAMG] lets pyamg
build the smoothed-aggregation hierarchy once on the host (aggregation, the
smoothed prolongations `P_l`, `R_l = P_lᵀ`, the Galerkin products
`A_{l+1} = R_l A_l P_l`) and applies the cycle in JAX: every level operation is
a sparse matrix–vector product (ELLPACK: a gather and a sum along rows padded
to the longest; at most 2.4× the stored entries on the Poisson hierarchies
here) or a dense one, which XLA runs on the accelerator.

The smoother is damped Jacobi, `x ← x + ω D_l⁻¹ (b − A_l x)`, `ν` sweeps before
and after the coarse-grid correction: a product of sparse matvecs, unlike
Gauss–Seidel. The coarsest system is solved with its pseudo-inverse,
computed once on the host (pyamg's `coarse_solver="pinv"`, which also covers
the singular coarse matrix of a closed domain) and applied as a dense matvec.
One application, with `x = 0` on entry to every level:

$$x_l = S_l^\nu(0; b_l),\quad
x_l \mathrel{+}= P_l\, \mathrm{cycle}_{l+1}\bigl(R_l (b_l - A_l x_l)\bigr),\quad
x_l = S_l^\nu(x_l; b_l),$$

which is exactly `pyamg.smoothed_aggregation_solver(A, presmoother=("jacobi",
{"omega": ω, "withrho": False, "iterations": ν}), postsmoother=(same),
coarse_solver="pinv").aspreconditioner(cycle="V")` (`DeviceAMG.hierarchy`
builds that solver). Pre- and post-smoother being the same symmetric sweep,
the cycle is a symmetric positive definite `M⁻¹` for `0 < ω ρ(D⁻¹A) < 2`
(`ρ ≤ 2` for the Poisson matrices here, so `ω ≤ 1`), as PCG requires.
"""

from __future__ import annotations

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import scipy.linalg
import scipy.sparse as sp
from jaxtyping import Array, Float, Int

from .._checks import check_positive_int
from .._custom_types import Real
from ._baselines import AbstractPreconditionerBuilder, Preconditioner, _require_matrix, _timed_build


class ELLMatrix(eqx.Module):
    """A sparse matrix as JAX arrays in ELLPACK form: each row's entries and
    column indices padded (with zeros, column 0) to the longest row's count,
    so that `A @ x` is one gather and a sum along rows, run as dense kernels
    on an accelerator in a fixed order (no scatter, no atomics)."""

    data: Float[Array, "n_rows width"]
    columns: Int[Array, "n_rows width"]

    @classmethod
    def from_scipy(cls, matrix, dtype) -> ELLMatrix:
        matrix = sp.csr_matrix(matrix)
        counts = np.diff(matrix.indptr)
        width = max(int(counts.max(initial=0)), 1)
        rows = np.repeat(np.arange(matrix.shape[0]), counts)
        slots = np.arange(matrix.nnz) - np.repeat(matrix.indptr[:-1], counts)
        data = np.zeros((matrix.shape[0], width))
        columns = np.zeros((matrix.shape[0], width), np.int32)
        data[rows, slots] = matrix.data
        columns[rows, slots] = matrix.indices
        return cls(jnp.asarray(data, dtype), jnp.asarray(columns))

    def __matmul__(self, x: Float[Array, " n"]) -> Float[Array, " n_rows"]:
        return jnp.sum(self.data.astype(x.dtype) * x[self.columns], axis=1)


class AMGLevel(eqx.Module):
    """One level of the hierarchy: `A`, `1/diag(A)`, and the transfers to the next."""

    A: ELLMatrix
    inverse_diagonal: Float[Array, " n"]
    P: ELLMatrix
    R: ELLMatrix


class AMGHierarchy(eqx.Module):
    """The levels of a multigrid hierarchy, the coarsest matrix's pseudo-inverse
    and the Jacobi smoother's weight and sweeps."""

    levels: tuple[AMGLevel, ...]
    coarse_inverse: Float[Array, "nc nc"]
    omega: float = eqx.field(static=True)
    sweeps: int = eqx.field(static=True)

    @classmethod
    def from_pyamg(cls, ml, omega: float, sweeps: int) -> AMGHierarchy:
        """The hierarchy of a pyamg `MultilevelSolver` (its `A`, `P`, `R` per level)."""
        dtype = jnp.float64 if jax.config.jax_enable_x64 else jnp.float32
        levels = tuple(
            AMGLevel(
                ELLMatrix.from_scipy(level.A, dtype),
                jnp.asarray(1 / level.A.diagonal(), dtype),
                ELLMatrix.from_scipy(level.P, dtype),
                ELLMatrix.from_scipy(level.R, dtype),
            )
            for level in ml.levels[:-1]
        )
        coarse = scipy.linalg.pinv(ml.levels[-1].A.toarray())
        return cls(levels, jnp.asarray(coarse, dtype), float(omega), int(sweeps))

    def smooth(self, level: AMGLevel, x: Array, b: Array) -> Array:
        """`sweeps` damped Jacobi sweeps `x ← x + ω D⁻¹ (b − A x)`."""
        weight = (self.omega * level.inverse_diagonal).astype(b.dtype)
        for _ in range(self.sweeps):
            x = x + weight * (b - level.A @ x)
        return x

    def cycle(self, b: Float[Array, " n"], depth: int = 0) -> Float[Array, " n"]:
        """One V-cycle from `x = 0` on level `depth` for the right-hand side `b`."""
        if depth == len(self.levels):
            return self.coarse_inverse.astype(b.dtype) @ b
        level = self.levels[depth]
        x = self.smooth(level, jnp.zeros_like(b), b)
        x = x + level.P @ self.cycle(level.R @ (b - level.A @ x), depth + 1)
        return self.smooth(level, x, b)


def _check_matrix(matrix) -> sp.csr_matrix:
    """`matrix` as a float64 CSR matrix, refused unless square, real and symmetric."""
    _require_matrix("DeviceAMG.build", matrix)
    if len(matrix.shape) != 2 or matrix.shape[0] != matrix.shape[1]:
        raise ValueError(f"`matrix` must be square (n×n), got shape {tuple(matrix.shape)}.")
    dtype = np.dtype(matrix.dtype)
    if not np.issubdtype(dtype, np.floating):
        raise TypeError(
            f"`matrix` must have a real floating dtype (float32 or float64), got {dtype}."
        )
    A = sp.csr_matrix(matrix, dtype=np.float64)
    asymmetry = abs(A - A.T).max() if A.nnz else 0.0
    if not asymmetry <= 1e-12 * (abs(A).max() if A.nnz else 1.0):
        raise ValueError(
            f"`matrix` must be symmetric (an SPD system for PCG), got max |A - Aᵀ| = "
            f"{asymmetry:.3g}; a non-symmetric matrix needs another preconditioner and solver."
        )
    return A


class DeviceAMG(AbstractPreconditionerBuilder):
    """One smoothed-aggregation V-cycle per application, applied in JAX (on the
    device); pyamg builds the hierarchy on the host once, in `build`.

    **Arguments:**

    - `max_coarse`: the size below which the hierarchy stops (pyamg's).
    - `omega`: the damped-Jacobi weight, `0 < omega <= 1` (the cycle is SPD
      when `omega · ρ(D⁻¹A) < 2`).
    - `sweeps`: Jacobi sweeps before and after each coarse-grid correction.

    `build(matrix, shape)` returns the [`Preconditioner`][sciml.dcdm.Preconditioner]
    (`"AMG-PCG (device)"`), whose setup time is pyamg's hierarchy build plus
    the copy of the level matrices to the device. `matrix` must be square,
    real and symmetric (empty rows for cells that are not unknowns, as for
    the other baselines).
    """

    max_coarse: int = 10
    omega: Real = 2 / 3
    sweeps: int = 1

    def __check_init__(self):
        check_positive_int("max_coarse", self.max_coarse)
        check_positive_int("sweeps", self.sweeps)
        if not 0 < float(self.omega) <= 1:
            raise ValueError(f"`omega` must be a real number in (0, 1], got {self.omega!r}.")

    def hierarchy(self, matrix):
        """pyamg's smoothed-aggregation solver of `matrix` (its active rows) with
        this smoother and coarse solve: the host-side solver whose V-cycle
        `build` applies in JAX (the same hierarchy for the same matrix)."""
        import pyamg

        smoother = ("jacobi", {"omega": float(self.omega), "withrho": False})
        smoother[1]["iterations"] = int(self.sweeps)
        # the prolongation smoother's ρ(D⁻¹A) is estimated from random vectors of
        # numpy's global generator: seeded, so that a matrix has one hierarchy
        state = np.random.get_state()  # noqa: NPY002 (pyamg's generator)
        np.random.seed(0)  # noqa: NPY002
        try:
            return pyamg.smoothed_aggregation_solver(
                matrix,
                max_coarse=int(self.max_coarse),
                presmoother=smoother,
                postsmoother=smoother,
                coarse_solver="pinv",
            )
        finally:
            np.random.set_state(state)  # noqa: NPY002

    def build(self, matrix, shape: tuple[int, ...]) -> Preconditioner:
        matrix = _check_matrix(matrix)

        def setup(A, active):
            if np.any(A.diagonal() < 0):
                raise ValueError(
                    "`matrix` must have a positive diagonal on its non-empty rows (an SPD "
                    "matrix), got a negative diagonal entry."
                )
            hierarchy = AMGHierarchy.from_pyamg(self.hierarchy(A), self.omega, self.sweeps)
            index = jnp.asarray(active)
            jax.block_until_ready(hierarchy)

            def apply(r):
                flat = r.reshape(-1)
                out = jnp.zeros_like(flat).at[index].set(hierarchy.cycle(flat[index]))
                return out.reshape(r.shape)

            return apply, "AMG-PCG (device)"

        return _timed_build("DeviceAMG", matrix, shape, setup, on_host=False)
