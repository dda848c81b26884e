"""Trains a small model with checkpoints; used by test_fit.py in subprocesses.

usage: python _resume_script.py WORKDIR OUT.npz [PAUSE_AT_STEP MARKER_FILE]
With PAUSE_AT_STEP, the batch function of that step touches MARKER_FILE and
sleeps, so the test can kill the process mid-way.
"""

import sys
import time
from pathlib import Path

import jax


jax.config.update("jax_enable_x64", True)

import equinox as eqx  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

from sciml.training import TrainSettings, fit, make_optimizer  # noqa: E402


def main():
    workdir, out = sys.argv[1], sys.argv[2]
    pause_at = int(sys.argv[3]) if len(sys.argv) > 3 else -1
    marker = Path(sys.argv[4]) if len(sys.argv) > 4 else None
    model = eqx.nn.MLP(3, 1, 8, 2, key=jax.random.key(0))

    def batch_fn(step, key):
        if step == pause_at:
            marker.write_text("paused")
            time.sleep(600)
        x = jax.random.normal(key, (16, 3))
        return x, jnp.sin(x.sum(axis=1))

    def loss_fn(model, batch, key):
        x, y = batch
        noise = 0.01 * jax.random.normal(key, y.shape)  # the loss key matters
        return jnp.mean((jax.vmap(model)(x)[:, 0] - y - noise) ** 2), {}

    optimizer = make_optimizer(
        {
            "name": "adamw",
            "learning_rate": 1e-2,
            "weight_decay": 1e-3,
            "schedule": "cosine",
            "decay_steps": 40,
            "warmup_steps": 4,
        }
    )
    result = fit(
        model,
        loss_fn,
        batch_fn,
        optimizer=optimizer,
        key=jax.random.key(1),
        settings=TrainSettings(
            steps=40, workdir=workdir, checkpoint_every=10, log_every=5, progress=False
        ),
    )
    leaves = jax.tree_util.tree_leaves(eqx.filter(result.model, eqx.is_array))
    np.savez(out, *[np.asarray(x) for x in leaves], step=result.step)


if __name__ == "__main__":
    main()
