"""Factorised weights: rank rules, reconstruction, factorized == reconstructed, gradients."""

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from sciml.operators import (
    CPTensor,
    JointTuckerTensor,
    SpectralConv,
    TTTensor,
    TuckerTensor,
    cp_rank,
    factorized_size,
    make_tensor,
    tt_rank,
    tucker_rank,
)
from sciml.operators._tensors import as_complex


SHAPE = (32, 32, 12, 7)  # hidden 32, n_modes (12, 12): neuraloperator's parity case


def test_rank_rules_match_tensorly_values():
    # Values of tensorly 0.9 validate_*_rank for rank=0.1 on (32, 32, 12, 7).
    assert cp_rank(SHAPE, 0.1) == 104
    assert tucker_rank(SHAPE, 0.1) == (17, 17, 6, 4)
    assert tt_rank(SHAPE, 0.1) == (1, 18, 12, 5, 1)
    assert factorized_size("tucker", SHAPE, 0.1) == 17 * 17 * 6 * 4 + 32 * 17 * 2 + 12 * 6 + 7 * 4
    assert factorized_size("cp", SHAPE, 0.1) == 104 * (32 + 32 + 12 + 7 + 1)
    assert factorized_size("tt", SHAPE, 0.1) == 32 * 18 + 18 * 32 * 12 + 12 * 12 * 5 + 5 * 7
    assert factorized_size("dense", SHAPE, 0.1) == 86016


@pytest.mark.parametrize("fraction", [0.01, 0.05, 0.2, 0.5, 1.0])
def test_rank_rules_hit_the_parameter_budget(fraction):
    dense = np.prod(SHAPE)
    # CP: R·Σdims = ρ·∏dims up to rounding of R.
    r = cp_rank(SHAPE, fraction)
    assert abs(r * sum(SHAPE) - fraction * dense) <= 0.5 * sum(SHAPE)
    # Tucker, independently: c is the positive real root of the quartic
    # c^4 ∏dims + c Σdims² − ρ∏dims = 0 (numpy's companion-matrix roots, not
    # Brent's method) and r_k = max(round(c·n_k), 1).
    squared = sum(n**2 for n in SHAPE)
    roots = np.roots([dense, 0.0, 0.0, squared, -fraction * dense])
    c = max(z.real for z in roots if abs(z.imag) < 1e-12 and z.real > 0)
    expected = tuple(max(int(np.round(c * n)), 1) for n in SHAPE)
    assert tucker_rank(SHAPE, fraction) == expected
    size = factorized_size("tucker", SHAPE, fraction)
    assert size == np.prod(expected) + sum(n * rk for n, rk in zip(SHAPE, expected))
    # Measured size / budget: 1.10, 0.91, 1.11, 1.06, 1.03 for these fractions
    # (rounding of the ranks); the bound below leaves about 1% headroom each way.
    assert 0.9 * fraction * dense < size < 1.125 * fraction * dense, size / (fraction * dense)
    # TT, independently: ranks c·(n_k + n_{k+1})/2 with c the positive root of the
    # quadratic in c that makes the cores hold ρ∏dims entries (numpy's roots).
    avg = [(SHAPE[k] + SHAPE[k + 1]) / 2 for k in range(len(SHAPE) - 1)]
    a = sum(avg[k - 1] * SHAPE[k] * avg[k] for k in range(1, len(SHAPE) - 1))
    b = SHAPE[0] * avg[0] + SHAPE[-1] * avg[-1]
    c = max(np.roots([a, b, -fraction * dense]).real)
    expected = (1, *(max(int(np.round(c * m)), 1) for m in avg), 1)
    assert tt_rank(SHAPE, fraction) == expected
    size = factorized_size("tt", SHAPE, fraction)
    assert size == sum(expected[k] * n * expected[k + 1] for k, n in enumerate(SHAPE))
    # Measured: 1.06, 1.07, 1.02, 0.98, 1.00; bound with about 3% headroom.
    assert 0.95 * fraction * dense < size < 1.1 * fraction * dense, size / (fraction * dense)


