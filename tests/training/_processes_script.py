"""`fit` in one process of several, for tests/training/test_processes.py:
`python -m tests.training._processes_script WORKDIR STEPS [PAUSE [CHECKPOINT_EVERY]]`.

The process count, index and coordinator come from the environment
(`SCIML_PROCESSES`, `SCIML_PROCESS_ID`, `JAX_COORDINATOR_ADDRESS`); without
them it trains alone. Every process draws the same global batch of 8 rows
from the same key and trains on its own rows. Its extra state counts the
steps this process saw, plus 1000 times its index (so each process's state
differs and must come back to it). With `PAUSE` seconds, each batch waits
that long first (time to send a signal); checkpoints every `CHECKPOINT_EVERY`
steps (default 4). Writes
`WORKDIR/result-<index>.json`: the flat trained parameters, the step, the
restored and final extra state, the evaluation.
"""

import json
import sys
import time

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import optax

from sciml.training import Extra, ProcessGroup, TrainSettings, fit, initialize_processes


def data():
    """64 rows `(x, y)`, `y = x · w` with a fixed `w`."""
    x = np.random.default_rng(0).normal(size=(64, 3)).astype(np.float32)
    return jnp.asarray(x), jnp.asarray(x @ np.array([1.0, -2.0, 0.5], np.float32))[:, None]


def model():
    return eqx.nn.MLP(3, 1, 8, 2, key=jax.random.key(0))


def loss_fn(model, batch, key):
    x, y = batch
    return jnp.mean((jax.vmap(model)(x) - y) ** 2), {}


OPTIMIZER = optax.adam(1e-2)
KEY_SEED = 1
BATCH = 8


class Seen:
    """Extra state: the steps this process has seen (+ 1000 × its index)."""

    def __init__(self, index: int):
        self.count, self.restored = 1000 * index, None

    def save(self) -> Extra:
        return Extra({"count": np.array([self.count])}, {"count": self.count})

    def restore(self, extra):
        self.restored = None if extra is None else int(extra.arrays["count"][0])
        if extra is not None:
            assert extra.data["count"] == self.restored
            self.count = self.restored


def main(workdir: str, steps: int, pause: float = 0.0, checkpoint_every: int = 4) -> None:
    initialize_processes()
    group = ProcessGroup.current()
    x, y = data()
    seen = Seen(group.index)

    @jax.jit
    def whole_batch(key):
        index = jax.random.randint(key, (BATCH,), 0, x.shape[0])
        return x[index], y[index]

    def batch_fn(step, key):
        time.sleep(pause)
        seen.count += 1
        return group.rows(whole_batch(key))

    result = fit(
        model(),
        loss_fn,
        batch_fn,
        optimizer=OPTIMIZER,
        key=jax.random.key(KEY_SEED),
        settings=TrainSettings(
            steps=steps, workdir=workdir, checkpoint_every=checkpoint_every, progress=False
        ),
        eval_fn=lambda m: {"mse": jnp.mean((jax.vmap(m)(x) - y) ** 2)},
        extra_state=seen,
    )
    leaves = jax.tree.leaves(eqx.filter(result.model, eqx.is_array))
    out = {
        "params": np.concatenate([np.ravel(leaf) for leaf in leaves]).tolist(),
        "step": result.step,
        "restored": seen.restored,
        "count": seen.count,
        "eval_mse": result.metrics["eval_mse"],
    }
    with open(f"{workdir}/result-{group.index}.json", "w") as f:
        json.dump(out, f)


if __name__ == "__main__":
    pause, every = (sys.argv[3:] + ["0", "4"])[:2]
    main(sys.argv[1], int(sys.argv[2]), float(pause), int(every))
