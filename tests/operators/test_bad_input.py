"""Hostile and mistaken input to `sciml.operators`: each case raises a clear
error naming the argument. The silent cases (a channel-last or unbatched loss
input, `rank=1.5`, `domain_padding=3.0`, a NaN reaching an FNO) returned a
value before these checks existed."""

import re

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from sciml.operators import (
    FNO,
    MGTFNO,
    TFNO,
    ChannelMLP,
    JointSpectralConv,
    SpectralConv,
    cp_rank,
    factorized_size,
    h1_loss,
    relative_lp_loss,
    tt_rank,
    tucker_rank,
)


# --- losses: the layout contract ---------------------------------------------


@pytest.fixture(scope="module")
def fields():
    """A channel-first batch `(batch=4, channels=2, 16, 16)` and a prediction."""
    true = jax.random.normal(jax.random.key(0), (4, 2, 16, 16))
    pred = true + 0.3 * jax.random.normal(jax.random.key(1), true.shape)
    return pred, true


def _lp_reference(pred, true):
    """Relative L2 per (sample, channel) by loops, then summed."""
    p, t = np.asarray(pred), np.asarray(true)
    return sum(
        np.sqrt(((p[b, c] - t[b, c]) ** 2).sum()) / np.sqrt((t[b, c] ** 2).sum())
        for b in range(p.shape[0])
        for c in range(p.shape[1])
    )


@pytest.mark.parametrize("loss", [relative_lp_loss, h1_loss])
def test_channel_last_batch_is_refused(fields, loss):
    # Before: the channel-last batch (4, 16, 16, 2) was read as 16 channels on a
    # (16, 2) grid and gave a different number with no error.
    pred, true = fields
    np.testing.assert_allclose(
        relative_lp_loss(pred, true, d=2, channels=2, eps=0.0),
        _lp_reference(pred, true),
        rtol=1e-12,
    )
    last = (jnp.moveaxis(pred, 1, -1), jnp.moveaxis(true, 1, -1))
    with pytest.raises(ValueError, match=r"channel axis looks last: move it with `jnp.moveaxis"):
        loss(*last, d=2, channels=2)


def _h1_reference(pred, true, h):
    """Periodic relative H1 per (sample, channel) by loops over the grid points."""
    p, t = np.asarray(pred, float), np.asarray(true, float)

    def sq(f):  # one 2-D field: values and central differences, point by point
        n0, n1 = f.shape
        total = 0.0
        for i in range(n0):
            for j in range(n1):
                d0 = (f[(i + 1) % n0, j] - f[i - 1, j]) / (2 * h)
                d1 = (f[i, (j + 1) % n1] - f[i, j - 1]) / (2 * h)
                total += f[i, j] ** 2 + d0**2 + d1**2
        return total

    return sum(
        np.sqrt(sq(p[b, c] - t[b, c])) / np.sqrt(sq(t[b, c]))
        for b in range(p.shape[0])
        for c in range(p.shape[1])
    )


@pytest.mark.parametrize("channels", [1, 2])
def test_h1_refuses_a_channel_last_batch_without_channels(fields, channels):
    # Before: h1_loss on the channel-last batch (4, 16, 16, 2) without `channels=`
    # read a (16, 2) grid, on whose 2-point axis the periodic difference is 0, and
    # returned 0.2998 (mean) for the channel-first 0.2979: a plausible wrong number.
    pred, true = (f[:, :channels] for f in fields)
    np.testing.assert_allclose(
        h1_loss(pred, true, d=2, eps=0.0), _h1_reference(pred, true, 1 / 16), rtol=1e-10
    )  # agrees exactly in float64 (difference 0.0 measured)
    last = (jnp.moveaxis(pred, 1, -1), jnp.moveaxis(true, 1, -1))
    with pytest.raises(ValueError, match=r">= 3 points per grid axis.*looks last: move it"):
        h1_loss(*last, d=2)
    # the smallest periodic grid with a non-zero difference still passes
    h1_loss(pred[..., :3], true[..., :3], d=2)


