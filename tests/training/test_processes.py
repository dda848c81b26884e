"""`fit` on two processes: JAX's multi-process runtime with its CPU collectives
on this machine (each process one CPU device), against a plain optax loop
written here, through a resume on another process count and a signal that
reaches one process only."""

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from sciml.training import ProcessGroup
from tests.training import _processes_script as script


pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _start(
    workdir: Path, steps: int, processes: int = 2, pause: float = 0.0, checkpoint_every: int = 4
) -> list:
    """`processes` trainer processes of `_processes_script` on one coordinator."""
    env = {k: v for k, v in os.environ.items() if k != "XLA_FLAGS"}  # one CPU device each
    env.update(JAX_PLATFORMS="cpu", PYTHONPATH=str(ROOT))
    port = _free_port()
    command = [sys.executable, "-m", "tests.training._processes_script", str(workdir)]
    procs = []
    for i in range(processes):
        if processes > 1:
            env.update(
                SCIML_PROCESSES=str(processes),
                SCIML_PROCESS_ID=str(i),
                JAX_COORDINATOR_ADDRESS=f"127.0.0.1:{port}",
            )
        procs.append(
            subprocess.Popen(
                [*command, str(steps), str(pause), str(checkpoint_every)],
                env=dict(env),
                cwd=ROOT,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                text=True,
            )
        )
    return procs


def _finish(procs: list, timeout: float = 120.0) -> list[tuple[int, str]]:
    out = []
    for p in procs:
        text, _ = p.communicate(timeout=timeout)
        out.append((p.returncode, text))
    return out


def _run(workdir: Path, steps: int, processes: int = 2) -> list[dict]:
    for code, text in _finish(_start(workdir, steps, processes)):
        assert code == 0, text[-3000:]
    return [json.loads((workdir / f"result-{i}.json").read_text()) for i in range(processes)]


def _reference(steps: int) -> np.ndarray:
    """The parameters after `steps` Adam steps on the whole 8-row batches,
    with fit's documented key use (split the key in three each step: the
    next key, the batch key, the loss key), written as a plain optax loop;
    with 32-bit types, as in the trainer processes (the suite turns 64 on)."""
    with jax.enable_x64(False):
        return _reference_32(steps)


def _reference_32(steps: int) -> np.ndarray:
    x, y = script.data()
    model, optimizer = script.model(), script.OPTIMIZER
    params, static = eqx.partition(model, eqx.is_inexact_array)
    state = optimizer.init(params)

    def loss(params, xb, yb):
        m = eqx.combine(params, static)
        return jnp.mean((jax.vmap(m)(xb) - yb) ** 2)

    key = jax.random.key(script.KEY_SEED)
    for _ in range(steps):
        key, batch_key, _ = jax.random.split(key, 3)
        index = jax.random.randint(batch_key, (script.BATCH,), 0, x.shape[0])
        grads = jax.grad(loss)(params, x[index], y[index])
        updates, state = optimizer.update(grads, state, params)
        params = eqx.apply_updates(params, updates)
    return np.concatenate([np.ravel(p) for p in jax.tree.leaves(params)])


# Two processes reduce the loss of their four rows each and all-reduce the
# gradient, so they differ from the one-process sum by float32 round-off:
# measured 6e-8 after 12 steps and 1.2e-7 after 16 (parameters of size ~1).
# One step of another batch moves them by ~1e-2.
TOL = 2e-6


def test_two_processes_train_as_one_and_resume_only_on_their_count(tmp_path):
    first = _run(tmp_path, 12)
    assert first[0]["params"] == first[1]["params"]  # replicated: bit for bit
    error = np.abs(np.array(first[0]["params"]) - _reference(12)).max()
    print("2 processes vs the optax loop, 12 steps:", error)
    assert error < TOL
    assert [r["step"] for r in first] == [12, 12]
    assert [r["count"] for r in first] == [12, 1012]  # each process's own state
    assert first[0]["eval_mse"] == first[1]["eval_mse"]  # evaluated once, sent to both
    lines = (tmp_path / "metrics.jsonl").read_text().splitlines()
    assert len(lines) == len(set(lines)) and json.loads(lines[-1])["split"] == "eval"

    # the online state of two processes cannot be split over one
    ((code, text),) = _finish(_start(tmp_path, 16, processes=1))
    assert code != 0
    assert "holds the training state of 2 process(es)" in text
    assert "resume it on 2 process(es)" in text

    second = _run(tmp_path, 16)
    assert [r["restored"] for r in second] == [12, 1012]  # each got its own back
    assert np.abs(np.array(second[0]["params"]) - _reference(16)).max() < TOL


def test_a_signal_to_one_process_stops_both_at_one_checkpoint(tmp_path):
    procs = _start(tmp_path, 400, pause=0.02, checkpoint_every=1000)  # none but the interrupt's
    deadline = time.monotonic() + 90
    metrics = tmp_path / "metrics.jsonl"
    while not (metrics.is_file() and metrics.read_text()):  # step 10 is logged
        assert time.monotonic() < deadline and all(p.poll() is None for p in procs)
        time.sleep(0.1)
    procs[1].send_signal(signal.SIGINT)
    results = _finish(procs, timeout=60)
    for code, text in results:
        assert code != 0 and "KeyboardInterrupt" in text, text[-2000:]
    ((stopped,),) = [[int(p.name) for p in (tmp_path / "checkpoints").iterdir()]]
    assert 10 <= stopped < 400
    resumed = _run(tmp_path, stopped + 2)
    # Process 1 (signalled) fetched no batch for the step not taken, or had
    # fetched it when the signal came; process 0 had: a batch fetched for a
    # step the processes did not take is dropped.
    assert resumed[0]["restored"] == stopped + 1
    assert resumed[1]["restored"] - 1000 in (stopped, stopped + 1)
    assert np.abs(np.array(resumed[0]["params"]) - _reference(stopped + 2)).max() < TOL


def test_a_single_process_group_is_the_identity():
    group = ProcessGroup.current()
    batch = {"x": np.arange(6.0).reshape(3, 2)}
    assert group.single and group.main
    assert group.rows(batch) is batch and group.global_batch(batch) is batch
    assert group.any(True, False) == (True, False)
    assert group.gather({"a": 1}) == [{"a": 1}]
    assert group.broadcast({"a": 1}) == {"a": 1}
    assert group.on_main(lambda: "made", lambda: "read") == "made"
