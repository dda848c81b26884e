"""Hostile and mistaken input to `sciml.training`: each case raises a one-line
error naming the argument. The silent cases (negative learning rates from
`end_factor`, `b1 >= 1`, `steps=2.5` running 3 steps, a NaN batch) returned
values or trained on before these checks existed."""

import dataclasses
import functools
import re

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from sciml.training import (
    NonFiniteBatchError,
    NonFiniteLossError,
    ProcessGroup,
    ResumePastEndError,
    TrainSettings,
    fit,
    make_optimizer,
    make_schedule,
)


def _toy():
    model = eqx.nn.Linear(2, 1, key=jax.random.key(0))

    def loss_fn(model, batch, key):
        x, y = batch
        return jnp.mean((jax.vmap(model)(x)[:, 0] - y) ** 2), {}

    def batch_fn(step, key):
        x = jax.random.normal(key, (4, 2))
        return x, x @ jnp.array([1.0, -2.0])

    return model, loss_fn, batch_fn


_SETTINGS = {field.name for field in dataclasses.fields(TrainSettings)}


def _fit(**overrides):
    """`fit` on the toy problem; `overrides` that name settings go into `TrainSettings`."""
    model, loss_fn, batch_fn = _toy()
    kwargs = dict(optimizer=make_optimizer({}), key=jax.random.key(1))
    settings = dict(steps=2, progress=False)
    for name, value in overrides.items():
        (settings if name in _SETTINGS else kwargs)[name] = value
    return fit(
        kwargs.pop("model", model),
        kwargs.pop("loss_fn", loss_fn),
        kwargs.pop("batch_fn", batch_fn),
        settings=TrainSettings(**settings),
        **kwargs,
    )


# --- silent before: wrong values or the wrong number of steps -----------------


def test_negative_end_factor_is_refused():
    # Before: the cosine schedule decayed to -2·lr, i.e. gradient ascent.
    with pytest.raises(ValueError, match=r"`optimizer.end_factor` must be a number in \[0, 1\]"):
        make_schedule({"schedule": "cosine", "end_factor": -2.0})


@pytest.mark.parametrize("factor", [-0.5, 0.0])
def test_non_positive_decay_factor_is_refused(factor):
    with pytest.raises(ValueError, match="`optimizer.decay_factor`"):
        make_schedule({"schedule": "step", "boundaries": (5,), "decay_factor": factor})


@pytest.mark.parametrize("key,value", [("b1", 1.5), ("b2", 1.0), ("b1", -0.1)])
def test_adam_betas_outside_unit_interval_are_refused(key, value):
    # Before: `b1=1.5` built an optimiser whose moments grow without bound.
    with pytest.raises(ValueError, match=rf"`optimizer.{key}` must be a number in \[0, 1\)"):
        make_optimizer({key: value})


def test_sgd_momentum_outside_unit_interval_is_refused():
    with pytest.raises(ValueError, match="`optimizer.momentum`"):
        make_optimizer({"name": "sgd", "momentum": 1.2})


@pytest.mark.parametrize("steps", [2.5, 2.0, True, "3"])
def test_non_integer_steps_are_refused(untyped, steps):
    # Before: `steps=2.5` ran 3 steps.
    with pytest.raises(ValueError, match="`steps` must be an integer >= 0"):
        _fit(steps=steps)


def test_resume_past_steps_is_refused_and_a_finished_run_says_so(tmp_path, capsys):
    # Before: a checkpoint at step 4 resumed with `steps=2` returned the step-4
    # model as the result of a 2-step run, with only "resuming from step 4 of 2".
    _fit(steps=4, workdir=tmp_path, checkpoint_every=2)
    with pytest.raises(ValueError, match=r"`steps` is 2, but .* checkpoint at step 4") as info:
        _fit(steps=2, workdir=tmp_path)
    assert isinstance(info.value, ResumePastEndError) and info.value.checkpoint_step == 4
    capsys.readouterr()
    assert _fit(steps=4, workdir=tmp_path).step == 4  # finished: trains nothing, says so
    assert "resuming from step 4 of 4: the run is finished, nothing is left to train" in (
        capsys.readouterr().err
    )


