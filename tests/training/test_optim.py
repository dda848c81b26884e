import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from sciml.training import make_optimizer, make_schedule


def test_constant_schedule_with_warmup():
    schedule = make_schedule({"learning_rate": 0.1, "warmup_steps": 10})
    np.testing.assert_allclose([schedule(s) for s in (0, 5, 10, 500)], [0.0, 0.05, 0.1, 0.1])


def test_cosine_schedule_matches_formula():
    lr, warmup, decay, end = 0.3, 5, 20, 0.1
    schedule = make_schedule(
        {
            "learning_rate": lr,
            "schedule": "cosine",
            "warmup_steps": warmup,
            "decay_steps": decay,
            "end_factor": end,
        }
    )
    for step in range(warmup, warmup + decay + 5):
        t = min(step - warmup, decay) / decay
        expected = lr * ((1 - end) * 0.5 * (1 + np.cos(np.pi * t)) + end)
        np.testing.assert_allclose(schedule(step), expected, rtol=1e-6)


def test_step_schedule():
    schedule = make_schedule(
        {"learning_rate": 1.0, "schedule": "step", "boundaries": (10, 20), "decay_factor": 0.5}
    )
    np.testing.assert_allclose(
        [schedule(s) for s in (0, 9, 10, 19, 20, 99)], [1, 1, 0.5, 0.5, 0.25, 0.25]
    )


def _sgd_update(config, params, grads, label_fn=None):
    tx = make_optimizer(config, label_fn)
    updates, _ = tx.update(grads, tx.init(params), params)
    return updates


def test_parameter_groups_get_their_own_learning_rate_and_decay():
    params = {"ssm": jnp.array([1.0, 2.0]), "mlp": jnp.array([3.0])}
    grads = {"ssm": jnp.array([0.5, -1.0]), "mlp": jnp.array([2.0])}
    config = {
        "name": "sgd",
        "momentum": 0.0,
        "learning_rate": 0.1,
        "weight_decay": 0.01,
        "groups": {"slow": {"learning_rate": 0.001, "weight_decay": 0.0}},
    }

    def label_fn(tree):
        return {"ssm": "slow", "mlp": "other"}

    updates = _sgd_update(config, params, grads, label_fn)
    # SGD with coupled decay: update = -lr (g + wd p).
    np.testing.assert_allclose(updates["ssm"], -0.001 * grads["ssm"])
    np.testing.assert_allclose(updates["mlp"], -0.1 * (grads["mlp"] + 0.01 * params["mlp"]))


def test_adamw_matches_optax_and_clipping_applies():
    params = {"w": jnp.arange(3.0)}
    grads = {"w": jnp.array([30.0, -40.0, 0.0])}
    config = {"name": "adamw", "learning_rate": 0.01, "weight_decay": 0.1, "clip_norm": 5.0}
    ours = _sgd_update(config, params, grads)
    ref_tx = optax.adamw(0.01, weight_decay=0.1)
    clipped = {"w": grads["w"] * 5.0 / 50.0}
    ref, _ = ref_tx.update(clipped, ref_tx.init(params), params)
    np.testing.assert_allclose(ours["w"], ref["w"], rtol=1e-6)


def test_works_on_equinox_models(getkey):
    model = eqx.nn.Linear(3, 2, key=getkey())
    params = eqx.filter(model, eqx.is_inexact_array)
    tx = make_optimizer({"name": "sgd", "momentum": 0.0, "learning_rate": 0.5})
    grads = jax.tree_util.tree_map(jnp.ones_like, params)
    updates, _ = tx.update(grads, tx.init(params), params)
    np.testing.assert_allclose(updates.weight, -0.5 * np.ones((2, 3)))


@pytest.mark.parametrize(
    "config, match",
    [
        ({"name": "rmsprop"}, "optimizer.name"),
        ({"schedule": "linear"}, "optimizer.schedule"),
        ({"learning_rate": 0.0}, "learning_rate"),
        ({"lr": 0.1}, "Unknown optimizer keys"),
        ({"name": "adam", "weight_decay": 0.1}, "adamw"),
        ({"groups": {"a": {"learning_rate": 0.1}}}, "label_fn"),
        ({"schedule": "step", "boundaries": (5, 2)}, "boundaries"),
        ({"clip_norm": -1.0}, "clip_norm"),
    ],
)
def test_bad_config_is_named(config, match):
    with pytest.raises(ValueError, match=match):
        make_optimizer(config)
