"""Discretisations against scipy's expm and kernels against explicit matrix powers."""

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest
import scipy.linalg

from sciml.ssm import (
    S4D,
    discretize,
    hippo_legs,
    hippo_normal_modes,
    hippo_nplr,
    ptd_eig,
    ptd_perturbation,
    vandermonde_kernel,
)


def zoh_reference(A, B, dt):
    """ZOH of a dense system from one matrix exponential: expm([[dtA, dtB], [0, 0]])."""
    n = A.shape[0]
    M = np.zeros((n + 1, n + 1), np.result_type(A, B))
    M[:n, :n], M[:n, n] = dt * A, dt * B
    E = scipy.linalg.expm(M)
    return E[:n, :n], E[:n, n]


def bilinear_reference(A, B, dt):
    n = A.shape[0]
    left = np.eye(n) - dt / 2 * A
    return np.linalg.solve(left, np.eye(n) + dt / 2 * A), np.linalg.solve(left, dt * B)


REFERENCES = {"zoh": zoh_reference, "bilinear": bilinear_reference}


def powers_kernel(A_bar, B_bar, C, length):
    """K[l] = C A_bar^l B_bar by repeated multiplication."""
    out, x = [], B_bar
    for _ in range(length):
        out.append(C @ x)
        x = A_bar @ x
    return np.array(out)


@pytest.mark.parametrize("method", ["zoh", "bilinear"])
def test_discretize_matches_dense_reference(method, getkey):
    Lambda = np.array([-0.5 + 3j, -2.0 - 0.1j, -0.01 + 40j])
    B = np.array([1.0 + 0.5j, -0.3j, 2.0])
    for dt in (1e-3, 0.1, 0.7):
        Lambda_bar, B_bar = discretize(jnp.asarray(Lambda), jnp.asarray(B), dt, method)
        A_ref, B_ref = REFERENCES[method](np.diag(Lambda), B, dt)
        np.testing.assert_allclose(np.diag(A_ref), Lambda_bar, rtol=1e-13, atol=1e-15)
        np.testing.assert_allclose(B_ref, B_bar, rtol=1e-12, atol=1e-15)
    # MIMO rows: B (P, H) is scaled row by row
    B2 = np.random.default_rng(0).standard_normal((3, 5)) + 0j
    _, B2_bar = discretize(jnp.asarray(Lambda), jnp.asarray(B2), 0.1, method)
    _, B_col = REFERENCES[method](np.diag(Lambda), B2[:, 2], 0.1)
    np.testing.assert_allclose(B2_bar[:, 2], B_col, rtol=1e-12)


def test_zoh_scalar_impulse_response():
    a, dt, L = 0.7, 0.05, 50
    Lambda_bar, B_bar = discretize(jnp.array([-a + 0j]), jnp.array([1.0 + 0j]), dt, "zoh")
    K = vandermonde_kernel(jnp.log(Lambda_bar), B_bar, L)
    expected = (1 - np.exp(-a * dt)) / a * np.exp(-a * dt * np.arange(L))
    np.testing.assert_allclose(K.real, expected, rtol=1e-13)


@pytest.mark.parametrize("init", ["legs", "lin", "inv"])
@pytest.mark.parametrize("method", ["zoh", "bilinear"])
def test_dc_gain_is_preserved(init, method, getkey):
    # The package's discretisation and kernel (not a helper of this test) keep the
    # DC gain: Σ_l K[l] = 2 Re Σ_n C_n B̄_n / (1 − λ̄_n) = 2 Re(−C Λ⁻¹ B), for both
    # methods and any Δ, written here from the continuous (Λ, B, C) alone.
    layer = S4D(3, 8, init=init, discretization=method, key=getkey())
    dt = np.array([0.5, 1.0, 2.0])
    layer = eqx.tree_at(lambda m: m.log_dt, layer, jnp.log(jnp.asarray(dt)))
    Lambda, B, C = np.asarray(layer.Lambda)[0], np.asarray(layer.B)[0], np.asarray(layer.C)[0]
    expected = 2 * np.real(-(C * B / Lambda).sum(-1))  # (H,)
    # the discretised system from sciml.ssm.discretize, summed in closed form
    for h in range(3):
        Lambda_bar, B_bar = discretize(jnp.asarray(Lambda), jnp.asarray(B), dt[h], method)
        gain = 2 * np.real(np.sum(C[h] * B_bar / (1 - Lambda_bar)))
        np.testing.assert_allclose(gain, expected[h], rtol=1e-12)
    # the layer's kernel, summed over a length where the tail is negligible: Re λ = -1/2
    # for these inits, so |λ̄| ≤ 0.99 for bilinear at |Im λ| ≤ 18 (S4D-Inv's largest)
    L = 8192
    K = np.asarray(layer.kernel(L))[0]
    np.testing.assert_allclose(K.sum(-1), expected, rtol=1e-10)
    # and the layer's response to a constant input converges to (gain + D) u
    y = np.asarray(layer(jnp.ones((L, 3))))
    np.testing.assert_allclose(y[-1], expected + np.asarray(layer.D), rtol=1e-10)


