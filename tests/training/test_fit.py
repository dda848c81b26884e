import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from sciml.training import (
    Checkpointer,
    CheckpointMismatchError,
    Extra,
    NonFiniteLossError,
    TrainSettings,
    fit,
    init_opt_state,
    make_optimizer,
    read_metrics,
    read_run_config,
    restore_model,
)


SCRIPT = Path(__file__).with_name("_resume_script.py")
ROOT = Path(__file__).parents[2]


def _run_script(*args, wait=True):
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    cmd = [sys.executable, str(SCRIPT), *map(str, args)]
    if wait:
        subprocess.run(cmd, check=True, env=env, timeout=300)
        return None
    return subprocess.Popen(cmd, env=env)


def _params(path):
    data = np.load(path)
    return [data[k] for k in sorted(data.files) if k.startswith("arr_")], int(data["step"])


@pytest.mark.slow
def test_killed_run_resumes_to_the_same_parameters(tmp_path):
    _run_script(tmp_path / "straight", tmp_path / "straight.npz")

    marker = tmp_path / "paused"
    proc = _run_script(tmp_path / "killed", tmp_path / "unused.npz", 25, marker, wait=False)
    deadline = time.time() + 240
    while not marker.exists():
        assert proc.poll() is None, "training subprocess ended before the pause"
        assert time.time() < deadline, "training subprocess never reached the pause"
        time.sleep(0.2)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert Checkpointer(tmp_path / "killed" / "checkpoints").latest_step() == 20

    _run_script(tmp_path / "killed", tmp_path / "resumed.npz")
    straight, step_a = _params(tmp_path / "straight.npz")
    resumed, step_b = _params(tmp_path / "resumed.npz")
    assert step_a == step_b == 40
    for a, b in zip(straight, resumed, strict=True):
        np.testing.assert_array_equal(a, b)
    # Metrics logged after the last checkpoint were dropped and recomputed once.
    steps = [m["step"] for m in read_metrics(tmp_path / "killed" / "metrics.jsonl")]
    assert steps == sorted(set(steps)) and steps[-1] == 40


def _toy(getkey):
    model = eqx.nn.Linear(2, 1, key=getkey())

    def loss_fn(model, batch, key):
        x, y = batch
        return jnp.mean((jax.vmap(model)(x)[:, 0] - y) ** 2), {"mean_y": jnp.mean(y)}

    def batch_fn(step, key):
        x = jax.random.normal(key, (8, 2))
        return x, x @ jnp.array([1.0, -2.0]) + 0.5

    return model, loss_fn, batch_fn


def test_fit_learns_and_logs(tmp_path, getkey):
    model, loss_fn, batch_fn = _toy(getkey)
    result = fit(
        model,
        loss_fn,
        batch_fn,
        optimizer=make_optimizer({"learning_rate": 0.05}),
        key=getkey(),
        settings=TrainSettings(
            steps=300, workdir=tmp_path, log_every=50, progress=False, eval_every=100
        ),
        eval_fn=lambda m: {"bias": m.bias[0]},
    )
    np.testing.assert_allclose(result.model.weight, [[1.0, -2.0]], atol=1e-3)
    np.testing.assert_allclose(result.metrics["eval_bias"], 0.5, atol=1e-3)
    records = read_metrics(tmp_path / "metrics.jsonl")
    assert [r["step"] for r in records if r["split"] == "train"] == [50, 100, 150, 200, 250, 300]
    assert [r["step"] for r in records if r["split"] == "eval"] == [100, 200, 300]
    assert {"loss", "mean_y", "grad_norm", "steps_per_s"} <= set(records[0])


def test_nan_guard_names_the_step_and_keeps_last_checkpoint(tmp_path, getkey):
    """The NaN guard, and the defaults of what a run keeps: the last 3
    checkpoints (`keep_checkpoints`) and a training record every 10 steps
    (`log_every`), besides one at each checkpoint."""
    model, loss_fn, batch_fn = _toy(getkey)

    def poisoned(step, key):
        x, y = batch_fn(step, key)
        return x, jnp.where(step == 21, jnp.nan, y)  # the 22nd step sees a NaN

    optimizer = make_optimizer({"learning_rate": 0.05})
    with pytest.raises(NonFiniteLossError, match="at step 22"):
        fit(
            model,
            loss_fn,
            poisoned,
            optimizer=optimizer,
            key=getkey(),
            settings=TrainSettings(steps=40, workdir=tmp_path, checkpoint_every=4, progress=False),
        )
    checkpointer = Checkpointer(tmp_path / "checkpoints")
    assert checkpointer.all_steps() == [12, 16, 20]  # of 4, 8, …, 20
    records = read_metrics(tmp_path / "metrics.jsonl")  # at every 10th step and each checkpoint
    assert [r["step"] for r in records if r["split"] == "train"] == [4, 8, 10, 12, 16, 20]
    restored, _, _, step = checkpointer.restore(model, init_opt_state(optimizer, model))
    assert step == 20
    assert all(np.isfinite(x).all() for x in jax.tree_util.tree_leaves(restored))


def test_checkpoint_of_another_run_is_refused(tmp_path, getkey):
    model, loss_fn, batch_fn = _toy(getkey)
    optimizer = make_optimizer({})
    common = dict(optimizer=optimizer, key=getkey())

    def settings(name):
        return TrainSettings(steps=3, workdir=tmp_path, progress=False, fingerprint={"name": name})

    fit(model, loss_fn, batch_fn, settings=settings("a"), **common)
    with pytest.raises(CheckpointMismatchError, match="not of"):
        fit(model, loss_fn, batch_fn, settings=settings("b"), **common)
    bigger = eqx.nn.Linear(3, 1, key=getkey())
    with pytest.raises(CheckpointMismatchError, match="shapes"):
        fit(bigger, loss_fn, batch_fn, settings=settings("a"), **common)
    assert Checkpointer(tmp_path / "checkpoints").all_steps() == [3]


