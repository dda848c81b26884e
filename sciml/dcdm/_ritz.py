r"""Ritz vectors by Lanczos with full reorthogonalisation, and DCDM's training
right-hand sides built from them (Kaneda et al., ICML 2023, §4).

Lanczos from `v₁ = A z / ‖A z‖` (`z ~ N(0, I)`, so `v₁ ∈ range(A)` and the
null space of a singular `A` is never entered) builds an orthonormal basis
`V_m` and the tridiagonal `T_m = V_mᵀ A V_m` (diagonal `α`, off-diagonal `β`).
Each eigenpair `T_m y = θ y` gives a Ritz pair `(θ, V_m y)` with the residual

$$\lVert A V_m y - \theta V_m y \rVert_2 = \beta_m \lvert y_m \rvert ,$$

so the extreme Ritz values converge first to the extreme eigenvalues of `A`.
Ritz values below `1e-8` (the null space seen through round-off) are dropped.

A training right-hand side is `b = normalise(Σ_j c_j v_j)`, `c_j ~ N(0, 1)`,
with `c_j` multiplied by `factor` (9) for the lowest `low_fraction` of the Ritz
values: the smooth modes, which CG resolves last, get 81× the variance.

**Memory.** The basis is held in float64 (`m · N · 8` bytes for `N` grid
cells) and the Ritz vectors are formed in float64 and stored in float32, so
the peak is about `m · N · 20` bytes. At 64³ (`N = 262,144`) with the default
`m = 1,600` (the follow-up paper's choice) that is 3.4 GB (basis) + 3.4 GB
(Ritz vectors) + 1.7 GB (float32 copy) ≈ 8.4 GB, inside 24 GB; the paper's
`m = 10,000` would need 21 GB for the basis alone. The full
reorthogonalisation costs `4 m² N ≈ 2.7·10¹²` flops at 64³.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import scipy.linalg

from .._custom_types import Real


def lanczos(
    apply_A: Callable[[np.ndarray], np.ndarray],
    shape: tuple[int, ...],
    m: int,
    *,
    seed: int = 0,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, float]:
    """`m` steps of Lanczos with full reorthogonalisation, started in `range(A)`.

    **Arguments:**

    - `apply_A`: `x ↦ A x` on numpy arrays of shape `shape` (symmetric PSD).
    - `shape`: the grid shape.
    - `m`: the number of steps (stops early if the Krylov space is exhausted).
    - `seed`: seeds the start vector `A z`, `z ~ N(0, I)`.

    **Returns:** `(V, alpha, beta, beta_m)`: the orthonormal basis `V` of shape
    `(k, N)` (`k ≤ m` steps taken), the diagonal `alpha (k,)` and
    off-diagonal `beta (k − 1,)` of `T_k`, and the next off-diagonal
    `beta_m` (the residual scale of every Ritz pair).

    **Memory:** the basis is `m · N` float64 and the Ritz vectors formed from
    it as many again, about `m · N · 20` bytes at the peak with the float32
    copy: at 64³ (`N = 262,144`) with `m = 1,600` Ritz vectors (the
    follow-up paper's count, our default) ≈ 8.4 GB, inside 24 GB; the
    paper's `m = 10,000` would need 21 GB for the basis alone.
    """
    if m < 1:
        raise ValueError(f"`m` must be >= 1, got {m!r}.")
    z = np.random.default_rng(seed).standard_normal(shape)
    v = np.asarray(apply_A(z), dtype=np.float64).ravel()
    norm = np.linalg.norm(v)
    if norm == 0:
        raise ValueError("`apply_A` maps a random vector to zero: the matrix is zero.")
    V = np.zeros((m, v.size))
    alpha = np.zeros(m)
    beta = np.zeros(m)
    V[0] = v / norm
    k = m
    for j in range(m):
        w = np.asarray(apply_A(V[j].reshape(shape)), dtype=np.float64).ravel()
        alpha[j] = V[j] @ w
        # full reorthogonalisation (twice is enough) against the whole basis
        for _ in range(2):
            w -= V[: j + 1].T @ (V[: j + 1] @ w)
        beta[j] = np.linalg.norm(w)
        if j + 1 == m:
            break
        if beta[j] <= 1e-12 * max(1.0, abs(alpha[j])):
            k = j + 1
            break
        V[j + 1] = w / beta[j]
    return V[:k], alpha[:k], beta[: k - 1], float(beta[k - 1])


def ritz_pairs(
    V: np.ndarray, alpha: np.ndarray, beta: np.ndarray, *, drop_below: Real = 1e-8
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Ritz values and vectors from a Lanczos run (`scipy.linalg.eigh_tridiagonal`).

    **Returns:** `(theta, vectors, last)`: ascending Ritz values `θ ≥
    drop_below`, the Ritz vectors `(k, N)` (rows, unit norm) and the last
    entries `y_m` of the tridiagonal's eigenvectors (so `‖A v − θ v‖ =
    beta_m |y_m|`).
    """
    if beta.size:
        theta, Y = scipy.linalg.eigh_tridiagonal(alpha, beta)
    else:
        theta, Y = alpha.copy(), np.ones((1, 1))
    keep = theta >= drop_below
    theta, Y = theta[keep], Y[:, keep]
    return theta, Y.T @ V, Y[-1]


def low_count(k: int, low_fraction: Real | None) -> int:
    """How many of `k` ascending Ritz values count as "low": `low_fraction·k`,
    or the paper's `k/2 + 500` rule (capped at `k`) when `low_fraction` is None."""
    if low_fraction is None:
        return min(k, k // 2 + 500)
    if not 0 <= low_fraction <= 1:
        raise ValueError(f"`low_fraction` must lie in [0, 1] or be None, got {low_fraction!r}.")
    return int(round(low_fraction * k))


def ritz_rhs(
    vectors: np.ndarray,
    n: int,
    *,
    seed: int,
    factor: Real = 9.0,
    low_fraction: Real | None = 0.6,
    start: int = 0,
) -> np.ndarray:
    """Training right-hand sides `normalise(Σ_j c_j v_j)` from ascending Ritz vectors.

    **Arguments:**

    - `vectors`: `(k, N)` Ritz vectors, ascending Ritz values.
    - `n`: how many right-hand sides.
    - `seed`: sample `i` depends only on `(seed, start + i)`, so a data set
      can be generated in chunks and resumed.
    - `factor`: the multiplier of `c_j` on the low end (9 in both papers).
    - `low_fraction`: the fraction of Ritz vectors counted as low (0.6 as in
      the follow-up paper; None for the first paper's `k/2 + 500`).
    - `start`: the index of the first sample.

    **Returns:** `(n, N)` float64 unit vectors.
    """
    k = vectors.shape[0]
    scale = np.ones(k)
    scale[: low_count(k, low_fraction)] = factor
    coeffs = np.stack(
        [np.random.default_rng((seed, start + i)).standard_normal(k) for i in range(n)]
    )
    b = (coeffs * scale) @ vectors
    return b / np.linalg.norm(b, axis=1, keepdims=True)
