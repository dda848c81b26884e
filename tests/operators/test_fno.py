"""FNO / TFNO: parameter parity with neuraloperator, block semantics, joint factorisation,
resolution invariance, learning a known operator, bad input."""

import functools
import math

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from sciml.operators import (
    FNO,
    TFNO,
    InstanceNorm,
    SpectralConv,
    gelu_exact,
    grid_embedding,
    relative_lp_loss,
)
from sciml.operators._layers import padding_widths


def n_params(model) -> int:
    leaves = jax.tree_util.tree_leaves(eqx.filter(model, lambda x: hasattr(x, "shape")))
    return int(sum(math.prod(leaf.shape) for leaf in leaves))


def abstract(cls, *args, **kwargs):
    """The model's parameter shapes without drawing any random numbers."""
    return eqx.filter_eval_shape(cls, *args, key=jax.random.key(0), **kwargs)


@pytest.mark.parametrize(
    "factorization,expected",
    [(None, 701_281), ("tucker", 78_145), ("cp", 83_041), ("tt", 79_097)],
)
def test_parameter_count_matches_neuraloperator(factorization, expected):
    # neuraloperator 2.0.0 FNO(n_modes=(12, 12), in 1, out 1, hidden 32, 4 layers,
    # factorization=..., rank=0.1): real degrees of freedom (complex counts twice).
    model = abstract(FNO, (12, 12), 1, 1, 32, factorization=factorization, rank=0.1)
    assert n_params(model) == expected


def test_tfno_defaults_are_tucker_ten_percent():
    tfno = abstract(TFNO, (12, 12), 1, 1, 32)
    assert n_params(tfno) == 78_145
    conv = tfno.blocks[0].conv
    assert conv.factorization == "tucker"
    assert conv.weight.rank == (17, 17, 6, 4)
    assert isinstance(tfno, FNO)


def test_joint_factorization_parameters_are_shared():
    joint = abstract(TFNO, (12, 12), 1, 1, 32, joint_factorization=True, rank=0.05)
    assert all(block.conv is None for block in joint.blocks)
    weight = joint.joint_conv.weight
    assert weight.shape == (4, 32, 32, 12, 7)
    ranks = weight.rank
    spectral = 2 * (math.prod(ranks) + sum(n * r for n, r in zip(weight.shape, ranks)))
    assert n_params(joint) == 13_025 + spectral + 4 * 32


@pytest.fixture(scope="module")
def joint_model():
    return TFNO(
        (6, 6), 1, 1, 8, n_layers=3, joint_factorization=True, rank=0.5, key=jax.random.key(1)
    )


def test_joint_factorization_layer_l_uses_its_row(joint_model):
    x = jax.random.normal(jax.random.key(2), (1, 12, 12))
    full = joint_model.joint_conv.weight.to_tensor()  # (layers, C, C, 6, 4)
    assert not np.allclose(full[0], full[1])  # every layer its own slice (neuralop issue #108)
    # An ordinary FNO whose layer-l convolution holds the dense W[l] and bias[l].
    template = SpectralConv(8, 8, (6, 6), key=jax.random.key(3))
    blocks = []
    for layer, block in enumerate(joint_model.blocks):
        pair = jnp.stack([full[layer].real, full[layer].imag], axis=-1)
        conv = eqx.tree_at(
            lambda c: (c.weight.data, c.bias),
            template,
            (pair, joint_model.joint_conv.bias[layer]),
        )
        blocks.append(eqx.tree_at(lambda b: b.conv, block, conv, is_leaf=lambda v: v is None))
    unrolled = eqx.tree_at(
        lambda m: (m.blocks, m.joint_conv),
        joint_model,
        (tuple(blocks), None),
        is_leaf=lambda v: v is None,
    )
    np.testing.assert_allclose(
        eqx.filter_jit(unrolled)(x), eqx.filter_jit(joint_model)(x), atol=1e-12
    )


@pytest.fixture(scope="module")
def small_model():
    return FNO((6, 6), 2, 1, 8, n_layers=2, norm="group", key=jax.random.key(4))


