"""Relative Lp and H1 losses against closed forms and loop references."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from sciml.operators import finite_difference, h1_loss, relative_lp_loss


@pytest.fixture(scope="module")
def target():
    return jax.random.normal(jax.random.key(0), (3, 2, 8, 6))


def test_relative_l2_closed_forms(target):
    np.testing.assert_allclose(
        relative_lp_loss(2 * target, target, d=2, eps=0.0, reduction="none"),
        np.ones((3, 2)),
        atol=1e-15,
    )
    np.testing.assert_allclose(
        relative_lp_loss(1.5 * target, target, d=2, eps=0.0, reduction="mean"), 0.5
    )
    # sum over the 3 samples and 2 channels (neuraloperator's default reduction)
    np.testing.assert_allclose(relative_lp_loss(1.5 * target, target, d=2, eps=0.0), 3.0)


def test_relative_lp_matches_loop_reference(target):
    pred = target + 0.3 * jax.random.normal(jax.random.key(1), target.shape)
    p_np, t_np = np.asarray(pred), np.asarray(target)
    for p in (1.0, 2.0, 3.0):
        expected = np.zeros((3, 2))
        for b in range(3):
            for c in range(2):
                diff = np.sum(np.abs(p_np[b, c] - t_np[b, c]) ** p) ** (1 / p)
                expected[b, c] = diff / np.sum(np.abs(t_np[b, c]) ** p) ** (1 / p)
        got = relative_lp_loss(pred, target, d=2, p=p, eps=0.0, reduction="none")
        np.testing.assert_allclose(got, expected, rtol=1e-12)


@pytest.mark.parametrize("n", [8, 16, 64])
def test_h1_periodic_closed_form(n):
    # y = sin 2πx, pred = y + ε sin 4πx on x_j = j/n. The periodic central difference of
    # sin 2πkx is exactly cos(2πkx)·sin(2πkh)/h, so with Σsin² = Σcos² = n/2:
    # loss = ε sqrt((1 + (sin 4πh/h)²) / (1 + (sin 2πh/h)²)).
    eps_pert, h = 0.1, 1.0 / n
    x = jnp.arange(n) / n
    y = jnp.sin(2 * jnp.pi * x)
    pred = y + eps_pert * jnp.sin(4 * jnp.pi * x)
    expected = eps_pert * np.sqrt(
        (1 + (np.sin(4 * np.pi * h) / h) ** 2) / (1 + (np.sin(2 * np.pi * h) / h) ** 2)
    )
    got = h1_loss(pred[None, None], y[None, None], d=1, eps=0.0)
    np.testing.assert_allclose(got, expected, rtol=1e-12)


def test_h1_converges_to_the_continuum_value():
    # As h -> 0 the discrete value tends to ε sqrt((1 + 16π²) / (1 + 4π²)) at second order.
    exact = 0.1 * np.sqrt((1 + 16 * np.pi**2) / (1 + 4 * np.pi**2))
    errors = []
    for n in (32, 64, 128):
        x = jnp.arange(n) / n
        y = jnp.sin(2 * jnp.pi * x)
        errors.append(
            abs(
                float(h1_loss((y + 0.1 * jnp.sin(4 * jnp.pi * x))[None, None], y[None, None], d=1))
                - exact
            )
        )
    orders = np.log2(np.array(errors[:-1]) / np.array(errors[1:]))
    np.testing.assert_allclose(orders, 2.0, atol=0.05)


@pytest.mark.parametrize("periodic", [True, False])
def test_h1_2d_matches_loop_reference(periodic):
    rng = np.random.default_rng(2)
    y = rng.normal(size=(2, 1, 6, 5))
    pred = y + 0.2 * rng.normal(size=y.shape)
    lengths = (2.0, 1.0)
    h = (lengths[0] / 6, lengths[1] / 5)

    def derivative(u, axis):
        n = u.shape[axis]
        out = np.zeros_like(u)
        for i in range(n):
            lo, hi = i - 1, i + 1
            if periodic:
                lo, hi, width = lo % n, hi % n, 2
            elif i == 0:
                lo, hi, width = 0, 1, 1
            elif i == n - 1:
                lo, hi, width = n - 2, n - 1, 1
            else:
                width = 2
            out_idx = [slice(None)] * u.ndim
            out_idx[axis] = i
            take = [slice(None)] * u.ndim
            take_lo, take_hi = list(take), list(take)
            take_lo[axis], take_hi[axis] = lo, hi
            out[tuple(out_idx)] = (u[tuple(take_hi)] - u[tuple(take_lo)]) / (width * h[axis])
        return out

    def sq(u):
        return (u**2).sum() + sum((derivative(u, a) ** 2).sum() for a in (0, 1))

    expected = np.array(
        [[np.sqrt(sq(pred[b, 0] - y[b, 0])) / np.sqrt(sq(y[b, 0]))] for b in range(2)]
    )
    got = h1_loss(
        jnp.asarray(pred),
        jnp.asarray(y),
        d=2,
        periodic=periodic,
        domain_length=lengths,
        reduction="none",
        eps=0.0,
    )
    np.testing.assert_allclose(got, expected, rtol=1e-12)


def test_finite_difference_one_sided_boundary():
    u = jnp.asarray([0.0, 1.0, 4.0, 9.0])  # x², h = 1
    np.testing.assert_allclose(finite_difference(u, 0, 1.0, periodic=False), [1.0, 2.0, 4.0, 5.0])


def test_losses_are_differentiable_and_float32(target):
    pred = (target + 0.1).astype(jnp.float32)
    y = target.astype(jnp.float32)
    assert relative_lp_loss(pred, y, d=2).dtype == jnp.float32
    assert h1_loss(pred, y, d=2).dtype == jnp.float32
    np.testing.assert_allclose(h1_loss(pred, y, d=2), h1_loss(target + 0.1, target, d=2), rtol=1e-5)
    grad = jax.grad(lambda p: relative_lp_loss(p, target, d=2, eps=0.0))(2 * target)
    # d/dp ‖p - y‖/‖y‖ = (p - y) / (‖p - y‖ ‖y‖); at p = 2y that is y / ‖y‖² per (sample, channel)
    norms = jnp.sum(target**2, axis=(2, 3), keepdims=True)
    np.testing.assert_allclose(grad, target / norms, rtol=1e-12)


def test_bad_input_raises(target):
    with pytest.raises(ValueError, match="differ in shape"):
        relative_lp_loss(target, target[:, :1], d=2)
    with pytest.raises(ValueError, match="`reduction` must be one of"):
        h1_loss(target, target, d=2, reduction="max")
    with pytest.raises(ValueError, match="need d >= 1 grid axes"):
        relative_lp_loss(target[0, 0, 0], target[0, 0, 0], d=0)
    with pytest.raises(ValueError, match="`domain_length` needs"):
        h1_loss(target, target, d=2, domain_length=(1.0, 1.0, 1.0))


def test_finite_difference_third_order_edges_are_exact_for_cubics():
    # neuraloperator 2.0's one-sided stencils (−11, 18, −9, 2)/6h are exact for
    # polynomials up to degree 3; the 1.0 rule (first order) is not.
    h = 0.25
    x = h * np.arange(7)
    u = jnp.asarray(x**3 - 2 * x**2 + x)
    du = 3 * x**2 - 4 * x + 1
    got = np.asarray(finite_difference(u, 0, h, periodic=False, edge_order=3))
    np.testing.assert_allclose(got[[0, -1]], du[[0, -1]], rtol=0, atol=1e-12)
    first = np.asarray(finite_difference(u, 0, h, periodic=False))
    assert abs(first[0] - du[0]) > 0.1  # the first-order edge misses by O(h)


def test_finite_difference_edge_orders_converge_at_their_order():
    # Edge error for u = exp(x) on [0, 1] (u'(0) = 1): order 1 with edge_order=1,
    # order 3 with edge_order=3.
    def edge_error(n, edge_order):
        x = np.linspace(0.0, 1.0, n)
        d = finite_difference(jnp.exp(x), 0, x[1], periodic=False, edge_order=edge_order)
        return abs(float(d[0]) - 1.0)

    for edge_order, expected in ((1, 1.0), (3, 3.0)):
        errors = [edge_error(n, edge_order) for n in (33, 65, 129)]
        orders = np.log2(np.array(errors[:-1]) / np.array(errors[1:]))
        np.testing.assert_allclose(orders, expected, atol=0.1)


def test_h1_third_order_edges_match_loop_reference():
    rng = np.random.default_rng(3)
    y = rng.normal(size=(2, 1, 6, 5))
    pred = y + 0.2 * rng.normal(size=y.shape)
    h = (2.0 / 6, 1.0 / 5)

    def derivative(u, axis):
        u = np.moveaxis(u, axis, 0)
        out = np.empty_like(u)
        for i in range(1, u.shape[0] - 1):
            out[i] = (u[i + 1] - u[i - 1]) / (2 * h[axis])
        out[0] = (-11 * u[0] + 18 * u[1] - 9 * u[2] + 2 * u[3]) / (6 * h[axis])
        out[-1] = (11 * u[-1] - 18 * u[-2] + 9 * u[-3] - 2 * u[-4]) / (6 * h[axis])
        return np.moveaxis(out, 0, axis)

    def sq(u):
        return (u**2).sum() + sum((derivative(u, a) ** 2).sum() for a in (0, 1))

    expected = [[np.sqrt(sq(pred[b, 0] - y[b, 0])) / np.sqrt(sq(y[b, 0]))] for b in range(2)]
    got = h1_loss(
        jnp.asarray(pred),
        jnp.asarray(y),
        d=2,
        periodic=False,
        edge_order=3,
        domain_length=(2.0, 1.0),
        reduction="none",
        eps=0.0,
    )
    np.testing.assert_allclose(got, expected, rtol=1e-12)
