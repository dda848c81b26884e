"""Sequence blocks and models: step mode, dropout, optimiser groups, bad input."""

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from sciml.ssm import S4D, S5, SequenceBlock, SequenceModel, ssm_labels
from sciml.training import make_optimizer


@pytest.mark.parametrize("layer", ["s4d", "s5"])
@pytest.mark.parametrize("prenorm", [True, False])
def test_step_mode_reproduces_the_sequence_output(layer, prenorm, getkey):
    def small(pooling, key):
        return SequenceModel(
            3, 5, layer=layer, d_model=8, n_layers=2, state_size=8, pooling=pooling,
            prenorm=prenorm, key=key,
        )  # fmt: skip

    model = small("none", getkey())
    x = jax.random.normal(getkey(), (60, 3))
    y = model(x)
    step = eqx.filter_jit(model.step)
    state, outputs = model.init_state(), []
    for t in range(60):
        state, out = step(state, x[t])
        outputs.append(out)
    np.testing.assert_allclose(jnp.stack(outputs), y, atol=1e-12)
    # discretised once: the same steps, and the sequential call
    recurrent = model.recurrent()
    state, out = eqx.filter_jit(recurrent.step)(recurrent.init_state(), x[0])
    np.testing.assert_allclose(out, y[0], atol=1e-12)
    np.testing.assert_allclose(recurrent(x), y, atol=1e-12)
    key = getkey()
    last, mean, per_step = (small(pooling, key) for pooling in ("last", "mean", "none"))
    per_step = per_step(x)
    np.testing.assert_allclose(last(x), per_step[-1], atol=1e-12)
    np.testing.assert_allclose(mean(x), per_step.mean(0), atol=1e-12)


@pytest.mark.parametrize("activation", ["gelu", "glu", "full_glu", "half_glu1", "half_glu2"])
def test_block_activations(activation, getkey):
    ssm = S5(4, 8, key=getkey())
    block = SequenceBlock(ssm, activation=activation, prenorm=False, norm="none", key=getkey())
    x = jax.random.normal(getkey(), (20, 4))
    y = ssm(x)
    h = jax.nn.gelu(y)

    def linear(layer, v):
        return v @ layer.weight.T + layer.bias

    expected = {
        "gelu": lambda: linear(block.out1, h),
        "glu": lambda: (lambda z: z[:, :4] * jax.nn.sigmoid(z[:, 4:]))(linear(block.out1, h)),
        "full_glu": lambda: linear(block.out1, h) * jax.nn.sigmoid(linear(block.out2, h)),
        "half_glu1": lambda: h * jax.nn.sigmoid(linear(block.out2, h)),
        "half_glu2": lambda: y * jax.nn.sigmoid(linear(block.out2, h)),
    }[activation]()
    np.testing.assert_allclose(block(x), x + expected, atol=1e-12)


def test_dropout_is_tied_along_the_sequence_and_off_without_key(getkey):
    block = SequenceBlock(S4D(64, 8, key=getkey()), activation="gelu", dropout=0.5, key=getkey())
    # with out1 the identity, the dropped features are exactly zero at every step
    block = eqx.tree_at(lambda b: (b.out1.weight, b.out1.bias), block, (jnp.eye(64), jnp.zeros(64)))
    x = jax.random.normal(getkey(), (30, 64))
    no_drop = block(x)
    dropped = block(x, key=getkey()) - x
    zero_columns = np.all(np.asarray(dropped) == 0, axis=0)
    assert 10 < zero_columns.sum() < 54
    np.testing.assert_allclose(
        dropped[:, ~zero_columns], 2 * (no_drop - x)[:, ~zero_columns], atol=1e-12
    )


def test_labels_and_optimizer_groups(getkey):
    model = SequenceModel(3, 2, layer="s4d", d_model=8, n_layers=2, state_size=8, key=getkey())
    params = eqx.filter(model, eqx.is_inexact_array)
    labels = ssm_labels(params)
    ssm = labels.blocks[0].ssm
    assert (ssm.Lambda_re, ssm.Lambda_im, ssm.B_re, ssm.B_im, ssm.log_dt) == ("ssm",) * 5
    assert (ssm.C_re, ssm.C_im, ssm.D) == ("default",) * 3
    assert labels.encoder.weight == "default"
    assert jax.tree_util.tree_structure(labels) == jax.tree_util.tree_structure(params)

    # the recipe of `ssm_labels`'s docstring: the group's own rate, no weight decay
    group = {"ssm": {"learning_rate": 1e-3, "weight_decay": 0.0}}
    optimizer = make_optimizer(
        {"name": "adamw", "learning_rate": 1e-2, "weight_decay": 0.5, "groups": group}, ssm_labels
    )
    state = optimizer.init(params)
    zero = jax.tree_util.tree_map(jnp.zeros_like, params)
    updates, _ = optimizer.update(zero, state, params)
    # zero gradient: the update is the decoupled weight decay only, -lr * wd * p
    block = updates.blocks[0]
    np.testing.assert_allclose(block.ssm.C_re, -1e-2 * 0.5 * params.blocks[0].ssm.C_re, rtol=1e-12)
    np.testing.assert_array_equal(block.ssm.log_dt, 0.0)
    np.testing.assert_array_equal(block.ssm.Lambda_re, 0.0)
    ones = jax.tree_util.tree_map(jnp.ones_like, params)
    adam = make_optimizer({"name": "adam", "learning_rate": 1e-2, "groups": group}, ssm_labels)
    updates, _ = adam.update(ones, adam.init(params), params)
    np.testing.assert_allclose(updates.blocks[1].ssm.B_im, -1e-3, rtol=1e-6)
    np.testing.assert_allclose(updates.blocks[1].ssm.C_im, -1e-2, rtol=1e-6)


def test_bad_model_arguments(getkey):
    key = getkey()
    with pytest.raises(ValueError, match=r"layer must be one of \('s4d', 's5'\)"):
        SequenceModel(3, 2, layer="s4", key=key)
    with pytest.raises(ValueError, match="`pooling` must be one of"):
        SequenceModel(3, 2, pooling="max", key=key)
    with pytest.raises(ValueError, match="`activation` must be one of"):
        SequenceBlock(S4D(4, 8, key=key), activation="relu", key=key)
    with pytest.raises(ValueError, match="dropout must be in"):
        SequenceBlock(S4D(4, 8, key=key), dropout=1.0, key=key)
    model = SequenceModel(3, 2, d_model=8, n_layers=1, state_size=8, key=key)
    with pytest.raises(
        ValueError, match=r"input must have shape \(length, d_input\) with d_input=3"
    ):
        model(jnp.zeros((10, 4)))
    with pytest.raises(ValueError, match="bidirectional layer"):
        SequenceModel(3, 2, n_layers=1, ssm_kwargs={"bidirectional": True}, key=key).step(
            model.init_state(), jnp.zeros(3)
        )