@pytest.mark.parametrize("loss", [relative_lp_loss, h1_loss])
def test_unbatched_sample_is_refused(fields, loss):
    # Before: one sample (2, 16, 16) was read as a batch of 2 with 16 channels.
    pred, true = fields
    with pytest.raises(ValueError, match=r"looks like one sample .*`x\[None\]`"):
        loss(pred[0], true[0], d=2)
    # with the batch axis added it is the sample's own error
    np.testing.assert_allclose(
        relative_lp_loss(pred[:1], true[:1], d=2, eps=0.0), _lp_reference(pred[:1], true[:1])
    )


@pytest.mark.parametrize("loss", [relative_lp_loss, h1_loss])
def test_d_is_required_and_checked(fields, loss, untyped):
    pred, true = fields
    with pytest.raises(TypeError, match="'d'"):
        loss(pred, true)
    with pytest.raises(ValueError, match="d=3 grid axes, i.e. 5 axes"):
        loss(pred, true, d=3)
    with pytest.raises(ValueError, match="`d` must be an int >= 1"):
        loss(pred, true, d=2.0)


def test_h1_edge_order_is_checked(fields):
    pred, true = fields
    with pytest.raises(ValueError, match="`edge_order` must be one of"):
        h1_loss(pred, true, d=2, periodic=False, edge_order=2)
    with pytest.raises(ValueError, match="need >= 4 points per axis"):
        h1_loss(pred[..., :3], true[..., :3], d=2, periodic=False, edge_order=3)


# --- ranks: one contract ------------------------------------------------------


@pytest.mark.parametrize("rank_fn", [cp_rank, tucker_rank, tt_rank])
@pytest.mark.parametrize("rank", [1.5, 2.0, 0.0, -0.1, float("nan")])
def test_float_rank_outside_unit_interval_is_refused(rank_fn, rank):
    # Before: rank=1.5 built an over-complete weight (more parameters than dense).
    with pytest.raises(ValueError, match=r"`rank` as a float .* in \(0, 1\]"):
        rank_fn((8, 8, 5), rank)


@pytest.mark.parametrize(
    "rank_fn, rank_one, ranks_one, ranks_two",
    [
        (cp_rank, "(1,)", 1, 2),
        (tucker_rank, "(1, 1, 1)", (1, 1, 1), (2, 2, 2)),
        (tt_rank, "(1, 1)", (1, 1, 1, 1), (1, 2, 2, 1)),
    ],
)
def test_bare_int_one_is_refused_as_ambiguous(rank_fn, rank_one, ranks_one, ranks_two):
    # Before: rank=1 (int) built a rank-one weight and rank=1.0 (float) a full-size
    # one; a slip between the two gave a working model of the wrong size. The bare
    # int 1 is refused; both meanings stay available, spelled unambiguously.
    shape = (8, 8, 5)
    match = rf"`rank=1` \(an int\) is ambiguous.*`rank={re.escape(rank_one)}` for rank one"
    with pytest.raises(ValueError, match=match):
        rank_fn(shape, 1)
    assert rank_fn(shape, eval(rank_one)) == ranks_one  # rank one, spelled explicitly
    assert rank_fn(shape, 2) == ranks_two  # other ints are the rank, as before


def test_float_one_is_the_full_parameter_count():
    # rank=1.0 is 100%: the Tucker weight's parameters (core + factors, counted
    # here by hand) within the rounding of the ranks of the dense 8*8*5 = 320
    ranks = tucker_rank((8, 8, 5), 1.0)
    count = np.prod(ranks) + sum(n * r for n, r in zip((8, 8, 5), ranks))
    assert abs(count / 320 - 1) < 0.05  # (7, 7, 4): 328, 2.5 %; rank one would be 22
    assert factorized_size("tucker", (8, 8, 5), 1.0) == count


def test_bare_int_one_in_a_model_is_refused_and_per_mode_rank_one_builds():
    with pytest.raises(ValueError, match=r"Tucker `rank=1` \(an int\) is ambiguous"):
        TFNO((4, 4), 1, 1, 4, n_layers=1, rank=1, key=jax.random.key(0))
    model = TFNO((4, 4), 1, 1, 4, n_layers=1, rank=(1, 1, 1, 1), key=jax.random.key(0))
    assert model.blocks[0].conv.weight.rank == (1, 1, 1, 1)