def _post_activation_reference(block, v, last):
    act = jax.nn.gelu
    s1, s2 = block.fno_skip(v), block.channel_mlp_skip(v)
    z = block.norms[0](block.conv(v)) + s1
    z = z if last else act(z)
    z = block.norms[1](block.channel_mlp(z) + s2)
    return z if last else act(z)


def _pre_activation_reference(block, v, last):
    act = jax.nn.gelu
    v = block.norms[0](act(v))
    s1, s2 = block.fno_skip(v), block.channel_mlp_skip(v)
    z = block.conv(v) + s1
    z = z if last else act(z)
    return block.channel_mlp(block.norms[1](z)) + s2


@pytest.mark.parametrize("preactivation", [False, True])
def test_blocks_follow_neuraloperator_order(preactivation):
    model = FNO(
        (6, 6),
        1,
        1,
        8,
        n_layers=2,
        norm="group",
        preactivation=preactivation,
        key=jax.random.key(5),
    )
    # make the norms' affine maps and the soft-gating weights non-trivial
    model = jax.tree_util.tree_map(
        lambda x: x * 1.3 + 0.1 if eqx.is_array(x) and x.ndim == 1 else x, model
    )
    v = jax.random.normal(jax.random.key(6), (8, 12, 12))
    reference = _pre_activation_reference if preactivation else _post_activation_reference

    @eqx.filter_jit
    def compare(model, v):
        return [
            (block(v), reference(block, v, last=i == len(model.blocks) - 1))
            for i, block in enumerate(model.blocks)
        ]

    for got, expected in compare(model, v):
        np.testing.assert_allclose(got, expected, atol=1e-12)


def _numpy_instance_norm(x, eps=1e-5):
    """Per-channel normalisation over the grid, written out in numpy."""
    x = np.asarray(x)
    out = np.empty_like(x)
    for c in range(x.shape[0]):
        mean = x[c].sum() / x[c].size
        var = ((x[c] - mean) ** 2).sum() / x[c].size
        out[c] = (x[c] - mean) / np.sqrt(var + eps)
    return out


def test_instance_norm_matches_numpy_reference():
    x = 3.0 + 2.0 * jax.random.normal(jax.random.key(30), (3, 10, 7))
    np.testing.assert_allclose(InstanceNorm()(x), _numpy_instance_norm(x), rtol=1e-12)


@pytest.mark.parametrize("last", [False, True])
def test_instance_norm_block_matches_reference(last):
    # norm="instance": z = IN(K v) + skip(v), σ; z = IN(MLP(z) + skip_mlp(v)), σ
    # (neuraloperator's order), with the norm computed independently in numpy.
    model = FNO((6, 6), 1, 1, 8, n_layers=2, norm="instance", key=jax.random.key(31))
    block = model.blocks[-1 if last else 0]
    assert len(block.norms) == 2 and all(isinstance(n, InstanceNorm) for n in block.norms)
    v = jax.random.normal(jax.random.key(32), (8, 12, 12))
    act = jax.nn.gelu
    z = _numpy_instance_norm(block.conv(v)) + block.fno_skip(v)
    z = z if last else act(z)
    z = _numpy_instance_norm(block.channel_mlp(z) + block.channel_mlp_skip(v))
    expected = z if last else act(z)
    np.testing.assert_allclose(eqx.filter_jit(block)(v), expected, atol=1e-12)


