# %% [markdown]
# # A tensorized FNO on Darcy flow
#
# The Fourier neural operator (Li et al., 2021) learns maps between functions:
# here from the permeability $a(x)$ of Darcy flow $-\nabla\cdot(a\nabla u) = 1$
# (zero Dirichlet boundary) to the pressure $u(x)$. A TFNO (Kossaifi et al.,
# 2024) is the same model with each layer's spectral weight stored as a
# low-rank Tucker tensor. This page (executed when the docs are built, about a
# minute on a laptop CPU) trains both on data from our own solver, compares
# their parameter counts, and evaluates them zero-shot on a grid twice as fine.
#
# The full-size versions are experiment configs:
#
# ```bash
# python -m experiments.run --config experiments/configs/darcy_fno.py
# python -m experiments.run --config experiments/configs/darcy_tfno.py
# ```

# %%
import tempfile
from pathlib import Path

import equinox as eqx
import jax
import jax.numpy as jnp
import matplotlib.pyplot as plt
import numpy as np

from sciml.operators import FNO, TFNO, h1_loss, relative_lp_loss
from sciml.training import TrainSettings, fit, make_optimizer, read_metrics
from solvers import darcy


# %% [markdown]
# ## Data
#
# `solvers.darcy` draws $a$ from a thresholded Gaussian random field (values 12
# and 3, the FNO benchmark) and solves with second-order finite differences
# on $s$ nodes per side, boundary included. The grid with $2s-1$ nodes nests
# the $s$ grid and carries the same random functions, so it is the test set for
# zero-shot super-resolution. Inputs are standardised; outputs are divided by
# their standard deviation (relative errors do not see the scale).

# %%
s, n_train, n_test = 33, 400, 50
train = darcy.make_dataset(n_train, s, seed=0)
test = darcy.make_dataset(n_test, s, seed=1)
test_2x = darcy.make_dataset(n_test, 2 * s - 1, seed=1)

a_mean, a_std = train["inputs"].mean(), train["inputs"].std()
u_std = train["outputs"].std()


def prepare(data):
    """`(n, 1, s, s)` float32 arrays: standardised inputs, scaled outputs."""
    x = (data["inputs"] - a_mean) / a_std
    y = data["outputs"] / u_std
    return jnp.asarray(x[:, None], jnp.float32), jnp.asarray(y[:, None], jnp.float32)


x_train, y_train = prepare(train)
x_test, y_test = prepare(test)
x_test_2x, y_test_2x = prepare(test_2x)
print(x_train.shape, x_test_2x.shape)

fig, axes = plt.subplots(1, 2, figsize=(7, 3.2))
axes[0].imshow(train["inputs"][0].T, origin="lower", cmap="viridis")
axes[0].set_title("coefficient a")
axes[1].imshow(train["outputs"][0].T, origin="lower", cmap="RdBu_r")
axes[1].set_title("pressure u")
for ax in axes:
    ax.set_xticks([])
    ax.set_yticks([])
plt.tight_layout()

# %% [markdown]
# ## Models
#
# Constructor arguments follow `neuraloperator`: `n_modes` is the number of
# Fourier modes kept per axis (on the last, real-FFT axis `n_modes[-1]//2 + 1`
# are stored), `rank=0.05` asks for a Tucker tensor with 5% of the dense
# weight's parameters. Every module takes one sample `(channels, *grid)`;
# batches go through `jax.vmap`.

# %%
key_fno, key_tfno = jax.random.split(jax.random.key(0))
common = dict(
    n_modes=(12, 12), in_channels=1, out_channels=1, hidden_channels=24, n_layers=4
)
fno = FNO(**common, key=key_fno)
tfno = TFNO(**common, rank=0.05, key=key_tfno)


def n_params(model):
    leaves = jax.tree_util.tree_leaves(eqx.filter(model, eqx.is_inexact_array))
    return sum(x.size for x in leaves)


print(f"FNO:  {n_params(fno):>8,} parameters")
ratio = n_params(fno) / n_params(tfno)
print(f"TFNO: {n_params(tfno):>8,} parameters ({ratio:.1f}x fewer)")

# %% [markdown]
# ## Training
#
# The loss is the relative $H^1$ error (non-periodic finite differences with
# the grid spacing $h = 1/(s-1)$), the recipe of the FNO papers; we report the
# relative $L^2$ error too. Weights are real arrays (complex spectral weights
# are stored as real/imaginary pairs), so any optax optimiser updates them the
# usual way. Training is `sciml.training.fit`, as in every tutorial: the loss
# takes `(model, batch, key)` and returns `(loss, aux)`, the batch of step `t`
# is drawn from a key, and the logged losses are read back from the run
# directory's `metrics.jsonl`.

