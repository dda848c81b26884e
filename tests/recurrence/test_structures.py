"""Each structure's algebra against dense numpy matrices built entry by entry."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from sciml.recurrence import Block, Dense, Diagonal


def dense_of(structure, a):
    """Dense `(..., n, n)` numpy matrices of the stored `a`, entry by entry."""
    a = np.asarray(a)
    if isinstance(structure, Diagonal):
        return np.stack([np.diag(row) for row in a.reshape(-1, a.shape[-1])]).reshape(
            *a.shape, a.shape[-1]
        )
    if isinstance(structure, Dense):
        return a
    k, m = a.shape[-3], a.shape[-1]
    out = np.zeros((*a.shape[:-3], k * m, k * m))
    for i in range(k):
        for j in range(k):
            for p in range(m):
                out[..., i * m + p, j * m + p] = a[..., i, j, p]
    return out


STRUCTURES = [Diagonal(), Block(2), Block(3), Dense()]


@pytest.mark.parametrize("structure", STRUCTURES, ids=str)
def test_algebra_matches_dense_matrices(structure):
    rng = np.random.default_rng(0)
    n, batch = 6, 4
    a = rng.normal(size=(batch, *structure.shape(n)))
    b = rng.normal(size=(batch, *structure.shape(n)))
    y = rng.normal(size=(batch, n))
    A, B = dense_of(structure, a), dense_of(structure, b)
    np.testing.assert_allclose(structure.matvec(a, y), np.einsum("bij,bj->bi", A, y), rtol=1e-13)
    np.testing.assert_allclose(dense_of(structure, structure.matmul(a, b)), A @ B, rtol=1e-13)
    np.testing.assert_allclose(
        dense_of(structure, structure.transpose(a)), np.swapaxes(A, -1, -2), rtol=0
    )
    np.testing.assert_array_equal(dense_of(structure, structure.identity(n, a.dtype)), np.eye(n))
    np.testing.assert_array_equal(structure.to_dense(a), A)
    np.testing.assert_array_equal(structure.diagonal(a), np.diagonal(A, axis1=-2, axis2=-1))
    np.testing.assert_array_equal(
        dense_of(structure, structure.identity_like(a)), np.broadcast_to(np.eye(n), A.shape)
    )


@pytest.mark.parametrize("structure", STRUCTURES, ids=str)
def test_jacobian_of_a_function_with_that_structure(structure):
    rng = np.random.default_rng(1)
    n = 6
    A = dense_of(structure, rng.normal(size=structure.shape(n)))

    def fn(h):
        return jnp.tanh(jnp.asarray(A) @ h)

    h = jnp.asarray(rng.normal(size=n))
    value, jac = structure.value_and_jacobian(fn, h)
    np.testing.assert_allclose(value, fn(h), rtol=1e-14)
    np.testing.assert_allclose(structure.to_dense(jac), jax.jacfwd(fn)(h), rtol=1e-13, atol=1e-15)


def test_invariants():
    with pytest.raises(ValueError, match="k` must be a positive integer"):
        Block(0)
    with pytest.raises(ValueError, match="divisible by 4"):
        Block(4).shape(6)