def test_non_finite_batch_stops_training_and_names_the_step():
    # Before: a NaN in the batch was only noticed if the loss became NaN; here it
    # would not (the NaN sits in an entry the loss masks out), so training went on.
    model, _, batch_fn = _toy()

    def loss_fn(model, batch, key):
        x, y = batch
        y = jnp.where(jnp.isfinite(y), y, 0.0)
        return jnp.mean((jax.vmap(model)(x)[:, 0] - y) ** 2), {}

    def poisoned(step, key):
        x, y = batch_fn(step, key)
        return x, y.at[0].set(jnp.where(step == 3, jnp.nan, y[0]))

    with pytest.raises(NonFiniteBatchError, match="`batch_fn` .* at step 4") as info:
        _fit(loss_fn=loss_fn, batch_fn=poisoned, steps=6, log_every=1)
    assert isinstance(info.value, ValueError) and isinstance(info.value, NonFiniteLossError)
    # The check can be turned off, and then this masked NaN trains through.
    result = _fit(loss_fn=loss_fn, batch_fn=poisoned, steps=6, check_batch=False)
    assert result.step == 6
    assert all(
        np.isfinite(x).all() for x in jax.tree.leaves(eqx.filter(result.model, eqx.is_array))
    )


# --- errors that pointed nowhere -------------------------------------------------


def test_loss_returning_a_bare_scalar():
    model, _, _ = _toy()

    def bare(model, batch, key):
        x, y = batch
        return jnp.mean((jax.vmap(model)(x)[:, 0] - y) ** 2)

    with pytest.raises(TypeError, match=r"`loss_fn` must return a pair `\(loss, aux\)`"):
        _fit(loss_fn=bare)


def test_loss_returning_a_vector():
    def vector(model, batch, key):
        x, y = batch
        return (jax.vmap(model)(x)[:, 0] - y) ** 2, {}

    with pytest.raises(TypeError, match="`loss_fn` must return a real scalar loss"):
        _fit(loss_fn=vector)


def test_batch_fn_of_one_argument_is_told_its_call():
    # Before: Python's "takes 1 positional argument but 2 were given".
    def one(step):
        return jnp.ones((4, 2)), jnp.ones(4)

    with pytest.raises(
        TypeError, match=r"called as `batch_fn\(step, key\)`.*signature is `\(step\)`"
    ):
        _fit(batch_fn=one)
    # a jitted batch function or a partial with the two left is fine
    model, _, batch_fn = _toy()
    assert _fit(batch_fn=jax.jit(batch_fn)).step == 2
    assert (
        _fit(batch_fn=functools.partial(lambda scale, step, key: batch_fn(step, key), 1)).step == 2
    )


def test_batch_fn_returning_nothing_is_refused():
    # Before: a `batch_fn` without `return` ended training at step 0, as a stream that ended.
    with pytest.raises(TypeError, match=r"`batch_fn\(0, key\)` returned None"):
        _fit(batch_fn=lambda step, key: None)


@pytest.mark.parametrize("key", [0, np.int32(3), jnp.zeros(3, jnp.uint32)])
def test_key_that_is_not_a_prng_key(untyped, key):
    with pytest.raises(TypeError, match=r"`key` must be a JAX PRNG key such as `jax.random.key"):
        _fit(key=key)


def test_legacy_uint32_key_is_accepted():
    assert _fit(key=jax.random.PRNGKey(0)).step == 2


def test_eval_fn_returning_a_vector():
    with pytest.raises(ValueError, match="`eval_fn` must return scalars, but its entry 'err'"):
        _fit(eval_fn=lambda model: {"err": jnp.ones(3)})


def test_eval_fn_returning_a_number():
    with pytest.raises(TypeError, match="`eval_fn` must return a dict of scalars"):
        _fit(eval_fn=lambda model: 0.5)


def test_optimizer_passed_as_a_dict(untyped):
    with pytest.raises(TypeError, match="make_optimizer") as info:
        _fit(optimizer={"learning_rate": 1e-3})
    assert "`optimizer` must be an `optax.GradientTransformation`" in str(info.value)


