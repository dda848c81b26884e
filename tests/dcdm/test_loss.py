"""The scale-free loss: scale invariance, equality with one DCDM step, zero
exactly at the inverse."""

import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from sciml.dcdm import DCDM, DCDMNet, PrecisionWarning, a_norm_loss, dcdm_loss, direction_fn, solve


def laplacian_2d(n):
    t = 2 * np.eye(n) - np.eye(n, k=1) - np.eye(n, k=-1)
    return np.kron(t, np.eye(n)) + np.kron(np.eye(n), t)


def setup(n=8, batch=3, seed=0):
    A = laplacian_2d(n) + np.diag(np.random.default_rng(seed).uniform(0, 1, n * n))
    b = np.random.default_rng(seed + 1).standard_normal((batch, n, n))
    b /= np.linalg.norm(b.reshape(batch, -1), axis=1)[:, None, None]
    apply_A = lambda x: (jnp.asarray(A) @ x.ravel()).reshape(x.shape)  # noqa: E731
    return A, jnp.asarray(b), apply_A


def test_invariant_to_scaling_the_output(getkey):
    A, b, apply_A = setup()
    net = DCDMNet(2, pairs=(1, 1, 1), dtype=jnp.float64, key=getkey())
    f = direction_fn(net, jnp.ones((8, 8)))
    base = dcdm_loss(f, apply_A, b)
    for c in (1e-3, -2.0, 1e4):
        np.testing.assert_allclose(dcdm_loss(lambda r, c=c: c * f(r), apply_A, b), base, rtol=1e-10)
    assert 0 < base < 1


def test_equals_squared_residual_after_one_step(getkey):
    A, b, apply_A = setup()
    net = DCDMNet(2, pairs=(1, 1, 1), dtype=jnp.float64, key=getkey())
    f = direction_fn(net, jnp.ones((8, 8)))
    one_step = []
    with warnings.catch_warnings():  # rtol=1e-14 on purpose: exactly one step
        warnings.simplefilter("ignore", PrecisionWarning)
        for bi in b:
            sol = solve(apply_A, bi, f, DCDM(max_steps=1, n_orthogonal=0, rtol=1e-14), throw=False)
            one_step.append(float(sol.stats["residual_history"][1]) ** 2)
    np.testing.assert_allclose(dcdm_loss(f, apply_A, b), np.mean(one_step), rtol=1e-10)


def test_zero_iff_direction_proportional_to_inverse():
    A, b, apply_A = setup()
    A_inv = jnp.asarray(np.linalg.inv(A))
    inverse = lambda r: -3.0 * (A_inv @ r.ravel()).reshape(r.shape)  # noqa: E731
    assert float(dcdm_loss(inverse, apply_A, b)) < 1e-26
    # any perturbation away from the inverse direction gives a positive loss
    key = jax.random.key(3)
    for eps in (1e-3, 1e-1):
        noise = jax.random.normal(key, b.shape[1:])
        perturbed = lambda r, eps=eps, noise=noise: inverse(r) + eps * noise  # noqa: E731
        assert float(dcdm_loss(perturbed, apply_A, b)) > 1e-12
    # identity directions are one steepest-descent step: loss < ‖b‖² = 1
    assert 0 < float(dcdm_loss(lambda r: r, apply_A, b)) < 1


def test_a_norm_loss_equals_relative_a_norm_error_of_one_step(getkey):
    """`1 − (qᵀb)²/((qᵀAq)(bᵀx*))` equals `‖x* − x₁‖²_A / ‖x*‖²_A` for the
    iterate `x₁` of one DCDM step, with `x*` from a dense numpy solve."""
    A, b, apply_A = setup()
    net = DCDMNet(2, pairs=(1, 1, 1), dtype=jnp.float64, key=getkey())
    f = direction_fn(net, jnp.ones((8, 8)))
    x_star = np.stack([np.linalg.solve(A, np.asarray(bi).ravel()).reshape(8, 8) for bi in b])
    errors = []
    with warnings.catch_warnings():  # rtol=1e-14 on purpose: exactly one step
        warnings.simplefilter("ignore", PrecisionWarning)
        for bi, xi in zip(b, x_star, strict=True):
            sol = solve(apply_A, bi, f, DCDM(max_steps=1, n_orthogonal=0, rtol=1e-14), throw=False)
            e = (xi - np.asarray(sol.value)).ravel()
            errors.append((e @ A @ e) / (xi.ravel() @ A @ xi.ravel()))
    loss = dcdm_loss(f, apply_A, b, jnp.asarray(x_star))
    # measured: agree to ~1e-15; a wrong formula (e.g. the A²-norm, or bᵀb for
    # bᵀx*) is off by O(1)
    np.testing.assert_allclose(loss, np.mean(errors), rtol=1e-10)
    assert 0.05 < float(loss) < 1  # a random network: a real error, not a trivial one
    # per sample, too
    for bi, xi, err in zip(b, x_star, errors, strict=True):
        q = f(bi)
        np.testing.assert_allclose(a_norm_loss(bi, q, apply_A(q), jnp.asarray(xi)), err, rtol=1e-10)


def test_a_norm_loss_extremes_and_scale_invariance():
    A, b, apply_A = setup()
    x_star = jnp.stack([(jnp.asarray(np.linalg.inv(A)) @ bi.ravel()).reshape(8, 8) for bi in b])
    inverse = lambda r: (jnp.asarray(np.linalg.inv(A)) @ r.ravel()).reshape(r.shape)  # noqa: E731
    assert float(dcdm_loss(inverse, apply_A, b, x_star)) < 1e-13
    zero = lambda r: jnp.zeros_like(r)  # noqa: E731
    np.testing.assert_allclose(dcdm_loss(zero, apply_A, b, x_star), 1.0, rtol=1e-15)
    base = dcdm_loss(lambda r: r, apply_A, b, x_star)
    np.testing.assert_allclose(dcdm_loss(lambda r: -7.5 * r, apply_A, b, x_star), base, rtol=1e-12)


def test_b_without_its_batch_axis_is_named():
    # Before: IndexError "Too many indices" from inside apply_A (vmap took the first
    # grid axis for the batch), or a broadcast error from the network's mask.
    _, b, apply_A = setup(n=8, batch=2)
    net = DCDMNet(2, pairs=(1, 1, 1), key=jax.random.key(0))
    f = direction_fn(net, jnp.ones((8, 8)))
    one = r"`b` must be a batch of right-hand sides \(batch, \*grid\), got shape \(8, 8\), which "
    with pytest.raises(ValueError, match=one + r"is one right-hand side .* `b\[None\]`"):
        dcdm_loss(f, apply_A, b[0])
    with pytest.raises(ValueError, match=one):
        dcdm_loss(lambda r: r, apply_A, b[0])
    with pytest.raises(ValueError, match=r"`b` must be a batch .* got shape \(64,\)"):
        dcdm_loss(lambda r: r, apply_A, b[0].ravel())
    # a batch on another grid than the direction's: both shapes named
    other = jnp.ones((2, 4, 4))
    with pytest.raises(ValueError, match=r"samples \(4, 4\) .* grid of `fluid` \(8, 8\)"):
        dcdm_loss(f, lambda x: x, other)
    assert np.isfinite(float(dcdm_loss(lambda r: r, apply_A, b)))  # the batch itself passes