@pytest.mark.parametrize("rank_fn", [cp_rank, tucker_rank, tt_rank])
@pytest.mark.parametrize("rank", ["123", "2", b"12", True, [1.0, 2, 3], (2, 2.5, 1)])
def test_rank_of_an_undefined_type_is_refused(rank_fn, rank, untyped):
    # Before: tucker_rank(shape, "123") parsed the string as the ranks (1, 2, 3).
    with pytest.raises(ValueError, match="`rank` must be"):
        rank_fn((8, 8, 5), rank)


def test_string_rank_in_a_model_is_refused(untyped):
    with pytest.raises(ValueError, match="Tucker `rank` must be"):
        TFNO((4, 4), 1, 1, 4, n_layers=1, rank="1111", key=jax.random.key(0))


def test_float_rank_above_one_in_a_model_is_refused():
    with pytest.raises(ValueError, match=r"i.e. in \(0, 1\]"):
        TFNO((4, 4), 1, 1, 4, n_layers=1, rank=1.5, key=jax.random.key(0))


# --- domain padding -------------------------------------------------------------


@pytest.mark.parametrize("padding", [3.0, -0.1, (0.1, 2.0), float("nan")])
def test_domain_padding_outside_unit_interval_is_refused(padding):
    # Before: domain_padding=3.0 padded each side with three grid lengths of zeros.
    with pytest.raises(ValueError, match=r"`domain_padding` must be a fraction in \[0, 1\]"):
        FNO((4, 4), 1, 1, 4, n_layers=1, domain_padding=padding, key=jax.random.key(0))


# --- non-finite input (the package's policy) ------------------------------------


@pytest.fixture(scope="module")
def bad_field():
    x = np.ones((1, 16, 16))
    x[0, 3, 5] = np.nan
    return jnp.asarray(x)


@pytest.mark.parametrize("cls", [FNO, TFNO])
def test_fno_refuses_a_nan_when_called_eagerly(cls, bad_field):
    # Before: one NaN turned the whole output field into NaN, silently.
    model = cls((4, 4), 1, 1, 4, n_layers=1, key=jax.random.key(0))
    with pytest.raises(ValueError, match=r"`x` must be finite, got 1 NaN and 0 infinite"):
        model(bad_field)
    inf_field = bad_field.at[0, 3, 5].set(jnp.inf)
    with pytest.raises(ValueError, match="0 NaN and 1 infinite"):
        model(inf_field)
    # Under jit nothing is checked (no host callback in compiled code): all NaN.
    assert bool(jnp.isnan(eqx.filter_jit(model)(bad_field)).all())


def test_mgtfno_refuses_a_model_it_cannot_wrap(untyped):
    # MGTFNO wraps a built FNO: one that embeds tile-local coordinates, or whose
    # input channels are not (field + coordinates) x (levels + 1), is refused.
    def tfno(in_channels, **kwargs):
        return eqx.filter_eval_shape(
            TFNO, (4, 4), in_channels, 1, 4, n_layers=1, key=jax.random.key(0), **kwargs
        )

    with pytest.raises(TypeError, match="`model` must be an FNO"):
        MGTFNO(eqx.filter_eval_shape(SpectralConv, 6, 6, (4, 4), key=jax.random.key(0)))
    with pytest.raises(ValueError, match="built with positional_embedding=None"):
        MGTFNO(tfno(6))
    with pytest.raises(ValueError, match=r"in_channels=5, which is not \(C \+ 2\) \* 2"):
        MGTFNO(tfno(5, positional_embedding=None))
    with pytest.raises(ValueError, match=r"in_channels=4, which is not \(C \+ 2\) \* 2"):
        MGTFNO(tfno(4, positional_embedding=None))  # C = 0: no field channel left
    assert MGTFNO(tfno(6, positional_embedding=None)).in_channels == 1
    assert MGTFNO(tfno(4, positional_embedding=None), positional_embedding=None).in_channels == 2