@pytest.mark.parametrize(
    "config,key",
    [
        ({"learning_rate": "fast"}, "learning_rate"),
        ({"learning_rate": -1e-3}, "learning_rate"),
        ({"weight_decay": "0.1", "name": "adamw"}, "weight_decay"),
        ({"eps": -1.0}, "eps"),
        ({"clip_norm": "1"}, "clip_norm"),
        ({"warmup_steps": 2.5}, "warmup_steps"),
        ({"schedule": "cosine", "decay_steps": 0}, "decay_steps"),
        ({"schedule": "step", "boundaries": (10, 5)}, "boundaries"),
        ({"name": "sgd", "nesterov": "yes"}, "nesterov"),
    ],
)
def test_make_optimizer_names_the_bad_key(config, key, untyped):
    with pytest.raises(ValueError, match=rf"`optimizer.{key}`"):
        make_optimizer(config)


def test_make_optimizer_refuses_a_non_mapping(untyped):
    with pytest.raises(TypeError, match="`config` must be an `OptimizerSettings`, or a dict"):
        make_optimizer(1e-3)


@pytest.mark.parametrize("name", ["checkpoint_every", "eval_every"])
def test_negative_or_fractional_intervals(untyped, name):
    with pytest.raises(ValueError, match=f"`{name}` must be an integer >= 0"):
        _fit(**{name: 1.5})


def test_an_old_keyword_call_shows_the_new_one(untyped):
    # `fit` takes the loop's settings as one `TrainSettings`
    model, loss_fn, batch_fn = _toy()
    common = dict(optimizer=make_optimizer({}), key=jax.random.key(1))
    new_call = re.escape(
        "not as keywords: call `fit(..., settings=TrainSettings(steps=2, log_every=5))`"
    )
    with pytest.raises(TypeError, match=new_call):
        fit(model, loss_fn, batch_fn, steps=2, log_every=5, **common)
    settings = TrainSettings(steps=2)
    new_call = re.escape("settings=dataclasses.replace(settings, steps=3))`")
    with pytest.raises(TypeError, match=new_call):
        fit(model, loss_fn, batch_fn, settings=settings, steps=3, **common)
    # a name that is no setting is Python's own error
    with pytest.raises(TypeError, match="unexpected keyword argument 'log_evry'"):
        fit(model, loss_fn, batch_fn, settings=settings, log_evry=5, **common)


def test_settings_are_required_and_a_settings_object(untyped):
    model, loss_fn, batch_fn = _toy()
    common = dict(optimizer=make_optimizer({}), key=jax.random.key(1))
    with pytest.raises(TypeError, match="missing 1 required keyword-only argument: 'settings'"):
        fit(model, loss_fn, batch_fn, **common)
    with pytest.raises(TypeError, match="`settings` must be a `TrainSettings`"):
        fit(model, loss_fn, batch_fn, settings={"steps": 2}, **common)
    with pytest.raises(ValueError, match="`log_every` must be an integer >= 1, got 0"):
        TrainSettings(steps=2, log_every=0)


def test_progress_and_check_batch_must_be_booleans(untyped):
    # Before: `progress="no"` is truthy, so the bar was shown.
    for name in ("progress", "check_batch"):
        with pytest.raises(TypeError, match=f"^`{name}` must be True or False, got 'no'.$"):
            TrainSettings(steps=2, **{name: "no"})
    assert TrainSettings(steps=2, progress=np.bool_(False)).progress == np.False_


def test_a_process_group_names_its_bad_count_or_index(untyped):
    # Before: `ProcessGroup(2, 5).rows(batch)` returned an empty batch and
    # `ProcessGroup(0, 0)` a ZeroDivisionError.
    with pytest.raises(ValueError, match=r"^`index` must be an integer in \[0, 2\) for a group "):
        ProcessGroup(2, 5)
    with pytest.raises(ValueError, match=r"^`index` must be an integer in \[0, 2\) .* got -1.$"):
        ProcessGroup(2, -1)
    with pytest.raises(ValueError, match="^`count` must be a positive integer, got 0.$"):
        ProcessGroup(0, 0)
    # A group made by hand can split a batch, but its collectives need the
    # runtime's processes: before, numpy's "cannot reshape array of size 1".
    group = ProcessGroup(2, 0)
    assert group.rows(np.arange(4)).tolist() == [0, 1]
    mismatch = re.escape("ProcessGroup(count=2, index=0) does not match JAX's runtime of 1 ")
    for collective in (lambda: group.any(True), lambda: group.gather(1), group.barrier):
        with pytest.raises(ValueError, match=mismatch):
            collective()
