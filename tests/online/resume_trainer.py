"""A small online study trained in its own process, for the kill-and-resume
tests: `python -m tests.online.resume_trainer WORKDIR BUFFER CONCURRENCY`.

`BUFFER` is `fifo` (one solver job at a time then makes the run deterministic:
samples arrive, and are trained on, in one order) or `firo` (random reads). Run again on
the same `WORKDIR`, it resumes from the latest checkpoint. At the end it writes
`WORKDIR/final.npy` (the trained parameters, flat) and `WORKDIR/summary.json`.
"""

import json
import sys
from pathlib import Path

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import optax

from sciml.online import FIFO, FIRO, ParameterSpace, Study, train_online


N_RUNS, N_STEPS = 12, 5
DELAY = 0.1  # seconds per solver step: the study streams for about 6 s


def loss_fn(model, batch, key):
    u = batch["u"]  # (batch, 3, 4, 4): [a, step, seed]
    pred = jax.vmap(model)(u.reshape(u.shape[0], -1) / 100)
    return jnp.mean((pred - u[:, 0, 0, :1]) ** 2), {}


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
        steps=1000,  # until the stream ends (FIFO: 15 steps, FIRO: 30)
        key=jax.random.key(1),
        workdir=workdir,
        checkpoint_every=2,
        keep_checkpoints=100,
        log_every=1,
        progress=False,
    )
    leaves = jax.tree.leaves(eqx.filter(result.model, eqx.is_array))
    np.save(workdir / "final.npy", np.concatenate([np.ravel(x) for x in leaves]))
    (workdir / "summary.json").write_text(json.dumps(result.summary))


if __name__ == "__main__":
    main(Path(sys.argv[1]), sys.argv[2], int(sys.argv[3]))
