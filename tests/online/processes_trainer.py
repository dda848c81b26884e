"""One trainer process of a small online study on two processes, for
`test_several_processes.py`: `python -m tests.online.processes_trainer
WORKDIR [KILL_AT]`, with `SCIML_PROCESSES`, `SCIML_PROCESS_ID` and
`JAX_COORDINATOR_ADDRESS` set.

Run again on the same `WORKDIR` (both processes), it resumes from the latest
checkpoint. When its stream closes, each process writes `final.json` in its
folder (`WORKDIR/online/process-<r>/`): its accepted sample ids as global
`(run, step)` pairs and its own summary; at the end process 0 writes
`WORKDIR/summary.json` (every process's, merged). With `KILL_AT`, process 1
SIGKILLs itself when asked for batch `KILL_AT` (after the checkpoint of
step `KILL_AT - 1` when that is a multiple of 2).
"""

import json
import os
import signal
import sys
from pathlib import Path

import equinox as eqx
import jax
import jax.numpy as jnp
import optax

from sciml.distributed import initialize_processes, is_main_process
from sciml.online import FIFO, ParameterSpace, SampleStream, Study, train_online
from sciml.training import TrainSettings


PROCESSES = 2
N_RUNS, N_STEPS = 8, 4  # 16 samples a process: 8 steps of 2 samples a process
DELAY = 0.15  # seconds per solver step: each process streams for about 3 s


def loss_fn(model, batch, key):
    u = batch["u"]  # (batch, 3, 4, 4): [a, step, seed]
    pred = jax.vmap(model)(u.reshape(u.shape[0], -1) / 100)
    return jnp.mean((pred - u[:, 0, 0, :1]) ** 2), {}


def record_on_close(workdir: Path) -> None:
    """Each process writes its accepted ids (global) and its own summary when
    its stream closes."""
    close = SampleStream.close

    def close_and_record(self):
        close(self)
        table = self.table
        ids = [[table.global_run(run), step] for run, step in self.samples.accepted]
        final = {"accepted": ids, "summary": self.summary()}
        (self.workdir / "final.json").write_text(json.dumps(final))

    SampleStream.close = close_and_record


def kill_at(n: int) -> None:
    """Process 1 SIGKILLs itself when asked for its `n`-th batch (0-based)."""
    batch = SampleStream.batch

    def die_at_batch(self, key):
        if self.table.process == 1 and self.samples.counters["batches"] == n:
            print(f"process 1 killed at batch {n}", flush=True)
            os.kill(os.getpid(), signal.SIGKILL)
        return batch(self, key)

    SampleStream.batch = die_at_batch


def main(workdir: Path) -> None:
    study = Study(
        simulation="tests.online.stream_solvers.slow_counter",
        space=ParameterSpace({"a": (0.0, 1.0)}),
        n_runs=N_RUNS,
        n_steps=N_STEPS,
        settings={"n_steps": N_STEPS, "delay": DELAY},
        concurrency=1,
        runs_per_job=2,
        n_validation=1,
        seed=0,
        timeout=5.0,
    )
    result = train_online(
        study,
        eqx.nn.Linear(48, 1, key=jax.random.key(0)),
        loss_fn,
        buffer=FIFO(capacity=32),
        optimizer=optax.adam(1e-2),
        batch_size=4,
        key=jax.random.key(1),
        settings=TrainSettings(
            steps=1000,  # until the streams end: 8 steps
            workdir=workdir,
            checkpoint_every=2,
            keep_checkpoints=100,
            log_every=1,
            progress=False,
            description="online",
        ),
    )
    if is_main_process():
        (workdir / "summary.json").write_text(json.dumps(result.summary))


if __name__ == "__main__":
    initialize_processes()  # before any JAX computation
    record_on_close(Path(sys.argv[1]))
    if len(sys.argv) == 3:
        kill_at(int(sys.argv[2]))
    main(Path(sys.argv[1]))
