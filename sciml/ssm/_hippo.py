"""HiPPO-LegS and its normal-plus-low-rank (NPLR) form.

All matrices are built in numpy float64 (they are initialisation constants, not
traced values): the eigen-decomposition of the normal part goes through a
Hermitian `eigh`, never through `eig` of the non-normal HiPPO matrix, whose
eigenvector matrix is exponentially ill-conditioned in `N`.
"""

from __future__ import annotations

from typing import Any

import numpy as np


def _check_size(n: Any, name: str = "N") -> int:
    # `N` is annotated `Any` where this check guards it, so its error (naming
    # the argument) is what a caller sees, also under runtime type checking.
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 1:
        raise ValueError(f"{name} must be a positive integer, got {n!r}.")
    return int(n)


def hippo_legs(N: Any) -> tuple[np.ndarray, np.ndarray]:
    r"""The HiPPO-LegS matrices (stable sign convention).

    $$A_{nk} = -\begin{cases}\sqrt{2n+1}\sqrt{2k+1} & n > k\\ n+1 & n = k\\ 0 & n < k\end{cases},
    \qquad B_n = \sqrt{2n+1}.$$

    **Arguments:**

    - `N`: state size.

    **Returns:** `(A, B)`: float64 numpy arrays of shapes `(N, N)` and `(N,)`.
    The eigenvalues of `A` are exactly `-1, ..., -N`.
    """
    N = _check_size(N)
    q = np.sqrt(2.0 * np.arange(N) + 1.0)
    A = -np.tril(np.outer(q, q), -1) - np.diag(np.arange(N) + 1.0)
    return A, q.copy()


def hippo_nplr(N: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    r"""Normal-plus-low-rank form `A = A_N - P Pᵀ` of HiPPO-LegS.

    `A_N = -½ I + S` with `S` skew-symmetric and `P_n = √(n + ½) = B_n / √2`.

    **Returns:** `(A_N, P, B)` as float64 numpy arrays of shapes `(N, N)`, `(N,)`,
    `(N,)`.
    """
    A, B = hippo_legs(N)
    P = B / np.sqrt(2.0)
    return A + np.outer(P, P), P, B


def hippo_normal_eig(N: int) -> tuple[np.ndarray, np.ndarray]:
    r"""Eigen-decomposition of the normal part `A_N = V diag(Λ) Vᴴ` (HiPPO-N).

    Computed from the Hermitian matrix `-i S` (`S = A_N + ½ I`): `w, V = eigh(-iS)`
    and `Λ = -½ + i w`, so `V` is unitary to round-off. Eigenvalues are sorted by
    increasing imaginary part; they come in conjugate pairs (and one zero
    frequency when `N` is odd), so the first `N // 2` have `Im Λ < 0`.

    **Returns:** `(Lambda, V)`: complex128 arrays of shapes `(N,)` and `(N, N)`.
    """
    A_N, _, _ = hippo_nplr(N)
    S = A_N + 0.5 * np.eye(N)
    w, V = np.linalg.eigh(-1j * S)
    return -0.5 + 1j * w, V


def hippo_normal_modes(N: int) -> tuple[np.ndarray, np.ndarray]:
    """The `N // 2` conjugate-symmetric half of [`hippo_normal_eig`][sciml.ssm.hippo_normal_eig].

    **Returns:** `(Lambda, V)` of shapes `(N // 2,)` and `(N, N // 2)`: the modes
    with `Im Λ < 0`. `A_N = 2 Re(V diag(Λ) Vᴴ)` for even `N`.
    """
    Lambda, V = hippo_normal_eig(N)
    half = _check_size(N) // 2
    return Lambda[:half], V[:, :half]
