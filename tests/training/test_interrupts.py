"""Ctrl-C and SIGTERM delivered at many points of a `fit` run, the checkpoint
write included: every run stops with `KeyboardInterrupt` and nothing else,
leaves complete checkpoints only, and resumes to the parameters of a run that
was never interrupted."""

import os
import shutil
import signal

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import orbax.checkpoint as ocp
import pytest

import sciml.training._fit as fit_module
from sciml.training import Checkpointer, ChunkedRun, TrainSettings, fit, make_optimizer


STEPS = 12


def _loss_fn(model, batch, key):
    x, y = batch
    return jnp.mean((jax.vmap(model)(x)[:, 0] - y) ** 2), {}


@jax.jit
def _batch(key):
    x = jax.random.normal(key, (8, 2))
    return x, x @ jnp.array([1.0, -2.0]) + 0.5


class _Signals:
    """Sends signals to this process at chosen points of a run: `at[point]`
    is `(step, [signal, ...])`; a point is reached with the step it names."""

    def __init__(self, **at):
        self.at = at

    def reach(self, point, step):
        step_at, sent = self.at.get(point, (None, ()))
        if step == step_at:
            for sig in sent:
                os.kill(os.getpid(), sig)


_make_step = fit_module.make_train_step
_compiled = {}  # every run has the same loss and optimiser


def _run(workdir, signals=None):
    """A 12-step fit, checkpoints every 4 steps, evaluation every 4, a log
    every 2; `signals` are sent in `batch_fn` ("batch"), when a step is
    dispatched ("step"), in the log's monitor ("log"), in `eval_fn` ("eval")
    and inside orbax's checkpoint write ("write")."""
    signals = signals or _Signals()
    current = {"step": 0}

    def batch_fn(step, key):
        current["step"] = step
        signals.reach("batch", step)
        return _batch(key)

    def monitor():
        signals.reach("log", current["step"] + 1)
        return {}

    def eval_fn(model):
        signals.reach("eval", current["step"] + 1)
        return {}

    write = ocp.JsonCheckpointHandler.async_save

    async def interrupted_write(self, directory, *args, **kwargs):
        signals.reach("write", current["step"] + 1)  # the tmp folder exists now
        return await write(self, directory, *args, **kwargs)

    def make_interrupted_step(*args, **kwargs):
        step = _compiled.setdefault("step", _make_step(*args, **kwargs))  # compiled once

        def interrupted_step(*step_args):
            signals.reach("step", current["step"])
            return step(*step_args)

        return interrupted_step

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(ocp.JsonCheckpointHandler, "async_save", interrupted_write)
        patch.setattr(fit_module, "make_train_step", make_interrupted_step)
        return fit(
            eqx.nn.Linear(2, 1, key=jax.random.key(1)),
            _loss_fn,
            batch_fn,
            optimizer=make_optimizer({"learning_rate": 0.05}),
            key=jax.random.key(2),
            eval_fn=eval_fn,
            monitor=monitor,
            settings=TrainSettings(
                steps=STEPS,
                workdir=workdir,
                checkpoint_every=4,
                keep_checkpoints=10,
                log_every=2,
                eval_every=4,
                progress=False,
            ),
        )


INT, TERM = signal.SIGINT, signal.SIGTERM

# (where the signals go, the checkpoint the run stops with)
CASES = {
    # a batch being drawn (or waited for) is given up: 5 steps were done
    "batch": (dict(batch=(5, [INT])), 5),
    # a step being dispatched finishes: 7 steps done, then one checkpoint
    "step": (dict(step=(6, [TERM])), 7),
    "log": (dict(log=(6, [INT])), 6),
    "eval": (dict(eval=(8, [TERM])), 8),  # checkpoint 8 is written once
    "write": (dict(write=(4, [INT])), 4),
    "write, twice": (dict(write=(8, [INT, TERM])), 8),
    "final write": (dict(write=(12, [TERM])), 12),
    # a second signal outside a write stops at once: the last checkpoint stays
    "twice in a step": (dict(step=(6, [INT, INT])), 4),
}


