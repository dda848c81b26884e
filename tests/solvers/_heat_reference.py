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


def dense_heat_records(s: int, theta: np.ndarray, r: float, steps: int, *, implicit: bool):
    """`steps` Euler steps (backward if `implicit`, else forward) of the dense
    system from `u = theta[0]` inside, with `r = dt / h²`: the interior
    fields `(steps, m, m)`."""
    m = s - 2
    lap, boundary = dense_heat_system(s, theta)
    u = np.full(m * m, theta[0])
    records = []
    for _ in range(steps):
        if implicit:
            u = np.linalg.solve(np.eye(m * m) + r * lap, u + r * boundary.ravel())
        else:
            u = u - r * (lap @ u - boundary.ravel())
        records.append(u.reshape(m, m))
    return np.stack(records)
