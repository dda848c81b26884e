"""`gelu_exact` against float64 references written here, and in an FNO train step
against jax's own exact GELU (the function it replaces in like-for-like runs)."""

import functools
import math

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from sciml.operators import FNO, gelu_exact, relative_lp_loss


def _reference(x):
    """float64 `x Φ(x)` and its first two derivatives `Φ + x φ`, `φ (2 − x²)`."""
    cdf = np.array([0.5 * math.erfc(-v / math.sqrt(2.0)) for v in x])
    pdf = np.exp(-0.5 * x**2) / math.sqrt(2.0 * math.pi)
    return x * cdf, cdf + x * pdf, pdf * (2.0 - x**2)


def test_values_and_two_derivatives_match_float64_reference():
    x = np.concatenate([np.linspace(-10, 10, 2001), [0.0, 1e-30, -5e-3]]).astype(np.float32)
    value, first, second = _reference(x.astype(np.float64))
    got = [
        gelu_exact(jnp.asarray(x)),
        jax.vmap(jax.grad(gelu_exact))(x),
        jax.vmap(jax.grad(jax.grad(gelu_exact)))(x),
    ]
    # measured: 6.9e-7, 1.4e-7, 1.0e-7 (float32 rounding); the tanh form is 4.7e-4
    # off in value and 8.7e-4 in slope, a 1/√π for 1/√(2π) in φ 0.10 in slope
    for ours, ref, tol in zip(got, (value, first, second), (2e-6, 5e-7, 5e-7)):
        np.testing.assert_allclose(np.asarray(ours, np.float64), ref, rtol=0, atol=tol)


def test_train_step_matches_jax_exact_gelu_within_rounding():
    """The loss and every gradient of an FNO step equal those with
    `jax.nn.gelu(approximate=False)` to float32 rounding."""
    x = jax.random.normal(jax.random.key(1), (4, 1, 16, 16))
    y = jnp.roll(x, 2, axis=-1)

    def loss_and_grads(activation):
        model = FNO((6, 6), 1, 1, 8, n_layers=2, non_linearity=activation, key=jax.random.key(0))
        params, static = eqx.partition(model, eqx.is_inexact_array)

        def loss(params):
            out = jax.vmap(eqx.combine(params, static))(x)
            return relative_lp_loss(out, y, d=2, reduction="mean")

        return jax.jit(jax.value_and_grad(loss))(params)

    (loss_new, grads_new) = loss_and_grads(gelu_exact)
    (loss_old, grads_old) = loss_and_grads(functools.partial(jax.nn.gelu, approximate=False))
    (_, grads_tanh) = loss_and_grads(jax.nn.gelu)
    np.testing.assert_allclose(loss_new, loss_old, rtol=1e-6)

    def worst(a_tree, b_tree):  # largest difference of a leaf, relative to the leaf's scale
        pairs = zip(jax.tree_util.tree_leaves(a_tree), jax.tree_util.tree_leaves(b_tree))
        return max(float(jnp.max(jnp.abs(a - b)) / jnp.max(jnp.abs(b))) for a, b in pairs)

    # measured: 2.1e-7 against the old form (rounding); the tanh form differs by 5.1e-4
    assert worst(grads_new, grads_old) < 1e-5
    assert worst(grads_tanh, grads_old) > 1e-4
