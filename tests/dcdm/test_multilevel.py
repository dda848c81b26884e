"""The multilevel generator `NᵀN` (N a linear V-cycle): symmetric positive
definite by construction, its depth follows the grid, and DCDM with it is
textbook PCG."""

import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from sciml.dcdm import MultilevelDCDMNet, PrecisionWarning, direction_fn, solve
from solvers.poisson import FLUID, PoissonOperator, assemble, make_scene
from tests.dcdm.test_iteration import reference_pcg


def dense(f, shape):
    """The matrix of a linear map on grids of `shape`, by its columns `f(e_i)`."""
    n = int(np.prod(shape))
    cols = jax.jit(jax.vmap(f))(jnp.eye(n).reshape(n, *shape))
    return np.asarray(cols).reshape(n, -1).T


def test_depth_follows_the_grid(getkey):
    net = MultilevelDCDMNet(2, width=4, smooth=1, coarsest=4, key=getkey())
    assert [net.levels((n, n)) for n in (4, 8, 16, 64, 256)] == [0, 1, 2, 4, 6]
    assert net.levels((12, 12)) == 2 and net.levels((10, 10)) == 1  # stops at an odd side
    # one set of weights for every size
    for n in (8, 32):
        assert net(jnp.ones((1, n, n))).shape == (n, n)


def test_gram_matrix_is_symmetric_positive_definite(getkey):
    net = MultilevelDCDMNet(2, width=4, smooth=1, dtype=jnp.float64, key=getkey())
    shape = (16, 16)  # two levels below the finest
    G = dense(lambda e: net.factor(e[None]), shape)
    M = dense(lambda e: net(e[None]), shape)
    scale = np.abs(M).max()
    # the generator is GᵀG of the explicit factor, symmetric to round-off
    # (measured: ~3e-16 of the largest entry)
    np.testing.assert_allclose(M, G.T @ G, atol=1e-12 * scale)
    np.testing.assert_allclose(M, M.T, atol=1e-12 * scale)
    # definite: measured smallest eigenvalue ~1e-2 of the largest
    eig = np.linalg.eigvalsh((M + M.T) / 2)
    assert eig.min() > 1e-6 * eig.max()


def test_dcdm_with_it_is_textbook_pcg(getkey):
    labels = make_scene(16, dim=2, seed=3, n_obstacles=1, free_surface=True)
    A = assemble(labels).toarray()
    fluid = (labels == FLUID).ravel()
    net = MultilevelDCDMNet(2, width=4, smooth=1, dtype=jnp.float64, key=getkey())
    f = direction_fn(net, jnp.asarray(labels == FLUID, jnp.float64))
    G = dense(lambda e: net.factor(e[None]), labels.shape)
    M = (G.T @ G)[np.ix_(fluid, fluid)]  # D NᵀN D on the fluid cells
    A_f = A[np.ix_(fluid, fluid)]
    b = np.random.default_rng(0).standard_normal(fluid.sum())
    b_grid = np.zeros(labels.size)
    b_grid[fluid] = b
    steps = 12
    with warnings.catch_warnings():  # rtol=1e-14 on purpose: exactly `steps` steps
        warnings.simplefilter("ignore", PrecisionWarning)
        sol = solve(
            PoissonOperator(labels),
            jnp.asarray(b_grid.reshape(labels.shape)),
            f,
            rtol=1e-14,
            max_steps=steps,
            n_orthogonal=1,
            throw=False,
        )
    reference = reference_pcg(A_f, b, M, steps)
    x_ref = reference[-1]
    ours = np.asarray(sol.value).ravel()[fluid]
    # measured: 1e-15 relative after 12 steps (residual down by ~1e-4 there)
    np.testing.assert_allclose(ours, x_ref, rtol=0, atol=1e-12 * np.abs(x_ref).max())
    history = np.asarray(sol.stats["residual_history"])[1 : steps + 1]
    ref_history = [np.linalg.norm(b - A_f @ x) for x in reference]
    np.testing.assert_allclose(history, ref_history, rtol=0, atol=1e-12 * np.linalg.norm(b))
    assert ref_history[-1] < 0.5 * np.linalg.norm(b)  # the iteration made progress


def test_bad_arguments(getkey):
    with pytest.raises(ValueError, match="`dim`"):
        MultilevelDCDMNet(4, key=getkey())
    with pytest.raises(ValueError, match="`width`"):
        MultilevelDCDMNet(2, width=0, key=getkey())
    net = MultilevelDCDMNet(2, width=2, smooth=1, key=getkey())
    with pytest.raises(ValueError, match="2-D grid"):
        net(jnp.ones((1, 8)))