# %%
h = 1 / (s - 1)


def loss_fn(model, batch, key):
    x, y = batch
    pred = jax.vmap(model)(x)
    return h1_loss(
        pred, y, d=2, periodic=False, domain_length=s * h, reduction="mean"
    ), {}


@jax.jit
def batch_fn(step, key):
    index = jax.random.randint(key, (16,), 0, n_train)
    return x_train[index], y_train[index]


def train_model(model, steps=400, seed=0):
    optimizer = make_optimizer(
        {
            "name": "adamw",
            "learning_rate": 3e-3,
            "weight_decay": 1e-4,
            "schedule": "cosine",
            "decay_steps": steps,
            "warmup_steps": 0,
            "end_factor": 0.0,
        }
    )
    workdir = Path(tempfile.mkdtemp())
    result = fit(
        model,
        loss_fn,
        batch_fn,
        optimizer=optimizer,
        key=jax.random.key(seed),
        settings=TrainSettings(
            steps=steps, workdir=workdir, log_every=10, progress=False
        ),
    )
    train = [
        m for m in read_metrics(workdir / "metrics.jsonl") if m["split"] == "train"
    ]
    return result.model, [m["step"] for m in train], [m["loss"] for m in train]


fno, fno_steps, fno_losses = train_model(fno)
tfno, tfno_steps, tfno_losses = train_model(tfno)

plt.figure(figsize=(5, 3.2))
plt.semilogy(fno_steps, fno_losses, label="FNO")
plt.semilogy(tfno_steps, tfno_losses, label="TFNO (Tucker 5%)")
plt.xlabel("step")
plt.ylabel("relative H1 loss")
plt.legend()
plt.tight_layout()

# %% [markdown]
# ## Evaluation, and zero-shot at twice the resolution
#
# The spectral weights act on Fourier coefficients (`rfftn(norm="forward")`),
# so the same model applies to any grid: on the $2s-1$ grid it sees more
# points of the same functions. The grid embedding (node coordinates in
# $[0, 1)$) and $h$ change with the grid.


# %%
def errors(model, x, y, s):
    pred = jax.lax.map(model, x, batch_size=10)
    l2 = relative_lp_loss(pred, y, d=2, reduction="mean")
    h1 = h1_loss(
        pred, y, d=2, periodic=False, domain_length=s / (s - 1), reduction="mean"
    )
    return float(l2), float(h1)


for name, model in (("FNO", fno), ("TFNO", tfno)):
    l2, h1 = errors(model, x_test, y_test, s)
    l2_2x, h1_2x = errors(model, x_test_2x, y_test_2x, 2 * s - 1)
    print(
        f"{name:5s} {s}²: L2 {100 * l2:5.2f}%  H1 {100 * h1:5.2f}%   "
        f"{2 * s - 1}² (zero-shot): L2 {100 * l2_2x:5.2f}%  H1 {100 * h1_2x:5.2f}%"
    )

# %%
pred = np.asarray(tfno(x_test_2x[0]))[0] * u_std
truth = np.asarray(y_test_2x[0, 0]) * u_std
fig, axes = plt.subplots(1, 3, figsize=(10, 3.2))
for ax, field, title in zip(
    axes,
    (truth, pred, np.abs(pred - truth)),
    ("truth (65²)", "TFNO, zero-shot", "|error|"),
):
    im = ax.imshow(
        field.T, origin="lower", cmap="magma" if title == "|error|" else "RdBu_r"
    )
    ax.set_title(title)
    ax.set_xticks([])
    ax.set_yticks([])
    fig.colorbar(im, ax=ax, fraction=0.046)
plt.tight_layout()

# %% [markdown]
# At this size (400 training fields, 400 steps) the dense model is somewhat
# more accurate than the TFNO with its 14.6x fewer parameters (compare the
# two lines printed above: a few per cent relative $L^2$ error each); the
# factorisation pays off as width and mode counts grow, since the dense
# weight grows as $C^2 m^2$. The zero-shot error on the finer grid is much
# larger in $H^1$ than in $L^2$: the thresholded coefficient has jumps, and the
# finer grid resolves steeper pressure gradients at the jumps than the model
# saw in training.