def test_explicit_ranks():
    assert cp_rank(SHAPE, 7) == 7
    assert tucker_rank(SHAPE, 3) == (3, 3, 3, 3)
    assert tucker_rank(SHAPE, (1, 2, 3, 4)) == (1, 2, 3, 4)
    assert tt_rank(SHAPE, 5) == (1, 5, 5, 5, 1)
    assert tt_rank(SHAPE, (2, 3, 4)) == (1, 2, 3, 4, 1)
    assert tt_rank(SHAPE, (1, 2, 3, 4, 1)) == (1, 2, 3, 4, 1)


def test_bad_ranks_raise():
    with pytest.raises(ValueError, match="CP rank of 0"):
        cp_rank(SHAPE, 1e-5)
    with pytest.raises(ValueError, match="must be > 0"):
        tucker_rank(SHAPE, -0.1)
    with pytest.raises(ValueError, match="must be > 0"):
        tt_rank(SHAPE, 0.0)
    with pytest.raises(ValueError, match="Tucker ranks must be >= 1"):
        tucker_rank(SHAPE, (0, 2, 3, 4))
    with pytest.raises(ValueError, match="one per mode"):
        tucker_rank(SHAPE, (2, 3))
    with pytest.raises(ValueError, match="boundary ranks must be 1"):
        tt_rank(SHAPE, (2, 3, 4, 5, 2))
    with pytest.raises(ValueError, match="`factorization` must be one of"):
        make_tensor("hosvd", (2, 3), key=jax.random.key(0))


def test_reconstruction_matches_explicit_sums(getkey):
    shape = (3, 4, 5)
    cp = CPTensor(shape, 4, key=getkey())
    lam = np.asarray(as_complex(cp.weights))
    a, b, c = (np.asarray(as_complex(f)) for f in cp.factors)
    expected = sum(
        lam[r] * a[:, r, None, None] * b[None, :, r, None] * c[None, None, :, r] for r in range(4)
    )
    np.testing.assert_allclose(cp.to_tensor(), expected, atol=1e-13)

    tucker = TuckerTensor(shape, (2, 3, 2), key=getkey())
    g = np.asarray(as_complex(tucker.core))
    u = [np.asarray(as_complex(f)) for f in tucker.factors]
    expected = np.zeros(shape, complex)
    for i, j, k in np.ndindex(*shape):
        for p, q, r in np.ndindex(*g.shape):
            expected[i, j, k] += g[p, q, r] * u[0][i, p] * u[1][j, q] * u[2][k, r]
    np.testing.assert_allclose(tucker.to_tensor(), expected, atol=1e-13)

    tt = TTTensor(shape, (1, 2, 3, 1), key=getkey())
    cores = [np.asarray(as_complex(core)) for core in tt.cores]
    expected = np.zeros(shape, complex)
    for i, j, k in np.ndindex(*shape):
        expected[i, j, k] = (cores[0][:, i, :] @ cores[1][:, j, :] @ cores[2][:, k, :])[0, 0]
    np.testing.assert_allclose(tt.to_tensor(), expected, atol=1e-13)

    joint = JointTuckerTensor(3, shape, (2, 2, 3, 2), key=getkey())
    full = np.asarray(joint.to_tensor())
    assert full.shape == (3, *shape)
    for layer in range(3):
        np.testing.assert_allclose(joint.layer(layer).to_tensor(), full[layer], atol=1e-13)
    # layer l's core is G ×₀ U_L[l]; the other factors are shared.
    g = np.asarray(as_complex(joint.core))
    u_layer = np.asarray(as_complex(joint.layer_factor))
    u = [np.asarray(as_complex(f)) for f in joint.factors]
    core_1 = np.tensordot(u_layer[1], g, axes=1)
    expected = np.einsum("pqr,ip,jq,kr->ijk", core_1, *u)
    np.testing.assert_allclose(full[1], expected, atol=1e-13)


