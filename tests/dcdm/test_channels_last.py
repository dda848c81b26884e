"""The channels-last pass of `MultilevelDCDMNet` (`N`, `Nᵀ` written out, each
residual convolution folded into one kernel) against a slow reference V-cycle:
convolutions as explicit sums over the window taps on `(channels, *grid)`, the
transpose by `jax.linear_transpose` of that reference, in float64."""

import itertools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from sciml.dcdm import MultilevelDCDMNet, pretrained


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


def reference_factor(net, x):
    """`N x` by the V-cycle's definition (module docstring), float64."""
    w = lambda conv: jnp.asarray(conv.weight, jnp.float64)  # noqa: E731
    gain = jnp.asarray(net.gain, jnp.float64)

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

    def vcycle(h):
        s = smooth(net.pre, h)
        if net.levels(s.shape[1:]) == 0:
            return smooth(net.coarse, s)
        return smooth(net.post, s + gain * upsample(vcycle(pool(s))))

    return vcycle(tap_conv(x, w(net.stem)))


@jax.jit
def reference_gram(net, x):
    """`Nᵀ N x` of the reference (float64)."""
    x = jnp.asarray(x, jnp.float64)
    (z,) = jax.linear_transpose(lambda x: reference_factor(net, x), x)(reference_factor(net, x))
    return z[0]


@pytest.mark.parametrize(
    "dim, n, coarsest", [(2, 16, 4), pytest.param(3, 8, 2, marks=pytest.mark.slow)]
)
def test_float64_pass_matches_the_reference(dim, n, coarsest, getkey):
    net = MultilevelDCDMNet(
        dim, width=3, smooth=2, coarsest=coarsest, dtype=jnp.float64, key=getkey()
    )
    assert net.levels((n,) * dim) == 2
    x = jax.random.normal(getkey(), (1,) + (n,) * dim, jnp.float64)
    y = jax.random.normal(getkey(), (3,) + (n,) * dim, jnp.float64)

    @jax.jit
    def pairs(net, x, y):
        transpose = jax.linear_transpose(lambda x: reference_factor(net, x), x)
        return [
            (net.factor(x), reference_factor(net, x)),
            (net.factor_transpose(y), transpose(y)[0]),
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
