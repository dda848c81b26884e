# %% [markdown]
# # Getting started
#
# This page is executed when the documentation is built. It trains a small
# model with `sciml.training`, resumes it from a checkpoint, and moves it into
# Flax NNX with the adapter.
#
# The task: learn the solution operator of the periodic heat equation
# $u_t = \kappa u_{xx}$ on $[0, 1)$, mapping $u(\cdot, 0)$ to $u(\cdot, T)$.
# The data are exact: each Fourier mode $k$ decays by $e^{-4\pi^2k^2\kappa T}$.

# %%
import dataclasses
import tempfile
from pathlib import Path

import equinox as eqx
import jax
import jax.numpy as jnp
import matplotlib.pyplot as plt

from sciml.training import (
    TrainSettings,
    fit,
    make_optimizer,
    read_metrics,
    restore_model,
)


def heat_pairs(key, n, resolution=32, n_modes=6, kappa=0.01, t_final=0.1):
    x = jnp.arange(resolution) / resolution
    k = jnp.arange(1, n_modes + 1)
    a, b = jax.random.normal(key, (2, n, n_modes)) / k
    cos, sin = (
        jnp.cos(2 * jnp.pi * k[:, None] * x),
        jnp.sin(2 * jnp.pi * k[:, None] * x),
    )
    decay = jnp.exp(-4 * jnp.pi**2 * k**2 * kappa * t_final)
    return a @ cos + b @ sin, (a * decay) @ cos + (b * decay) @ sin


u0_train, ut_train = heat_pairs(jax.random.key(0), 512)
u0_test, ut_test = heat_pairs(jax.random.key(1), 128)

# %% [markdown]
# A model is any Equinox module that maps **one** sample; batches go through
# `jax.vmap`. The loss returns `(loss, aux)`; the batch function draws the
# batch of a step from a key, so a resumed run sees the same batches.

# %%
model = eqx.nn.MLP(32, 32, 64, 2, activation=jax.nn.gelu, key=jax.random.key(2))


def loss_fn(model, batch, key):
    u0, ut = batch
    pred = jax.vmap(model)(u0)
    return jnp.mean((pred - ut) ** 2) / jnp.mean(ut**2), {}


def batch_fn(step, key):
    index = jax.random.randint(key, (32,), 0, u0_train.shape[0])
    return u0_train[index], ut_train[index]


def test_error(model):
    pred = jax.vmap(model)(u0_test)
    return {
        "rel_l2": jnp.mean(
            jnp.linalg.norm(pred - ut_test, axis=1) / jnp.linalg.norm(ut_test, axis=1)
        )
    }


optimizer = make_optimizer(
    {
        "name": "adam",
        "learning_rate": 3e-3,
        "schedule": "cosine",
        "decay_steps": 1000,
        "warmup_steps": 50,
        "clip_norm": 1.0,
    }
)

# %% [markdown]
# `fit` runs the jitted steps, writes `metrics.jsonl`, saves checkpoints and
# stops with an error naming the step if the loss becomes NaN or Inf; the loop's
# settings travel as one `TrainSettings`. We stop after 400 steps, then call
# `fit` again with the same run directory and `steps=1000`: it resumes from the
# step-400 checkpoint.

# %%
workdir = Path(tempfile.mkdtemp())
settings = TrainSettings(
    steps=400, workdir=workdir, checkpoint_every=200, progress=False, log_every=50
)
common = dict(optimizer=optimizer, key=jax.random.key(3), eval_fn=test_error)
first = fit(model, loss_fn, batch_fn, settings=settings, **common)
print("after 400 steps:", first.metrics["eval_rel_l2"])
second = fit(
    model,
    loss_fn,
    batch_fn,
    settings=dataclasses.replace(settings, steps=1000),
    **common,
)
print("after 1000 steps (resumed):", second.metrics["eval_rel_l2"])

# %%
train = [m for m in read_metrics(workdir / "metrics.jsonl") if m["split"] == "train"]
fig, axes = plt.subplots(1, 2, figsize=(10, 3.2))
axes[0].semilogy([m["step"] for m in train], [m["loss"] for m in train])
axes[0].set(xlabel="step", ylabel="training loss")
x = jnp.arange(32) / 32
axes[1].plot(x, u0_test[0], color="0.6", label="$u(x, 0)$")
axes[1].plot(x, ut_test[0], "k", label="exact $u(x, T)$")
axes[1].plot(x, second.model(u0_test[0]), "C1--", label="prediction")
axes[1].legend()
fig.tight_layout()

# %% [markdown]
# Checkpoints are plain arrays, so the trained model loads back for inference
# without an optimiser: `restore_model` needs a model of the same structure,
# here only its shapes (from `eqx.filter_eval_shape`, so nothing is computed).
# The experiment runner (`sciml-run --config FILE`, see the experiments page)
# runs this same loop from a config file and also stores the config in the
# checkpoints, so a run directory alone rebuilds its model.

# %%
like = eqx.filter_eval_shape(
    lambda: eqx.nn.MLP(32, 32, 64, 2, activation=jax.nn.gelu, key=jax.random.key(2))
)
restored = restore_model(workdir, like)
print(
    "restored model equals the trained one:",
    bool(eqx.tree_equal(restored, second.model)),
)

# %% [markdown]
# ## Inside Flax NNX
#
# `sciml.interop.flax.to_nnx` wraps any Equinox module as an NNX module whose
# floating-point arrays are `nnx.Param`s; outputs and gradients are those of
# the Equinox module, and `from_nnx` gives it back.

# %%
import optax
from flax import nnx

from sciml.interop.flax import from_nnx, to_nnx


flax_model = to_nnx(second.model)
print(jnp.max(jnp.abs(flax_model(u0_test[0]) - second.model(u0_test[0]))))

nnx_optimizer = nnx.Optimizer(flax_model, optax.adam(1e-3), wrt=nnx.Param)


@nnx.jit
def nnx_step(model, optimizer, u0, ut):
    def loss(model):
        return jnp.mean((jax.vmap(model)(u0) - ut) ** 2)

    value, grads = nnx.value_and_grad(loss)(model)
    optimizer.update(model, grads)
    return value


for _ in range(5):
    print(float(nnx_step(flax_model, nnx_optimizer, u0_train[:64], ut_train[:64])))
back = from_nnx(flax_model)