def test_interrupts_anywhere_stop_cleanly_and_resume_to_the_same_parameters(tmp_path, capfd):
    handlers = signal.getsignal(INT), signal.getsignal(TERM)
    straight = _run(tmp_path / "straight").model
    for name, (at, expected) in CASES.items():
        workdir = tmp_path / name.replace(" ", "_").replace(",", "")
        with pytest.raises(KeyboardInterrupt):
            _run(workdir, _Signals(**at))
        checkpoints = workdir / "checkpoints"
        assert Checkpointer(checkpoints).latest_step() == expected, name
        assert not [p.name for p in checkpoints.iterdir() if "tmp" in p.name], name
        assert (signal.getsignal(INT), signal.getsignal(TERM)) == handlers  # restored
        resumed = _run(workdir)
        assert resumed.step == STEPS
        # bitwise: the resumed run replays the same steps and keys
        for a, b in zip(jax.tree.leaves(straight), jax.tree.leaves(resumed.model), strict=True):
            np.testing.assert_array_equal(a, b, err_msg=name)
    assert "received while a checkpoint is written" in capfd.readouterr().err


def test_a_write_killed_part_way_is_removed_on_resume(tmp_path):
    """A process killed inside a checkpoint write (SIGKILL: no handler runs)
    leaves orbax's temporary folder; it is never read, and the resumed run
    removes it and writes that step again."""
    straight = _run(tmp_path / "straight").model
    checkpoints = tmp_path / "killed" / "checkpoints"
    with pytest.raises(KeyboardInterrupt):
        _run(tmp_path / "killed", _Signals(batch=(4, [INT])))
    # what a write killed part-way leaves: its items under orbax's temporary
    # names, no commit marker; for step 8, which the resumed run writes again,
    # and for step 10 (a run with other `checkpoint_every`), which it does not
    for step in (8, 10):
        for item in ("state", "meta"):
            shutil.copytree(
                tmp_path / "straight" / "checkpoints" / "8" / item,
                checkpoints / f"{step}.orbax-checkpoint-tmp" / f"{item}.orbax-checkpoint-tmp",
            )
    assert Checkpointer(checkpoints).latest_step() == 4
    resumed = _run(tmp_path / "killed")
    assert sorted(p.name for p in checkpoints.iterdir()) == ["12", "4", "8"]
    for a, b in zip(jax.tree.leaves(straight), jax.tree.leaves(resumed.model), strict=True):
        np.testing.assert_array_equal(a, b)


def test_two_signals_inside_a_chunked_run_write_keep_that_checkpoint(tmp_path):
    """`ChunkedRun`: SIGINT and SIGTERM inside the write of chunk 2 stop the
    run once that checkpoint is complete; resuming finishes the count."""
    write = ocp.JsonCheckpointHandler.async_save
    calls = {"n": 0}

    async def interrupted_write(self, *args, **kwargs):
        calls["n"] += 1
        if calls["n"] == 2:
            os.kill(os.getpid(), INT)
            os.kill(os.getpid(), TERM)
        return await write(self, *args, **kwargs)

    def advance(state, step):
        return {"x": state["x"] + 1.0}, step + 1, {}

    run = ChunkedRun(tmp_path, progress=False)
    start = {"x": jnp.zeros(2)}
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(ocp.JsonCheckpointHandler, "async_save", interrupted_write)
        with pytest.raises(KeyboardInterrupt):
            run.run(start, jax.random.key(0), advance, total=4)
    assert Checkpointer(tmp_path).latest_step() == 2
    state, resumed_from = run.run(start, jax.random.key(0), advance, total=4)
    assert resumed_from == 2
    np.testing.assert_array_equal(state["x"], [4.0, 4.0])
