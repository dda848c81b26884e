"""A small online study trained in its own process, for the kill-and-resume
tests: `python -m tests.online.resume_trainer WORKDIR BUFFER CONCURRENCY [KILL_AT K]`.

`BUFFER` is `fifo` (one solver job at a time then makes the run deterministic:
samples arrive, and are trained on, in one order) or `firo` (random reads). Run again on
the same `WORKDIR`, it resumes from the latest checkpoint. At the end it writes
`WORKDIR/final.npy` (the trained parameters, flat) and `WORKDIR/summary.json`.

With `KILL_AT K`, the trainer SIGKILLs itself at a point a resume cannot get
right without the accepted ids: from its first checkpoint at a step >= `KILL_AT`
on, the receiver stops (holds) right after it accepts the `K`-th step of a
run (`K` < `N_STEPS`: the run still has steps to send); the next checkpoint,
which so holds exactly `K` accepted steps of that run (resent after the
restart), is written, and the trainer dies before its next batch. The first
such checkpoint waits for the hold, unless the buffer is full (the receiver
could not go on): then the one after it, which the full buffer lets the
trainer reach, is the one.
"""

import json
import os
import signal
import sys
import threading
import time
from pathlib import Path

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import optax

from sciml.online import FIFO, FIRO, ParameterSpace, SampleStream, Study, train_online
from sciml.training import TrainSettings


N_RUNS, N_STEPS = 12, 5
DELAY = 0.1  # seconds per solver step: the study streams for about 6 s
_HOOK_TIMEOUT = 60.0  # seconds: a hook that never fires fails the run


def loss_fn(model, batch, key):
    u = batch["u"]  # (batch, 3, 4, 4): [a, step, seed]
    pred = jax.vmap(model)(u.reshape(u.shape[0], -1) / 100)
    return jnp.mean((pred - u[:, 0, 0, :1]) ** 2), {}


def kill_after(kill_at: int, k: int) -> None:
    """Installs the kill of the module docstring (on the `SampleStream` class)."""
    armed, held, saved = threading.Event(), threading.Event(), threading.Event()
    on_data, save, batch = SampleStream._on_data, SampleStream.save, SampleStream.batch

    def on_data_then_hold(self, msg):
        on_data(self, msg)
        if armed.is_set() and self.table.received[msg.run] == k and not held.is_set():
            print(f"holding the receiver after step {msg.step} of run {msg.run}", flush=True)
            held.set()
            threading.Event().wait()  # until the kill

    def save_when_held(self):
        if self.samples.counters["batches"] >= kill_at:
            armed.set()
        deadline = time.monotonic() + _HOOK_TIMEOUT
        while armed.is_set() and not held.wait(0.01):
            with self.lock:
                if not self.samples.can_put():
                    return save(self)  # the receiver cannot go on: the next one
            if time.monotonic() > deadline:
                print(f"no run reached {k} accepted steps", flush=True)
                os._exit(3)
        extra = save(self)
        if held.is_set():
            saved.set()
        return extra

    def die_once_saved(self, key):
        if saved.is_set():  # the checkpoint is written: fit asks for the next batch
            os.kill(os.getpid(), signal.SIGKILL)
        return batch(self, key)

    SampleStream._on_data, SampleStream.save = on_data_then_hold, save_when_held
    SampleStream.batch = die_once_saved


def main(workdir: Path, buffer: str, concurrency: int) -> None:
    study = Study(
        simulation="tests.online.stream_solvers.slow_counter",
        space=ParameterSpace({"a": (0.0, 1.0)}),
        n_runs=N_RUNS,
        n_steps=N_STEPS,
        settings={"n_steps": N_STEPS, "delay": DELAY},
        concurrency=concurrency,
        runs_per_job=3,
        n_validation=1,
        seed=0,
        timeout=5.0,  # also how long an orphaned solver waits for a dead trainer
    )
    result = train_online(
        study,
        eqx.nn.Linear(48, 1, key=jax.random.key(0)),
        loss_fn,
        buffer=FIFO(capacity=64) if buffer == "fifo" else FIRO(capacity=32, reads=2, watermark=8),
        optimizer=optax.adam(1e-2),
        batch_size=4,
        key=jax.random.key(1),
        settings=TrainSettings(
            steps=1000,  # until the stream ends (FIFO: 15 steps, FIRO: 30)
            workdir=workdir,
            checkpoint_every=2,
            keep_checkpoints=100,
            log_every=1,
            progress=False,
            description="online",
        ),
    )
    leaves = jax.tree.leaves(eqx.filter(result.model, eqx.is_array))
    np.save(workdir / "final.npy", np.concatenate([np.ravel(x) for x in leaves]))
    (workdir / "summary.json").write_text(json.dumps(result.summary))


if __name__ == "__main__":
    if len(sys.argv) == 6:
        kill_after(int(sys.argv[4]), int(sys.argv[5]))
    main(Path(sys.argv[1]), sys.argv[2], int(sys.argv[3]))
