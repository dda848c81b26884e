"""The multilevel generator `NᵀN` (N a linear V-cycle): symmetric positive
definite by construction, its depth follows the grid, and DCDM with it is
textbook PCG."""

import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from sciml.dcdm import (
    DCDM,
    MultilevelDCDMNet,
    PrecisionWarning,
    direction_fn,
    label_channels,
    solve,
)
from solvers.poisson import FLUID, PoissonOperator, assemble, make_scene
from tests.dcdm.test_channels_last import with_options
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


# two levels below the finest in both: 16² with coarsest 4, 8³ with coarsest 2
GRIDS = {2: ((16, 16), 4), 3: ((8, 8, 8), 2)}


@pytest.mark.parametrize("dim", [2, 3])
@pytest.mark.slow
def test_gram_matrix_is_symmetric_positive_definite(dim, getkey):
    shape, coarsest = GRIDS[dim]
    net = MultilevelDCDMNet(
        dim, width=4, smooth=1, coarsest=coarsest, dtype=jnp.float64, key=getkey()
    )
    assert net.levels(shape) == 2
    G = dense(lambda e: net.factor(e[None]), shape)
    M = dense(lambda e: net(e[None]), shape)
    scale = np.abs(M).max()
    # the generator is GᵀG of the explicit factor, symmetric to round-off
    # (measured: ~3e-16 of the largest entry in 2-D, ~1e-15 in 3-D)
    np.testing.assert_allclose(M, G.T @ G, atol=1e-12 * scale)
    np.testing.assert_allclose(M, M.T, atol=1e-12 * scale)
    # definite: measured smallest eigenvalue ~1e-2 (2-D), ~5e-3 (3-D) of the largest
    eig = np.linalg.eigvalsh((M + M.T) / 2)
    assert eig.min() > 1e-6 * eig.max()


def test_per_level_gains_and_geometry_masks_keep_it_symmetric_positive_definite(getkey):
    """`D NᵀN D` with three per-level gains and geometry masks (random, away
    from their initial values) on a scene with walls, obstacles and air:
    `uᵀ M v = vᵀ M u` at rounding level and `uᵀ M u > 0` for random `u`."""
    labels = make_scene(32, seed=5, n_obstacles=2, free_surface=True)
    fluid = jnp.asarray(labels == FLUID, jnp.float64)
    net = MultilevelDCDMNet(
        2, width=4, smooth=1, gains=3, geometry=True, dtype=jnp.float64, key=getkey()
    )
    net = with_options(net, getkey())
    assert net.levels(labels.shape) == 3 and net.in_channels == 4
    onehot = label_channels(labels).astype(jnp.float64)
    apply = jax.jit(jax.vmap(lambda u: fluid * net(jnp.concatenate([(fluid * u)[None], onehot]))))
    U = jax.random.normal(getkey(), (16, *labels.shape), jnp.float64) * fluid
    gram = np.asarray(U.reshape(16, -1) @ apply(U).reshape(16, -1).T)  # uᵢᵀ M uⱼ
    # measured: asymmetry ~1e-16 of the largest entry
    np.testing.assert_allclose(gram, gram.T, rtol=0, atol=1e-12 * np.abs(gram).max())
    # Rayleigh quotients, and M positive definite on the span of the samples
    # (measured: the smallest eigenvalue of this Gram matrix ~0.3 of its largest)
    assert np.all(np.diag(gram) > 0)
    eig = np.linalg.eigvalsh((gram + gram.T) / 2)
    assert eig.min() > 1e-3 * eig.max()


def test_transpose_is_exact_in_3d(getkey):
    """`Nᵀ` (`jax.linear_transpose` of the V-cycle: adjoint 3-D convolutions,
    pooling ↔ upsampling) is the transpose of the assembled `N`, every entry
    of `<N e_i, e_j> = <e_i, Nᵀ e_j>` on an 8³ grid with two coarser levels."""
    shape, coarsest = GRIDS[3]
    width = 2
    net = MultilevelDCDMNet(
        3, width=width, smooth=1, coarsest=coarsest, dtype=jnp.float64, key=getkey()
    )
    G = dense(lambda e: net.factor(e[None]), shape)  # (width·512, 512), columns N e_i
    transpose = jax.linear_transpose(net.factor, jnp.zeros((1, *shape)))
    n_out = width * int(np.prod(shape))
    T = dense(lambda e: transpose(e.reshape(width, *shape))[0], (n_out,))  # columns Nᵀ e_j
    assert T.shape == G.T.shape
    # measured: ~8e-16 of the largest entry
    np.testing.assert_allclose(T, G.T, rtol=0, atol=1e-13 * np.abs(G).max())


@pytest.mark.parametrize("dim", [2, 3])
def test_dcdm_with_it_is_textbook_pcg(dim, getkey):
    shape, coarsest = GRIDS[dim]
    labels = make_scene(shape[0], dim=dim, seed=3, n_obstacles=1, free_surface=True)
    A = assemble(labels).toarray()
    fluid = (labels == FLUID).ravel()
    net = MultilevelDCDMNet(
        dim, width=4, smooth=1, coarsest=coarsest, dtype=jnp.float64, key=getkey()
    )
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
            DCDM(rtol=1e-14, max_steps=steps, n_orthogonal=1),
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
    with pytest.raises(ValueError, match="`gains`"):
        MultilevelDCDMNet(2, gains=0, key=getkey())
    net = MultilevelDCDMNet(2, width=2, smooth=1, key=getkey())
    with pytest.raises(ValueError, match="2-D grid"):
        net(jnp.ones((1, 8)))
    masked = MultilevelDCDMNet(2, width=2, smooth=1, geometry=True, key=getkey())
    with pytest.raises(ValueError, match=r"\(4, \*grid\)"):
        masked(jnp.ones((1, 8, 8)))  # the label channels are missing
    with pytest.raises(ValueError, match="`labels_onehot`"):
        masked.factor_transpose(jnp.ones((2, 8, 8)))