@pytest.mark.parametrize("norm", [None, "instance"])
def test_block_without_channel_mlp_matches_reference(norm):
    # use_channel_mlp=False: z = norm(K v) + skip(v), then σ unless last; no MLP, one norm.
    model = FNO(
        (6, 6), 1, 1, 8, n_layers=2, norm=norm, use_channel_mlp=False, key=jax.random.key(33)
    )
    v = jax.random.normal(jax.random.key(34), (8, 12, 12))
    for i, block in enumerate(model.blocks):
        assert block.channel_mlp is None and block.channel_mlp_skip is None
        assert len(block.norms) == (1 if norm else 0)
        conv = np.asarray(block.conv(v))
        z = (_numpy_instance_norm(conv) if norm else conv) + block.fno_skip(v)
        expected = z if i == len(model.blocks) - 1 else jax.nn.gelu(z)
        np.testing.assert_allclose(eqx.filter_jit(block)(v), expected, atol=1e-12)
    # and the whole model: lifting, the two blocks, projection
    x = jax.random.normal(jax.random.key(35), (1, 12, 12))
    h = model.lifting(grid_embedding(x))
    for block in model.blocks:
        h = block(h)
    np.testing.assert_allclose(eqx.filter_jit(model)(x), model.projection(h), atol=1e-12)


def test_tanh_stabilizer_feeds_tanh_to_the_convolution():
    model = FNO((6, 6), 1, 1, 8, n_layers=1, stabilizer="tanh", key=jax.random.key(36))
    block = model.blocks[0]
    v = 2.0 * jax.random.normal(jax.random.key(37), (8, 12, 12))
    z = block.conv(jnp.tanh(v)) + block.fno_skip(v)  # last block: no activation
    expected = block.channel_mlp(z) + block.channel_mlp_skip(v)
    np.testing.assert_allclose(eqx.filter_jit(block)(v), expected, atol=1e-12)


def test_skip_types():
    v = jax.random.normal(jax.random.key(7), (4, 6))
    model = abstract(FNO, 4, 1, 1, 4, fno_skip="identity", channel_mlp_skip="none")
    assert type(model.blocks[0].fno_skip).__name__ == "Identity"
    gating = FNO(4, 1, 1, 4, n_layers=1, key=jax.random.key(8)).blocks[0].channel_mlp_skip
    np.testing.assert_array_equal(gating(v), v)  # soft-gating starts as the identity
    none = FNO(4, 1, 1, 4, n_layers=1, channel_mlp_skip="none", key=jax.random.key(8))
    np.testing.assert_array_equal(none.blocks[0].channel_mlp_skip(v), 0 * v)


def test_linear_fno_is_exactly_resolution_invariant():
    # Without pointwise non-linearities and coordinate channels every layer maps a
    # band-limited input to a band-limited output, so a fine grid gives the same
    # function as a coarse one (the spectral conv acts on norm="forward" coefficients).
    model = FNO(
        (8, 8),
        1,
        1,
        8,
        n_layers=2,
        non_linearity=lambda x: x,
        positional_embedding=None,
        key=jax.random.key(9),
    )
    coeffs = jax.random.normal(jax.random.key(10), (3, 3))

    def field(n):
        x = jnp.arange(n) / n
        basis = jnp.stack([jnp.ones(n), jnp.cos(2 * jnp.pi * x), jnp.sin(4 * jnp.pi * x)])
        return jnp.einsum("ij,ia,jb->ab", coeffs, basis, basis)[None]

    run = eqx.filter_jit(model)
    np.testing.assert_allclose(run(field(16)), run(field(48))[:, ::3, ::3], atol=1e-12)


def test_fno_resolution_transfer_is_close(small_model):
    # With GELU and coordinate channels the outputs are close but not identical
    # (pointwise non-linearities create harmonics that alias on the coarse grid).
    def field(n):
        x = jnp.arange(n) / n
        u = jnp.sin(2 * jnp.pi * x)[:, None] * jnp.cos(2 * jnp.pi * x)[None, :]
        return jnp.stack([u, u**2])

    run = eqx.filter_jit(small_model)
    coarse, fine = run(field(32)), run(field(64))[:, ::2, ::2]
    assert float(jnp.linalg.norm(coarse - fine) / jnp.linalg.norm(fine)) < 0.05