def full_system(layer, channel):
    """The full (conjugate-closed) diagonal system of one S4D channel."""
    copy = channel % layer.n_ssm
    Lambda, B = np.asarray(layer.Lambda)[copy], np.asarray(layer.B)[copy]
    C = np.asarray(layer.C)[0, channel]
    dt = float(np.exp(layer.log_dt[channel]))
    cat = np.concatenate
    return np.diag(cat([Lambda, Lambda.conj()])), cat([B, B.conj()]), cat([C, C.conj()]), dt


@pytest.mark.parametrize("init", ["legs", "lin", "inv", "real", "ptd", "diag"])
@pytest.mark.parametrize("method", ["zoh", "bilinear"])
def test_kernel_equals_matrix_powers(init, method, getkey):
    L = 200
    layer = S4D(4, 16, init=init, discretization=method, n_ssm=2, key=getkey())
    layer = eqx.tree_at(lambda m: m.log_dt, layer, jnp.log(jnp.array([1e-3, 1e-1, 0.03, 0.5])))
    K = np.asarray(layer.kernel(L))[0]
    for h in range(4):
        A, B, C, dt = full_system(layer, h)
        A_bar, B_bar = REFERENCES[method](A, B, dt)
        expected = powers_kernel(A_bar, B_bar, C, L)
        assert np.max(np.abs(expected.imag)) < 1e-12
        np.testing.assert_allclose(K[h], expected.real, atol=1e-12 * np.max(np.abs(expected)))


@pytest.mark.parametrize("method", ["zoh", "bilinear"])
def test_legs_kernel_equals_powers_of_the_dense_normal_part(method, getkey):
    # S4D-LegS in the eigenbasis is the dense real system (A_N, B, C) of size N
    N, L, dt = 16, 300, 0.05
    A_N, _, _ = hippo_nplr(N)
    _, B = hippo_legs(N)
    _, V = hippo_normal_modes(N)
    C_dense = np.random.default_rng(2).standard_normal(N)
    layer = S4D(1, N, init="legs", b_clip=None, discretization=method, key=getkey())
    layer = eqx.tree_at(
        lambda m: (m.C_re, m.C_im, m.log_dt),
        layer,
        (
            jnp.asarray((C_dense @ V).real)[None, None],
            jnp.asarray((C_dense @ V).imag)[None, None],
            jnp.log(jnp.array([dt])),
        ),
    )
    A_bar, B_bar = REFERENCES[method](A_N, B, dt)
    expected = powers_kernel(A_bar, B_bar, C_dense, L)
    K = np.asarray(layer.kernel(L))[0, 0]
    np.testing.assert_allclose(K, expected, atol=1e-12 * np.max(np.abs(expected)))


def test_ptd_kernel_equals_powers_of_the_perturbed_matrix(getkey):
    N, L, dt = 16, 300, 0.01
    A, B = hippo_legs(N)
    A_pert = A + ptd_perturbation(N)
    _, V, _ = ptd_eig(N)
    C_dense = np.random.default_rng(3).standard_normal(N)
    C_modes = C_dense @ V[:, : N // 2]
    layer = S4D(1, N, init="ptd", key=getkey())
    layer = eqx.tree_at(
        lambda m: (m.C_re, m.C_im, m.log_dt),
        layer,
        (
            jnp.asarray(C_modes.real)[None, None],
            jnp.asarray(C_modes.imag)[None, None],
            jnp.log(jnp.array([dt])),
        ),
    )
    A_bar, B_bar = zoh_reference(A_pert, B, dt)
    expected = powers_kernel(A_bar, B_bar, C_dense, L)
    K = np.asarray(layer.kernel(L))[0, 0]
    np.testing.assert_allclose(K, expected, atol=1e-11 * np.max(np.abs(expected)))


@pytest.mark.parametrize("length", [1, 7, 1000])
def test_factored_kernel_and_its_gradient_equal_the_direct_sum(length, getkey):
    z = -0.05 + 0.1 * jax.random.normal(getkey(), (3, 5)) + 1j * jax.random.normal(getkey(), (3, 5))
    W = jax.random.normal(getkey(), (3, 5)) + 1j * jax.random.normal(getkey(), (3, 5))

    def direct(z, W):
        powers = jnp.exp(z[..., None] * jnp.arange(length))
        return jnp.sum(W[..., None] * powers, axis=-2)

    np.testing.assert_allclose(
        vandermonde_kernel(z, W, length), direct(z, W), rtol=1e-12, atol=1e-12
    )

    def loss(kernel_fn):
        return lambda z, W: jnp.sum(jnp.abs(kernel_fn(z, W)) ** 2)

    grads = jax.grad(loss(lambda z, W: vandermonde_kernel(z, W, length)), argnums=(0, 1))(z, W)
    expected = jax.grad(loss(direct), argnums=(0, 1))(z, W)
    for a, b in zip(grads, expected):
        np.testing.assert_allclose(a, b, rtol=1e-10, atol=1e-12)


def test_float32_kernel_matches_float64(getkey):
    layer = S4D(8, 64, init="legs", key=getkey())
    K64 = np.asarray(layer.kernel(2048))
    layer32 = jax.tree_util.tree_map(
        lambda x: x.astype(jnp.float32) if eqx.is_inexact_array(x) else x, layer
    )
    K32 = layer32.kernel(2048)
    assert K32.dtype == jnp.float32
    np.testing.assert_allclose(np.asarray(K32), K64, atol=2e-5 * np.max(np.abs(K64)))
