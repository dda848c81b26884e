"""SymmetricDCDMNet against explicit matrices: the factor assembled column by
column (`G`), the generator equal to `GᵀG` (symmetric, positive semi-definite),
and DCDM with it equal to textbook PCG with that matrix."""

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from sciml.dcdm import DCDM, DCDMNet, SymmetricDCDMNet, dcdm_loss, direction_fn, solve
from solvers.poisson import FLUID, PoissonOperator, assemble, make_scene
from tests.dcdm.test_iteration import reference_pcg


def dense(f, shape):
    """The matrix of a linear map on grids of `shape`, by its columns `f(e_i)`."""
    n = int(np.prod(shape))
    cols = [np.asarray(f(jnp.asarray(np.eye(n)[i].reshape(shape)))).ravel() for i in range(n)]
    return np.stack(cols, axis=1)


def test_generator_is_the_gram_matrix_of_a_linear_factor(getkey):
    net = SymmetricDCDMNet(2, pairs=(1, 1, 1), width=4, dtype=jnp.float64, key=getkey())
    shape = (6, 8)
    G = dense(lambda e: net.factor(e[None]), shape)
    # the factor is linear: no bias, identity activation (superposition exact)
    u, v = (np.asarray(jax.random.normal(getkey(), shape)) for _ in range(2))
    lhs = np.asarray(net.factor(jnp.asarray(2 * u - 3 * v)[None]))
    rhs = 2 * np.asarray(net.factor(jnp.asarray(u)[None])) - 3 * np.asarray(
        net.factor(jnp.asarray(v)[None])
    )
    np.testing.assert_allclose(lhs, rhs, rtol=1e-12, atol=1e-12)
    # the generator is GᵀG with the transpose taken of the explicit matrix
    # (measured: 5e-16 of the largest entry; the smallest eigenvalue of M
    # is 1.4e-3 of it)
    M = dense(lambda e: net(e[None]), shape)
    scale = np.abs(M).max()
    np.testing.assert_allclose(M, G.T @ G, atol=1e-12 * scale)
    np.testing.assert_allclose(M, M.T, atol=1e-12 * scale)
    assert np.linalg.eigvalsh(M).min() >= -1e-12 * scale
    # the paper's network is neither linear nor symmetric (the check can fail)
    paper = DCDMNet(2, pairs=(1, 1, 1), width=4, dtype=jnp.float64, key=getkey())
    P = dense(lambda e: paper(e[None]) - paper(jnp.zeros_like(e)[None]), shape)
    assert np.abs(P - P.T).max() > 1e-3 * np.abs(P).max()


@pytest.mark.filterwarnings("ignore::sciml.dcdm.PrecisionWarning")  # rtol=1e-14: k steps exactly
@pytest.mark.parametrize("n_orthogonal", [1, 2])
@pytest.mark.slow
def test_dcdm_with_it_is_pcg(getkey, n_orthogonal):
    labels = make_scene(8, dim=2, seed=3, n_obstacles=1, free_surface=True)
    A = assemble(labels).toarray()
    fluid = (labels == FLUID).ravel()
    net = SymmetricDCDMNet(2, pairs=(1, 1, 1), width=4, dtype=jnp.float64, key=getkey())
    f = direction_fn(net, jnp.asarray(labels == FLUID, jnp.float64))
    # M = D GᵀG D on the fluid cells, assembled from the factor alone
    G = dense(lambda e: net.factor(e[None]), labels.shape)
    M = (G.T @ G)[np.ix_(fluid, fluid)]
    A_f = A[np.ix_(fluid, fluid)]
    b = np.random.default_rng(0).standard_normal(fluid.sum())
    b_grid = np.zeros(labels.size)
    b_grid[fluid] = b
    op = PoissonOperator(labels)
    run = eqx.filter_jit(
        lambda k: solve(
            op,
            jnp.asarray(b_grid.reshape(labels.shape)),
            f,
            DCDM(rtol=1e-14, max_steps=k, n_orthogonal=n_orthogonal),
            throw=False,
        )
    )
    # textbook PCG with M (the scale of M does not change PCG's iterates)
    reference = reference_pcg(A_f, b, M, 10)
    for k, x in enumerate(reference, start=1):
        ours = np.asarray(run(k).value).ravel()
        # measured agreement 6e-16 relative over 10 iterates (residual down
        # to 0.12 ‖b‖); round-off only
        assert np.linalg.norm(ours[fluid] - x) <= 1e-10 * np.linalg.norm(x), f"iterate {k}"
        assert np.all(ours[~fluid] == 0)


def test_training_lowers_the_scale_free_loss(getkey):
    labels = make_scene(16, dim=2, seed=0, n_obstacles=1, free_surface=True)
    op = PoissonOperator(labels)
    fluid = jnp.asarray(labels == FLUID, jnp.float32)
    b = jax.random.normal(getkey(), (32, *labels.shape)) * fluid
    b = b / jnp.linalg.norm(b.reshape(32, -1), axis=1)[:, None, None]
    net = SymmetricDCDMNet(2, pairs=(1, 1, 1), width=8, key=getkey())
    loss = lambda m: dcdm_loss(direction_fn(m, fluid), op, b)  # noqa: E731
    opt = optax.adam(3e-3)
    state = opt.init(eqx.filter(net, eqx.is_array))

    @eqx.filter_jit
    def step(net, state):
        value, grads = eqx.filter_value_and_grad(loss)(net)
        updates, state = opt.update(grads, state)
        return eqx.apply_updates(net, updates), state, value

    first = float(loss(net))
    for _ in range(60):
        net, state, _ = step(net, state)
    # measured (one draw of the keys): 0.59 -> 0.075 in 60 steps; identity
    # directions (one steepest-descent step) score 0.27 on the same
    # right-hand sides
    assert float(loss(net)) < 0.5 * first
    assert float(loss(net)) < float(dcdm_loss(lambda r: r, op, b))