def test_jit_vmap_and_float32(small_model):
    xs = jax.random.normal(jax.random.key(11), (3, 2, 12, 12))
    batched = eqx.filter_jit(lambda m, x: jax.vmap(m)(x))(small_model, xs)
    single = eqx.filter_jit(small_model)
    for i in range(3):
        np.testing.assert_allclose(batched[i], single(xs[i]), atol=1e-12)
    model32 = jax.tree_util.tree_map(
        lambda x: x.astype(jnp.float32) if eqx.is_array(x) else x, small_model
    )
    y32 = eqx.filter_jit(model32)(xs[0].astype(jnp.float32))
    assert y32.dtype == jnp.float32
    np.testing.assert_allclose(y32, batched[0], rtol=1e-4, atol=1e-5)


def test_domain_padding_widths_and_shape():
    assert padding_widths(0.25, (16, 10)) == (4, 2)
    assert padding_widths((0.1, 0.0), (20, 20)) == (2, 0)
    model = FNO((4, 4), 1, 2, 4, n_layers=1, domain_padding=0.25, key=jax.random.key(12))
    assert eqx.filter_jit(model)(jnp.ones((1, 8, 12))).shape == (2, 8, 12)


@pytest.mark.slow
def test_learns_the_heat_operator():
    """A 1-D FNO learns u0 -> u(T) of the periodic heat equation (a Fourier multiplier)."""
    n, modes, kappa_t = 32, 4, 0.005
    k = jnp.arange(1, modes + 1)
    x = jnp.arange(n) / n
    basis = jnp.concatenate(
        [jnp.cos(2 * jnp.pi * k[:, None] * x), jnp.sin(2 * jnp.pi * k[:, None] * x)]
    )
    decay = jnp.tile(jnp.exp(-4 * jnp.pi**2 * k**2 * kappa_t), 2)

    def data(key, count):
        c = jax.random.normal(key, (count, 2 * modes)) / jnp.tile(k, 2)
        return (c @ basis)[:, None], ((c * decay) @ basis)[:, None]

    x_train, y_train = data(jax.random.key(13), 256)
    x_test, y_test = data(jax.random.key(14), 64)
    model = FNO(8, 1, 1, 16, n_layers=2, key=jax.random.key(15))
    optimizer = optax.adam(5e-3)
    state = optimizer.init(eqx.filter(model, eqx.is_inexact_array))

    @eqx.filter_jit
    def train(model, state):
        def step(carry, index):
            model, state = carry
            xb, yb = x_train[index], y_train[index]

            def loss(m):
                return relative_lp_loss(jax.vmap(m)(xb), yb, d=1, reduction="mean")

            grads = eqx.filter_grad(loss)(model)
            updates, state = optimizer.update(grads, state)
            return (eqx.apply_updates(model, updates), state), None

        indices = jax.random.randint(jax.random.key(16), (400, 32), 0, 256)
        params, static = eqx.partition(model, eqx.is_inexact_array)

        def step_params(carry, index):
            params, state = carry
            (m, state), _ = step((eqx.combine(params, static), state), index)
            return (eqx.filter(m, eqx.is_inexact_array), state), None

        (params, state), _ = jax.lax.scan(step_params, (params, state), indices)
        return eqx.combine(params, static)

    apply = eqx.filter_jit(lambda m, x: jax.vmap(m)(x))
    before = relative_lp_loss(apply(model, x_test), y_test, d=1, reduction="mean")
    model = train(model, state)
    after = relative_lp_loss(apply(model, x_test), y_test, d=1, reduction="mean")
    assert float(before) > 0.5
    assert float(after) < 0.03, float(after)


