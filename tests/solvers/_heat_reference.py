"""A dense reference for the 2-D heat equation on the unit square (written in
the tests, independent of `solvers/`)."""

import numpy as np


def dense_heat_system(s: int, theta: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The 5-point Laplacian times h², `(m², m²)` with `m = s - 2` interior
    nodes, and the boundary term `(m, m)` of Dirichlet values
    `theta = [T0, left, right, bottom, top]` (x is the first axis)."""
    m = s - 2
    lap1 = 2 * np.eye(m) - np.eye(m, k=1) - np.eye(m, k=-1)
    lap = np.kron(lap1, np.eye(m)) + np.kron(np.eye(m), lap1)
    boundary = np.zeros((m, m))
    boundary[0, :] += theta[1]
    boundary[-1, :] += theta[2]
    boundary[:, 0] += theta[3]
    boundary[:, -1] += theta[4]
    return lap, boundary
