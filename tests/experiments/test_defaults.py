"""The config blocks of `sciml.experiment.defaults` are built from the
training's settings classes: a key a config leaves out has the library's own
default, so a config and a direct call build the same optimiser and loop."""

import importlib

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from sciml.experiment import defaults, train_settings
from sciml.training import TrainSettings, make_optimizer, make_schedule


def _trajectory(optimizer, grads):
    """The parameters after each update of `optimizer` fed `grads` in turn."""
    params = jnp.zeros(grads.shape[1])
    state = optimizer.init(params)
    out = []
    for grad in grads:
        updates, state = optimizer.update(grad, state, params)
        params = optax.apply_updates(params, updates)
        out.append(params)
    return np.stack(out)


def test_a_config_with_only_a_learning_rate_builds_plain_adam():
    config = defaults.base_config("plain", "task", steps=50, batch_size=4, learning_rate=3e-3)
    # gradients of norm ~10: a clip at 1.0 or a warm-up would change every step
    grads = 10.0 * jax.random.normal(jax.random.key(0), (4, 3))
    reference = _trajectory(optax.adam(3e-3), grads)  # Adam at a constant rate, by optax
    from_config = _trajectory(make_optimizer(config.optimizer), grads)
    direct = _trajectory(make_optimizer({"learning_rate": 3e-3}), grads)
    # measured: identical (difference 0.0). The config block with the old
    # defaults (cosine after 100 warm-up steps, clip 1.0) is off by up to 5.8e-3,
    # a clip of 1.0 as the class default by 3.4e-3 (steps of 3e-3 each)
    np.testing.assert_allclose(from_config, reference, rtol=1e-6, atol=1e-9)
    np.testing.assert_allclose(direct, reference, rtol=1e-6, atol=1e-9)


def test_the_documented_defaults_of_every_optimizer_and_schedule():
    """An empty config is the documented optimiser: Adam at 1e-3 with b1 0.9,
    b2 0.999, eps 1e-8 (written out here, to optax); SGD's momentum 0.9, not
    Nesterov; the step schedule's factor 0.1; the cosine's 1,000 steps to 0."""
    tiny = 1e-7 * np.random.default_rng(0).standard_normal((3, 4))  # eps-sized gradients
    adam = optax.adam(1e-3, b1=0.9, b2=0.999, eps=1e-8)
    # measured identical; eps 1e-6 shortens the steps: 1.9e-3 apart after 3 (of 2.1e-3)
    np.testing.assert_allclose(
        _trajectory(make_optimizer({}), tiny), _trajectory(adam, tiny), rtol=1e-6
    )
    unit = np.random.default_rng(1).standard_normal((3, 4))
    sgd = optax.sgd(1e-3, momentum=0.9, nesterov=False)
    # measured identical; momentum 0 or Nesterov: 1.4e-3 and 1.2e-3 apart after 3 steps
    np.testing.assert_allclose(
        _trajectory(make_optimizer({"name": "sgd"}), unit), _trajectory(sgd, unit), rtol=1e-6
    )
    step = make_schedule({"schedule": "step", "boundaries": (2,)})
    np.testing.assert_allclose([step(s) for s in (0, 1, 2, 3)], [1e-3, 1e-3, 1e-4, 1e-4], rtol=1e-6)
    cosine = make_schedule({"schedule": "cosine"})
    np.testing.assert_allclose([cosine(s) for s in (0, 500, 1000)], [1e-3, 5e-4, 0.0], atol=1e-9)


def test_a_train_block_without_settings_holds_the_train_settings_defaults():
    config = defaults.base_config("plain", "task", steps=7, batch_size=4, learning_rate=1e-3)
    assert train_settings(config) == TrainSettings(steps=7)


@pytest.mark.parametrize(
    "name", ["insr_advection1d", "insr_elasticity", "insr_stretch", "insr_taylor_green"]
)
def test_insr_configs_carry_no_optimizer_or_batch(name):
    config = importlib.import_module(f"experiments.configs.{name}").get_config()
    assert "optimizer" not in config and "batch_size" not in config.train
    assert int(config.train.keep_checkpoints) == 2  # the chunking a long run uses