@pytest.mark.parametrize("factorization", ["dense", "cp", "tucker", "tt"])
def test_initial_std_of_full_tensor(factorization, getkey):
    # E|w|² = std² for the full tensor (tensorly-torch's init rule).
    std = 0.3
    full = jax.jit(
        lambda key: make_tensor(factorization, (16, 16, 8, 5), 0.2, std=std, key=key).to_tensor()
    )(getkey())
    full = np.asarray(full)
    measured = np.sqrt(np.mean(np.abs(full) ** 2))
    assert 0.6 * std < measured < 1.6 * std, measured


@pytest.fixture(scope="module")
def conv_input():
    return jax.random.normal(jax.random.key(3), (4, 10, 9))


@pytest.mark.parametrize("separable", [False, True])
@pytest.mark.parametrize("factorization", ["cp", "tucker", "tt"])
def test_factorized_equals_reconstructed(factorization, separable, conv_input):
    key = jax.random.key(4)
    kwargs = dict(factorization=factorization, rank=0.3, separable=separable, key=key)
    factorized = SpectralConv(4, 4, (6, 8), implementation="factorized", **kwargs)
    reconstructed = SpectralConv(4, 4, (6, 8), implementation="reconstructed", **kwargs)
    for a, b in zip(
        jax.tree_util.tree_leaves(factorized), jax.tree_util.tree_leaves(reconstructed)
    ):
        np.testing.assert_array_equal(a, b)  # same parameters
    np.testing.assert_allclose(
        eqx.filter_jit(factorized)(conv_input),
        eqx.filter_jit(reconstructed)(conv_input),
        atol=1e-12,
    )


def test_factorized_gradient_matches_finite_differences(conv_input):
    conv = SpectralConv(4, 3, (6, 8), factorization="tucker", rank=0.3, key=jax.random.key(5))
    target = jax.random.normal(jax.random.key(6), (3, 10, 9))

    def loss(model):
        return jnp.sum((model(conv_input) - target) ** 2)

    grads = eqx.filter_jit(eqx.filter_grad(loss))(conv)
    loss_jit = eqx.filter_jit(loss)
    eps = 1e-6
    rng = np.random.default_rng(0)
    wheres = [lambda m: m.weight.core, lambda m: m.bias] + [
        lambda m, k=k: m.weight.factors[k] for k in range(4)
    ]
    checks = [
        (where, tuple(int(rng.integers(s)) for s in where(conv).shape))
        for where in wheres
        for _ in range(2)
    ]
    for where, index in checks:
        leaf = where(conv)
        plus = eqx.tree_at(where, conv, leaf.at[index].add(eps))
        minus = eqx.tree_at(where, conv, leaf.at[index].add(-eps))
        numeric = (loss_jit(plus) - loss_jit(minus)) / (2 * eps)
        np.testing.assert_allclose(where(grads)[index], numeric, rtol=1e-6, atol=1e-8)


def test_jax_complex_gradient_convention_and_real_pairs():
    # JAX: d|z|²/dz at 1+2j is 2-4j (the conjugate of PyTorch's 2+4j). Stored as a real
    # pair (x, y), the gradient is the ordinary (2x, 2y) = (2, 4): descent shrinks both.
    z = jnp.asarray(1.0 + 2.0j)
    np.testing.assert_allclose(jax.grad(lambda w: jnp.abs(w) ** 2)(z), 2.0 - 4.0j)
    pair = jnp.asarray([1.0, 2.0])
    np.testing.assert_allclose(jax.grad(lambda p: jnp.abs(as_complex(p)) ** 2)(pair), [2.0, 4.0])


def test_float32_factorized_close_to_float64(conv_input):
    key = jax.random.key(7)
    conv64 = SpectralConv(4, 4, (6, 8), factorization="cp", rank=0.5, key=key)
    conv32 = jax.tree_util.tree_map(
        lambda x: x.astype(jnp.float32) if eqx.is_array(x) else x, conv64
    )
    y64 = eqx.filter_jit(conv64)(conv_input)
    y32 = eqx.filter_jit(conv32)(conv_input.astype(jnp.float32))
    assert y32.dtype == jnp.float32
    np.testing.assert_allclose(y32, y64, rtol=1e-4, atol=1e-5)
