"""DCDMNet against explicit references: a loop convolution for one layer, the
paper's parameter count, grid-size independence and translation equivariance."""

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy import signal

from sciml.dcdm import DCDMNet, avg_pool2, direction_fn, label_channels, solve, upsample2


def count(model):
    leaves = jax.tree_util.tree_leaves(eqx.filter(model, eqx.is_inexact_array))
    return sum(x.size for x in leaves)


def test_paper_parameter_count_3d():
    # N = 64 model: linear stem 1→16 (27·16 + 16), 4 + 6 + 4 convs 16→16
    # (27·256 + 16 each), linear 1×1×1 head (16 + 1): 97,457 ≈ 97.5k.
    net = DCDMNet(3, pairs=(2, 3, 2), key=jax.random.key(0))
    assert count(net) == 448 + 14 * 6928 + 17 == 97457
    assert net.stem.weight.dtype == jnp.float32
    labelled = DCDMNet(3, label_channels=True, key=jax.random.key(0))
    assert count(labelled) == 97457 + 3 * 27 * 16


def test_stem_is_a_same_padded_correlation(getkey):
    net = DCDMNet(2, pairs=(1, 1, 1), label_channels=True, dtype=jnp.float64, key=getkey())
    x = np.asarray(jax.random.normal(getkey(), (4, 10, 12)))
    ours = np.asarray(net.stem(jnp.asarray(x)))
    w = np.asarray(net.stem.weight)  # (out, in, 3, 3)
    bias = np.asarray(net.stem.bias)  # (out, 1, 1)
    for o in range(w.shape[0]):
        ref = sum(signal.correlate2d(x[i], w[o, i], mode="same") for i in range(4)) + bias[o]
        np.testing.assert_allclose(ours[o], ref, rtol=1e-12, atol=1e-12)