def _last_checkpoint_of_interrupted_fit(tmp_path, model, loss_fn, batch_fn, key) -> int:
    """Runs 20 steps that `batch_fn` interrupts; returns the step of the last checkpoint."""
    with pytest.raises(KeyboardInterrupt):
        fit(
            model,
            loss_fn,
            batch_fn,
            optimizer=make_optimizer({}),
            key=key,
            settings=TrainSettings(
                steps=20, workdir=tmp_path, checkpoint_every=100, progress=False
            ),
        )
    return Checkpointer(tmp_path / "checkpoints").latest_step()


def test_interrupt_saves_finished_steps(tmp_path, getkey):
    model, loss_fn, batch_fn = _toy(getkey)

    def interrupting(step, key):
        if step == 7:
            raise KeyboardInterrupt
        return batch_fn(step, key)

    assert (
        _last_checkpoint_of_interrupted_fit(tmp_path, model, loss_fn, interrupting, getkey()) == 7
    )


def test_bad_arguments(getkey):
    model, loss_fn, batch_fn = _toy(getkey)
    with pytest.raises(ValueError, match="log_every"):
        TrainSettings(steps=3, log_every=0)
    with pytest.raises(ValueError, match="steps"):
        TrainSettings(steps=-1)


def test_metrics_are_plain_json(tmp_path, getkey):
    model, loss_fn, batch_fn = _toy(getkey)
    fit(
        model,
        loss_fn,
        batch_fn,
        optimizer=make_optimizer({}),
        key=getkey(),
        settings=TrainSettings(steps=2, workdir=tmp_path, log_every=1, progress=False),
    )
    for line in (tmp_path / "metrics.jsonl").read_text().splitlines():
        assert isinstance(json.loads(line)["loss"], float)


def test_sigterm_checkpoints_like_ctrl_c_and_restores_the_handler(tmp_path, getkey):
    model, loss_fn, batch_fn = _toy(getkey)

    def terminated(step, key):
        if step == 7:
            os.kill(os.getpid(), signal.SIGTERM)  # what a cluster sends before pre-emption
        return batch_fn(step, key)

    def handler(signum, frame):
        raise AssertionError("the previous handler ran during fit")

    previous = signal.signal(signal.SIGTERM, handler)
    try:
        last = _last_checkpoint_of_interrupted_fit(tmp_path, model, loss_fn, terminated, getkey())
        assert signal.getsignal(signal.SIGTERM) is handler
    finally:
        signal.signal(signal.SIGTERM, previous)
    assert last == 7


def test_restore_model_needs_no_optimizer(tmp_path, getkey):
    model, loss_fn, batch_fn = _toy(getkey)

    def run(**kwargs):
        optimizer = make_optimizer({"name": "adamw", "weight_decay": 1e-2, "clip_norm": 1.0})
        settings = TrainSettings(steps=30, workdir=tmp_path, progress=False, **kwargs)
        return fit(model, loss_fn, batch_fn, optimizer=optimizer, key=getkey(), settings=settings)

    result = run(run_config={"model": {"in": 2, "out": 1}})
    config = read_run_config(tmp_path)
    assert config == {"model": {"in": 2, "out": 1}}
    like = eqx.filter_eval_shape(eqx.nn.Linear, config["model"]["in"], 1, key=getkey())
    restored = restore_model(tmp_path, like)
    assert bool(eqx.tree_equal(restored, result.model))
    # a finished run called again trains nothing and logs nothing new
    lines = (tmp_path / "metrics.jsonl").read_text()
    again = run()
    assert (tmp_path / "metrics.jsonl").read_text() == lines
    assert again.metrics["loss"] == result.metrics["loss"] and again.start_step == 30
    with pytest.raises(CheckpointMismatchError, match="shapes"):
        restore_model(tmp_path, eqx.nn.Linear(3, 1, key=getkey()))


def test_extra_state_round_trips_beside_the_model(tmp_path, getkey):
    model = eqx.nn.Linear(3, 2, key=getkey())
    optimizer = make_optimizer({"name": "adam"})
    opt_state = init_opt_state(optimizer, model)
    arrays = {
        "accepted": np.array([[0, 1], [2**40, 3]], np.int64),  # beyond int32
        "buffer/0": np.linspace(0, 1, 12, dtype=np.float32).reshape(3, 4),
        "none_yet": np.zeros((0, 2), np.int64),  # orbax stores no empty arrays
    }
    data = {"runs": {"status": ["done", "running"]}, "counters": {"received": 7}}
    checkpointer = Checkpointer(tmp_path)
    try:
        checkpointer.save(5, model, opt_state, getkey(), Extra(arrays, data))
        # the model, optimiser state and key restore with the extra arrays on disk
        restored, restored_opt, _, step = checkpointer.restore(model, opt_state)
        assert step == 5 and bool(eqx.tree_equal(restored, model))
        assert bool(eqx.tree_equal(restored_opt, opt_state))
        assert bool(eqx.tree_equal(checkpointer.restore_model(model), model))
        extra = checkpointer.restore_extra()
    finally:
        checkpointer.close()
    assert extra.data == data and extra.arrays.keys() == arrays.keys()
    for name, array in arrays.items():
        assert extra.arrays[name].dtype == array.dtype, name
        np.testing.assert_array_equal(extra.arrays[name], array)