def test_bad_arguments_raise():
    key = jax.random.key(0)
    model = abstract(FNO, (8, 8), 3, 1, 4)
    with pytest.raises(ValueError, match="in_channels=3 but the input `x` has 2"):
        eqx.filter_eval_shape(model, jnp.zeros((2, 16, 16)))
    with pytest.raises(ValueError, match=r"n_modes`\[0\]=8 is larger"):
        eqx.filter_eval_shape(model, jnp.zeros((3, 4, 16)))
    with pytest.raises(ValueError, match="joint_factorization"):
        FNO((8, 8), 1, 1, 4, joint_factorization=True, key=key)
    with pytest.raises(ValueError, match="`fno_skip` must be one of"):
        FNO((8, 8), 1, 1, 4, fno_skip="residual", key=key)
    with pytest.raises(ValueError, match="`norm` must be one of"):
        FNO((8, 8), 1, 1, 4, norm="batch", key=key)
    with pytest.raises(ValueError, match="`positional_embedding` must be one of"):
        FNO((8, 8), 1, 1, 4, positional_embedding="sinusoid", key=key)
    with pytest.raises(ValueError, match="`factorization` must be one of"):
        FNO((8, 8), 1, 1, 4, factorization="block-tt", key=key)
    with pytest.raises(ValueError, match="CP rank of 0"):
        FNO((8, 8), 1, 1, 4, factorization="cp", rank=1e-6, key=key)
    with pytest.raises(ValueError, match="`hidden_channels` must be a positive int"):
        FNO((8, 8), 1, 1, 0, key=key)
    with pytest.raises(ValueError, match="`domain_padding` needs"):
        FNO((8, 8), 1, 1, 4, domain_padding=(0.1, 0.1, 0.1), key=key)


def _channels_first_forward(model, x):
    """`model(x)` composed from its layers' channels-first calls (how `FNO`
    computed before it moved the channels last)."""
    h = model.lifting(grid_embedding(x))
    widths = padding_widths(model.domain_padding, h.shape[1:])
    h = jnp.pad(h, [(0, 0)] + [(w, w) for w in widths])
    for layer, block in enumerate(model.blocks):
        joint = model.joint_conv
        conv = None if joint is None else functools.partial(joint, layer=layer)
        h = block(h, conv=conv)
    h = h[(slice(None), *(slice(w, n - w) for w, n in zip(widths, h.shape[1:])))]
    return model.projection(h)


@pytest.mark.parametrize(
    "options",
    [
        # the model of the comparison with neuraloperator (benchmarks.operators)
        dict(factorization="tucker", rank=0.1, non_linearity=gelu_exact),
        # every other layout-dependent layer: norms, padding, joint weights, skips
        dict(
            factorization="tucker",
            joint_factorization=True,
            norm="instance",
            domain_padding=0.25,
            fno_skip="soft-gating",
            channel_mlp_skip="linear",
        ),
        dict(norm="group", preactivation=True, transform="fft", fno_skip="identity"),
    ],
)
def test_train_step_matches_the_channels_first_layers(options):
    """In float32, the loss and every gradient of a train step of `FNO` (which
    computes with the channels last) against the same model run through its
    layers' channels-first calls: measured at most 1.8e-6 relative to the
    largest entry of each gradient (float32 rounding), tolerance 2e-5; a
    transposed weight or a swapped transform axis is off by O(1)."""
    model = FNO((6, 6), 1, 1, 8, n_layers=2, dtype=jnp.float32, key=jax.random.key(40), **options)
    x = jax.random.normal(jax.random.key(41), (3, 1, 16, 12), jnp.float32)
    y = jnp.roll(x, 2, axis=-1)

    def loss(model, forward):
        prediction = jax.vmap(lambda v: forward(model, v))(x)
        return relative_lp_loss(prediction, y, d=2, reduction="mean")

    step = eqx.filter_jit(lambda m, f: eqx.filter_value_and_grad(loss)(m, f))
    (value, grads) = step(model, type(model).__call__)
    (ref_value, ref_grads) = step(model, _channels_first_forward)
    np.testing.assert_allclose(value, ref_value, rtol=2e-6)
    leaves = list(zip(jax.tree.leaves(grads), jax.tree.leaves(ref_grads)))
    largest = max(float(jnp.max(jnp.abs(expected))) for _, expected in leaves)
    for got, expected in leaves:
        # a gradient that is zero in exact arithmetic (a bias before an instance
        # norm) is rounding on both sides (2e-8 here): compared at a tenth of
        # the largest entry, tolerance 4e-7
        scale = max(float(jnp.max(jnp.abs(expected))), 0.1 * largest)
        np.testing.assert_allclose(got, expected, atol=2e-5 * scale)
