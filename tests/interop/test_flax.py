import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
from flax import nnx

from sciml.interop.flax import EquinoxBuffer, from_nnx, to_nnx


class WithBuffer(eqx.Module):
    """A module with a trainable weight, an integer buffer and a static field."""

    linear: eqx.nn.Linear
    counts: jax.Array
    scale: float = eqx.field(static=True)

    def __call__(self, x):
        return self.scale * jnp.tanh(self.linear(x)) + self.counts.sum()

    def double(self, x):
        return 2 * self(x)


@pytest.fixture
def module(getkey):
    return WithBuffer(eqx.nn.Linear(4, 3, key=getkey()), jnp.arange(3), 0.5)


def test_outputs_and_gradients_match_equinox(module, getkey):
    wrapped = to_nnx(module)
    x = jax.random.normal(getkey(), (4,))
    np.testing.assert_array_equal(wrapped(x), module(x))
    np.testing.assert_array_equal(wrapped.double(x), module.double(x))

    def loss(m):
        return jnp.sum(m(x) ** 2)

    eqx_grads = eqx.filter_grad(loss)(module)
    nnx_grads = nnx.grad(loss)(wrapped)
    np.testing.assert_array_equal(
        nnx_grads["variables"]["linear.weight"][...], eqx_grads.linear.weight
    )
    np.testing.assert_array_equal(nnx_grads["variables"]["linear.bias"][...], eqx_grads.linear.bias)


def test_only_floating_arrays_are_params(module):
    wrapped = to_nnx(module)
    params = nnx.state(wrapped, nnx.Param)
    buffers = nnx.state(wrapped, EquinoxBuffer)
    assert sorted(params["variables"].keys()) == ["linear.bias", "linear.weight"]
    assert list(buffers["variables"].keys()) == ["counts"]


def test_nnx_optimizer_step_equals_optax_step(module, getkey):
    x = jax.random.normal(getkey(), (4,))
    tx = optax.adam(0.1)

    def loss(m):
        return jnp.sum(m(x) ** 2)

    # Reference: one optax step on the Equinox module.
    params = eqx.filter(module, eqx.is_inexact_array)
    grads = eqx.filter_grad(loss)(module)
    updates, _ = tx.update(grads, tx.init(params), params)
    expected = eqx.apply_updates(module, updates)

    wrapped = to_nnx(module)
    optimizer = nnx.Optimizer(wrapped, tx, wrt=nnx.Param)

    @nnx.jit
    def train_step(model, optimizer):
        optimizer.update(model, nnx.grad(loss)(model))

    train_step(wrapped, optimizer)
    back = from_nnx(wrapped)
    np.testing.assert_allclose(back.linear.weight, expected.linear.weight, rtol=1e-6)
    assert not np.allclose(back.linear.weight, module.linear.weight)
    np.testing.assert_array_equal(back.counts, module.counts)
    assert back.scale == module.scale


def test_split_merge_roundtrip(module, getkey):
    wrapped = to_nnx(module)
    graphdef, state = nnx.split(wrapped)
    merged = nnx.merge(graphdef, state)
    x = jax.random.normal(getkey(), (4,))
    np.testing.assert_array_equal(merged(x), module(x))


def test_inside_a_flax_model(module, getkey):
    class Model(nnx.Module):
        def __init__(self, inner, rngs):
            self.inner = to_nnx(inner)
            self.head = nnx.Linear(3, 1, rngs=rngs)

        def __call__(self, x):
            return self.head(self.inner(x))

    model = Model(module, nnx.Rngs(0))
    x = jax.random.normal(getkey(), (4,))
    np.testing.assert_allclose(model(x), model.head(module(x)))
    grads = nnx.grad(lambda m: jnp.sum(m(x)))(model)
    assert np.any(grads["inner"]["variables"]["linear.weight"][...] != 0)


def test_bad_input():
    with pytest.raises(TypeError, match="equinox.Module"):
        to_nnx(lambda x: x)
    with pytest.raises(TypeError, match="to_nnx"):
        from_nnx(nnx.Linear(2, 2, rngs=nnx.Rngs(0)))