def test_pool_and_upsample_reference():
    x = np.arange(2 * 4 * 6, dtype=float).reshape(2, 4, 6)
    ref = np.array(
        [
            [
                [x[c, 2 * i : 2 * i + 2, 2 * j : 2 * j + 2].mean() for j in range(3)]
                for i in range(2)
            ]
            for c in range(2)
        ]
    )
    np.testing.assert_allclose(avg_pool2(jnp.asarray(x)), ref)
    up = np.asarray(upsample2(jnp.asarray(ref)))
    for i in range(4):
        for j in range(6):
            assert up[1, i, j] == ref[1, i // 2, j // 2]


def test_same_weights_work_at_two_grid_sizes(getkey):
    net = DCDMNet(3, pairs=(0, 1, 0), key=getkey())
    small, large = (jax.random.normal(getkey(), (1, *s)) for s in ((4, 4, 4), (6, 8, 4)))
    assert net(small).shape == (4, 4, 4)
    assert net(large).shape == (6, 8, 4)
    # The centre of a field constant in a big neighbourhood sees no border.
    const = lambda s: jnp.ones((1, *s))  # noqa: E731
    a = DCDMNet(2, pairs=(1, 0, 1), key=getkey())
    np.testing.assert_allclose(a(const((32, 32)))[16, 16], a(const((48, 48)))[24, 24], rtol=1e-5)


def test_translation_equivariance_away_from_borders(getkey):
    net = DCDMNet(2, pairs=(1, 1, 1), dtype=jnp.float64, key=getkey())
    n = 64
    x = np.zeros((1, n, n))
    x[0, 26:36, 28:34] = np.asarray(jax.random.normal(getkey(), (10, 6)))
    shift = (2, 4)  # multiples of the pooling factor
    y = np.asarray(net(jnp.asarray(x)))
    y_shifted = np.asarray(net(jnp.asarray(np.roll(x, shift, axis=(1, 2)))))
    # receptive radius 1 + 2 + 1 + 4 + 1 + 2 = 11 cells: compare inside [14, 50)
    inner = (slice(14, 50), slice(14, 50))
    np.testing.assert_allclose(np.roll(y, shift, axis=(0, 1))[inner], y_shifted[inner], atol=1e-12)


def test_bad_grids_fail_clearly(getkey):
    net2 = DCDMNet(2, pairs=(1, 1, 1), key=getkey())
    with pytest.raises(ValueError, match="built for 2-D"):
        net2(jnp.ones((1, 8, 8, 8)))
    with pytest.raises(ValueError, match="even"):
        net2(jnp.ones((1, 8, 7)))
    with pytest.raises(ValueError, match="input channel"):
        net2(jnp.ones((4, 8, 8)))
    with pytest.raises(ValueError, match="dim"):
        DCDMNet(4, key=getkey())


def test_a_direction_or_operator_of_another_grid_is_named_by_solve(getkey):
    # Before: "mul got incompatible shapes for broadcasting: (16, 16), (8, 8)" from
    # inside the solve, naming neither the direction nor `b`.
    net = DCDMNet(2, pairs=(1, 1, 1), key=getkey())
    f = direction_fn(net, jnp.ones((8, 8)))
    b = jnp.ones((16, 16))
    with pytest.raises(
        ValueError,
        match=r"`direction_fn` must take an array of the shape of `b` \(16, 16\) .* built "
        r"for the grid of `fluid` \(8, 8\), got a residual of shape \(16, 16\)",
    ):
        solve(lambda x: x, b, f)
    with pytest.raises(
        ValueError, match=r"`apply_A` must take an array of the shape of `b` \(16, 16\)"
    ):
        solve(lambda x: x * jnp.ones((8, 8)), b, lambda r: r)


def test_direction_fn_masks_and_casts(getkey):
    net = DCDMNet(2, pairs=(1, 1, 1), label_channels=True, key=getkey())
    labels = np.zeros((8, 8), np.int8)
    labels[:, 6:] = 2  # air on top
    labels[3, 3] = 1
    fluid = jnp.asarray(labels == 0, jnp.float64)
    f = direction_fn(net, fluid, label_channels(labels))
    r = jax.random.normal(getkey(), (8, 8), jnp.float64)
    q = f(r)
    assert q.dtype == jnp.float64
    assert np.all(np.asarray(q)[labels != 0] == 0)
    # values of r at non-fluid cells are ignored
    np.testing.assert_array_equal(q, f(jnp.where(fluid > 0, r, 7.0)))
    # The network sees r scaled to unit RMS over the fluid cells.
    r_fluid = np.asarray(r)[labels == 0]
    scaled = np.asarray(r * fluid) / np.sqrt(np.mean(r_fluid**2))
    ref = net(jnp.concatenate([jnp.asarray(scaled, jnp.float32)[None], label_channels(labels)]))
    np.testing.assert_allclose(q, np.asarray(ref, np.float64) * np.asarray(fluid), rtol=1e-6)


@pytest.mark.parametrize("c", [1e-3, 0.5, 40.0])
def test_direction_fn_does_not_depend_on_the_scale_of_the_residual(getkey, c):
    # A ReLU network with biases is not scale-equivariant: without the RMS
    # scaling the directions for r and c·r differ by 1e-2 to 1 (measured),
    # with it they agree to float32 rounding (1e-7).
    net = _random_biases(DCDMNet(2, pairs=(1, 1, 1), key=getkey()), getkey())
    fluid = jnp.ones((8, 8))
    f = direction_fn(net, fluid)
    r = jax.random.normal(getkey(), (8, 8))
    q, qc = np.asarray(f(r)), np.asarray(f(c * r))
    np.testing.assert_allclose(qc, q, rtol=1e-4, atol=1e-5 * np.abs(q).max())
    unscaled = np.asarray(net((c * r)[None]))
    assert np.abs(unscaled / np.linalg.norm(unscaled) - q / np.linalg.norm(q)).max() > 1e-3


def test_biases_start_at_zero_as_in_keras(getkey):
    net = DCDMNet(2, pairs=(1, 1, 1), width=4, key=getkey())
    biases = [
        leaf
        for leaf in jax.tree_util.tree_leaves(net)
        if leaf.ndim == 3 and leaf.shape[1:] == (1, 1)
    ]
    assert biases and all(not np.any(b) for b in biases)


def _random_biases(net, key):
    """The same network with non-zero biases (so its even part is not zero)."""
    is_bias = lambda x: isinstance(x, eqx.nn.Conv) and x.bias is not None  # noqa: E731
    convs = [c for c in jax.tree_util.tree_leaves(net, is_leaf=is_bias) if is_bias(c)]
    keys = jax.random.split(key, len(convs))
    return eqx.tree_at(
        lambda n: [c.bias for c in jax.tree_util.tree_leaves(n, is_leaf=is_bias) if is_bias(c)],
        net,
        [
            jax.random.normal(k, c.bias.shape, c.bias.dtype)
            for k, c in zip(keys, convs, strict=True)
        ],
    )


def test_odd_variant_is_exactly_odd_and_the_plain_one_is_not(getkey):
    labels = label_channels(np.random.default_rng(0).integers(0, 3, (8, 8)))
    r = jax.random.normal(getkey(), (8, 8))
    x, minus_x = (jnp.concatenate([s * r[None], labels]) for s in (1, -1))
    key = getkey()
    odd = _random_biases(
        DCDMNet(2, pairs=(1, 1, 1), width=4, label_channels=True, odd=True, key=key), getkey()
    )
    np.testing.assert_array_equal(odd(minus_x), -odd(x))  # exactly, bit for bit
    assert np.abs(odd(x)).max() > 0
    plain = DCDMNet(2, pairs=(1, 1, 1), width=4, label_channels=True, key=key)
    plain = _random_biases(plain, getkey())
    assert np.abs(plain(minus_x) + plain(x)).max() > 1e-3 * np.abs(plain(x)).max()


def test_bias_free_relu_network_is_positively_homogeneous(getkey):
    net = DCDMNet(2, pairs=(1, 1, 1), width=4, bias=False, dtype=jnp.float64, key=getkey())
    x = jax.random.normal(getkey(), (1, 8, 8), jnp.float64)
    np.testing.assert_allclose(net(3.5 * x), 3.5 * net(x), rtol=1e-12, atol=1e-14)


def test_reference_layout_matches_the_written_out_chain(getkey):
    """The reference code's first stage: a = σ(conv s₀), pairs, skip = σ(conv a)."""
    net = _random_biases(
        DCDMNet(
            2, pairs=(2, 1, 1), width=4, reference_layout=True, dtype=jnp.float64, key=getkey()
        ),
        getkey(),
    )
    plain = DCDMNet(2, pairs=(2, 1, 1), width=4, key=getkey())
    assert count(net) == count(plain)  # the same number of convolutions
    x = jax.random.normal(getkey(), (1, 8, 8), jnp.float64)
    relu = jax.nn.relu
    s0 = net.stem(x)
    a = relu(net.down_in(s0))
    (pair,) = net.down
    a = a + relu(pair.conv2(relu(pair.conv1(a))))
    skip = relu(net.down_out(a))
    (mid,) = net.mid
    h = avg_pool2(skip)
    h = h + relu(mid.conv2(relu(mid.conv1(h))))
    h = upsample2(h) + skip
    (up,) = net.up
    h = h + relu(up.conv2(relu(up.conv1(h))))
    np.testing.assert_allclose(net(x), net.head(h)[0], rtol=1e-13, atol=1e-13)
    with pytest.raises(ValueError, match="reference_layout"):
        DCDMNet(2, pairs=(0, 1, 1), reference_layout=True, key=getkey())
