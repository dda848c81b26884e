"""The channels-last pass of `MultilevelDCDMNet` (`N`, `Nᵀ` written out, each
residual convolution folded into one kernel) against a slow reference V-cycle:
convolutions as explicit sums over the window taps on `(channels, *grid)`, the
transpose by `jax.linear_transpose` of that reference, in float64."""

import itertools

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from sciml.dcdm import MultilevelDCDMNet, label_channels, pretrained
from solvers.poisson import make_scene


def tap_conv(x, weight):
    """`y[o, p] = Σ_i Σ_t weight[o, i, t] x[i, p + t − 1]`, zero outside the grid."""
    dim = x.ndim - 1
    grid = x.shape[1:]
    xp = jnp.pad(x, [(0, 0)] + [(1, 1)] * dim)
    y = jnp.zeros((weight.shape[0], *grid), x.dtype)
    for tap in itertools.product(range(3), repeat=dim):
        window = xp[(slice(None),) + tuple(slice(t, t + n) for t, n in zip(tap, grid))]
        y = y + jnp.einsum("oi,i...->o...", weight[(slice(None), slice(None), *tap)], window)
    return y


def reference_factor(net, x, labels=None):
    """`N x` by the V-cycle's definition (module docstring), float64; `x` is
    the residual channel, `labels` the label channels for geometry masks."""
    w = lambda conv: jnp.asarray(conv.weight, jnp.float64)  # noqa: E731
    gains = jnp.atleast_1d(jnp.asarray(net.gain, jnp.float64))

    def smooth(convs, h):
        for conv in convs:
            h = h + tap_conv(h, w(conv))
        return h

    def pool(h):  # mean over each 2×2(×2) block
        blocks = [
            h[(slice(None),) + s]
            for s in itertools.product(*[[slice(0, None, 2), slice(1, None, 2)]] * (h.ndim - 1))
        ]
        return sum(blocks) / len(blocks)

    def upsample(h):
        for axis in range(1, h.ndim):
            h = jnp.repeat(h, 2, axis=axis)
        return h

    def vcycle(h, labels):
        s = smooth(net.pre, h)
        if labels is not None:  # mask[c, p] = Σ_k fraction of label k under p · W[k, c]
            s = s * jnp.einsum("k...,kc->c...", labels, jnp.asarray(net.geometry, jnp.float64))
        levels = net.levels(s.shape[1:])
        if levels == 0:
            return smooth(net.coarse, s)
        gain = gains[min(levels, len(gains)) - 1]  # counted from the coarsest level
        coarse = vcycle(pool(s), None if labels is None else pool(labels))
        return smooth(net.post, s + gain * upsample(coarse))

    labels = None if net.geometry is None else jnp.asarray(labels, jnp.float64)
    return vcycle(tap_conv(x, w(net.stem)), labels)


@jax.jit
def reference_gram(net, x):
    """`Nᵀ N x` of the reference (float64)."""
    x = jnp.asarray(x, jnp.float64)
    factor = lambda r: reference_factor(net, r, x[1:])  # noqa: E731  (linear in r alone)
    (z,) = jax.linear_transpose(factor, x[:1])(factor(x[:1]))
    return z[0]


def with_options(net, key):
    """`net` with random per-level gains (around 2) and geometry weights, so
    that a wrong level index or a misplaced mask shows."""
    k1, k2 = jax.random.split(key)
    net = eqx.tree_at(lambda n: n.gain, net, net.gain + jax.random.uniform(k1, net.gain.shape))
    if net.geometry is not None:
        weights = jax.random.uniform(k2, net.geometry.shape, net.geometry.dtype, 0.2, 1.8)
        net = eqx.tree_at(lambda n: n.geometry, net, weights)
    return net


@pytest.mark.parametrize(
    "dim, n, coarsest, options",
    [
        (2, 16, 4, {}),
        # three levels, two gains: the top level reuses the second
        (2, 32, 4, {"gains": 2, "geometry": True}),
        pytest.param(3, 8, 2, {}, marks=pytest.mark.slow),
    ],
)
def test_float64_pass_matches_the_reference(dim, n, coarsest, options, getkey):
    net = MultilevelDCDMNet(
        dim, width=3, smooth=2, coarsest=coarsest, dtype=jnp.float64, key=getkey(), **options
    )
    net = with_options(net, getkey())
    assert net.levels((n,) * dim) == (3 if options else 2)
    x = jax.random.normal(getkey(), (1,) + (n,) * dim, jnp.float64)
    if net.geometry is not None:  # a scene with fluid, solid and air cells
        labels = make_scene(n, dim=dim, seed=4, n_obstacles=2, free_surface=True)
        x = jnp.concatenate([x, label_channels(labels).astype(jnp.float64)])
    y = jax.random.normal(getkey(), (3,) + (n,) * dim, jnp.float64)

    @jax.jit
    def pairs(net, x, y):
        factor = lambda r: reference_factor(net, r, x[1:])  # noqa: E731
        transpose = jax.linear_transpose(factor, x[:1])
        onehot = x[1:] if net.geometry is not None else None
        return [
            (net.factor(x), factor(x[:1])),
            (net.factor_transpose(y, onehot), transpose(y)[0]),
            (net(x), reference_gram(net, x)),
        ]

    # measured: ~1e-15 of the largest entry in all three
    for ours, ref in pairs(net, x, y):
        np.testing.assert_allclose(ours, ref, rtol=0, atol=1e-13 * np.abs(ref).max())


@pytest.mark.parametrize(
    "name, n", [("poisson2d", 64), pytest.param("poisson3d", 16, marks=pytest.mark.slow)]
)
def test_shipped_weights_in_float32_match_the_reference(name, n, getkey):
    """The shipped generators (float32) give the reference's `NᵀN x` up to
    float32 rounding on a random input."""
    net = pretrained(name)
    x = jax.random.normal(getkey(), (1,) + (n,) * net.dim, jnp.float32)
    ref = np.asarray(reference_gram(net, x))
    out = np.asarray(jax.jit(lambda net, x: net(x))(net, x))
    assert out.dtype == np.float32
    # measured: ~5e-7 of the largest entry (float32 rounding over ~40 convolutions)
    np.testing.assert_allclose(out, ref, rtol=0, atol=1e-5 * np.abs(ref).max())