@pytest.mark.parametrize(
    "option,match",
    [
        (dict(implementation="dense"), "`implementation` must be one of"),
        (dict(transform="matmul"), "`transform` must be one of"),
        (dict(separable=True), "`separable=True` needs in_channels == out_channels"),
    ],
)
def test_joint_and_plain_spectral_conv_refuse_the_same_options(option, match):
    # both read their options through one `conv_options`
    key = jax.random.key(0)
    with pytest.raises(ValueError, match=match):
        SpectralConv(2, 3, (4, 4), key=key, **option)
    with pytest.raises(ValueError, match=match):
        JointSpectralConv(2, 2, 3, (4, 4), key=key, **option)
    with pytest.raises(TypeError, match="unexpected keyword argument 'implementaton'"):
        JointSpectralConv(2, 2, 2, (4, 4), key=key, implementaton="reconstructed")


def test_mgtfno_refuses_a_nan_when_called_eagerly(bad_field):
    tile_in = MGTFNO.tile_channels(1, 2, 1, "grid")
    tfno = TFNO((4, 4), tile_in, 1, 4, n_layers=1, positional_embedding=None, key=jax.random.key(0))
    model = MGTFNO(tfno, levels=1)
    with pytest.raises(ValueError, match="`x` must be finite"):
        model(bad_field)
    with pytest.raises(ValueError, match="`y` must be finite"):
        model.training_pair(jnp.ones((1, 16, 16)), bad_field)


def test_spectral_conv_bad_channel_count():
    conv = SpectralConv(2, 3, (4, 4), key=jax.random.key(0))
    with pytest.raises(ValueError, match="in_channels=2 but the input `x` has 1"):
        conv(jnp.ones((1, 8, 8)))


# --- input dtype, activation, parameter dtype -----------------------------------


@pytest.mark.parametrize("dtype", [jnp.int32, jnp.bool_, jnp.complex64])
def test_fno_refuses_a_non_real_floating_input(dtype, untyped):
    # Before: complex input failed inside jnp with JAX's dtype message; int input
    # ran on (cast by the first layer).
    model = FNO((4, 4), 1, 1, 4, n_layers=1, key=jax.random.key(0))
    x = jnp.ones((1, 16, 16), dtype)
    match = r"FNO: `x` must be a real floating array \(float16, bfloat16, float32 or float64\)"
    with pytest.raises(TypeError, match=match):
        model(x)
    with pytest.raises(TypeError, match=match):  # a trace-time check
        eqx.filter_jit(model)(x)
    with pytest.raises(TypeError, match="`x` must be a real floating array"):
        SpectralConv(1, 1, (4, 4), key=jax.random.key(0))(x)


def test_string_activation_is_refused_at_construction(untyped):
    # Before: FNO(non_linearity="gelu") built, then failed at the first call with
    # "'str' object is not callable".
    with pytest.raises(
        TypeError, match=r"`non_linearity` must be a callable such as `jax.nn.gelu`"
    ):
        FNO((4, 4), 1, 1, 4, n_layers=1, non_linearity="gelu", key=jax.random.key(0))
    with pytest.raises(TypeError, match=r"`activation` must be a callable such as `jax.nn.gelu`"):
        ChannelMLP(2, 2, 4, activation="relu", key=jax.random.key(0))
    model = FNO((4, 4), 1, 1, 4, n_layers=1, non_linearity=jax.nn.relu, key=jax.random.key(0))
    assert model.blocks[0].activation is jax.nn.relu


@pytest.mark.parametrize("dtype", [jnp.int32, jnp.complex64])
def test_fno_refuses_a_non_floating_parameter_dtype(dtype):
    with pytest.raises(TypeError, match="`dtype` must be a real floating dtype such as"):
        FNO((4, 4), 1, 1, 4, n_layers=1, dtype=dtype, key=jax.random.key(0))


def test_float64_without_x64_warns_in_our_words():
    # Before: JAX's own warning, once per parameter array, not saying how to fix it.
    jax.config.update("jax_enable_x64", False)
    try:
        with pytest.warns(UserWarning, match=r"`dtype=float64` needs 64-bit JAX.*jax_enable_x64"):
            model = FNO((4, 4), 1, 1, 4, n_layers=1, dtype=jnp.float64, key=jax.random.key(0))
    finally:
        jax.config.update("jax_enable_x64", True)
    assert model.lifting.layers[0].weight.dtype == jnp.float32
