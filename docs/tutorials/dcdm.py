# %% [markdown]
# # A learned Poisson solver: the deep conjugate direction method
#
# The pressure-Poisson equation of a fluid simulation is a large sparse SPD
# system `A x = b` on a voxel grid, with obstacles (SOLID cells, zero flux)
# and a free surface (AIR cells, `p = 0`). Conjugate gradients needs more
# iterations the finer the grid. DCDM (Kaneda et al., ICML 2023) keeps the
# structure of CG (A-orthogonal directions, exact line search) but asks a
# small convolutional network for each search direction: ideally
# `f(r) ∝ A⁻¹ r`, which would solve the system in one step.
#
# This page first solves a new scene with the generator that ships with the
# package (no training), then shows how such a network is trained: the
# paper's network and loss, the symmetric `NᵀN` generators, and the A-norm
# loss the shipped one was trained with, compared with CG and with CG
# preconditioned by algebraic multigrid, all through the same
# `sciml.dcdm.solve`.

# %%
import tempfile
from pathlib import Path

import jax


jax.config.update(
    "jax_enable_x64", True
)  # float64 outer loop (the network runs in float32)

import jax.numpy as jnp
import matplotlib.pyplot as plt
import numpy as np

from sciml import dcdm
from sciml.training import TrainSettings, fit, make_optimizer, read_metrics
from solvers.poisson import (
    FLUID,
    PoissonOperator,
    assemble,
    make_scene,
    random_rhs,
    solve as direct_solve,
)


# %% [markdown]
# ## Solve a new scene with the shipped generator
#
# `dcdm.pretrained("poisson2d")` is a multilevel `NᵀN` generator trained once
# on a 64² scene and fine-tuned on a 128² one; being fully convolutional it
# serves any grid size. Here a
# scene it never saw, at 128²: three lines. The settings of the iteration
# (tolerance, step cap, how many earlier directions each new one is made
# A-orthogonal to) are a `dcdm.DCDM` module, built and checked once, the only
# way to give them to `solve`.

# %%
scene = make_scene(128, seed=7, n_obstacles=4, free_surface=True)
b = jnp.asarray(random_rhs(scene, seed=0, kind="smooth"))

f = dcdm.direction_fn(
    dcdm.pretrained("poisson2d"), jnp.asarray(scene == FLUID, jnp.float32)
)
sol = dcdm.solve(PoissonOperator(scene), b, f, dcdm.DCDM(rtol=1e-6, max_steps=1000))
print("pretrained DCDM:", int(sol.stats["num_steps"]), "iterations")

ic0 = dcdm.IncompleteCholesky().build(assemble(scene), scene.shape)
ic0_sol = dcdm.solve(
    PoissonOperator(scene), b, ic0, dcdm.DCDM(rtol=1e-6, max_steps=2000)
)
print("IC(0)-PCG:", int(ic0_sol.stats["num_steps"]), "iterations")

# %% [markdown]
# For 3-D scenes, `dcdm.pretrained("poisson3d")` is the same kind of generator
# (3×3×3 convolutions), trained like the reference code on one empty closed
# box; it is used in exactly the same way on `(n, n, n)` label grids (its
# counts against IC(0) and MIC(0) are on the benchmarks page).
#
# The rest of this page shows how such a generator is trained, on a smaller
# scene so that it runs in a minute or two.


# %% [markdown]
# ## A scene
#
# A tank with three obstacles and air above a wavy surface. `assemble` gives
# the matrix as CSR (for the classical preconditioners); `PoissonOperator`
# applies the same matrix without forming it (for everything in JAX).

# %%
labels = make_scene(32, seed=0, n_obstacles=3, free_surface=True)
op = PoissonOperator(labels)
matrix = assemble(labels)

fig, ax = plt.subplots(figsize=(3.2, 3.2))
ax.imshow(labels.T, origin="lower", cmap="viridis")
ax.set(title="training scene: fluid / solid / air", xticks=[], yticks=[])
plt.show()

# %% [markdown]
# ## Training data: Ritz vectors
#
# Lanczos (started in the range of `A`, fully
# reorthogonalised) gives Ritz vectors of the training matrix; right-hand
# sides are random combinations of them with 9 times larger weights on the
# smooth end of the spectrum, the part CG resolves last. The paper's loss
# needs no solutions; the A-norm loss used further down needs `x* = A⁻¹ b`
# for each right-hand side, one sparse direct solve each (`solve_A`). The set
# is cached in HDF5, keyed by the scene and the settings.

# %%
workdir = Path(tempfile.mkdtemp())
data = dcdm.ritz_dataset(
    workdir / "ritz.h5",
    lambda x: (matrix @ x.ravel()).reshape(labels.shape),
    labels,
    n_rhs=512,
    n_ritz=200,
    solve_A=lambda b: direct_solve(labels, b),  # x* = A⁻¹ b, for the A-norm loss below
)
rhs = jnp.asarray(data["rhs"], jnp.float32)
print(rhs.shape, "Ritz values in", data["ritz_values"][[0, -1]])

# %% [markdown]
# ## The network and the scale-free loss
#
# A fully convolutional network with one pooling level; besides the residual
# it sees the cell labels. The loss is the residual left by one DCDM step,
# `‖b − α* A f(b)‖²` with the optimal step `α* = fᵀb / fᵀAf`, so only the
# direction of `f(b)` matters.

# %%
net = dcdm.DCDMNet(2, pairs=(1, 1, 1), label_channels=True, key=jax.random.key(0))
fluid = jnp.asarray(labels == FLUID, jnp.float32)
onehot = dcdm.label_channels(labels)


def loss_fn(model, batch, key):
    return dcdm.dcdm_loss(dcdm.direction_fn(model, fluid, onehot), op, batch), {}


@jax.jit
def batch_fn(step, key):
    return rhs[jax.random.randint(key, (8,), 0, rhs.shape[0])]


optimizer = make_optimizer(
    {"learning_rate": 2e-3, "schedule": "cosine", "decay_steps": 300}
)


def train(model, loss_fn, batches, name):
    """300 Adam steps (cosine schedule), logged under `workdir / name`."""
    return fit(
        model,
        loss_fn,
        batches,
        optimizer=optimizer,
        key=jax.random.key(1),
        settings=TrainSettings(
            steps=300, workdir=workdir / name, log_every=25, progress=False
        ),
    )


result = train(net, loss_fn, batch_fn, "train")
metrics = [
    m
    for m in read_metrics(workdir / "train" / "metrics.jsonl")
    if m["split"] == "train"
]
plt.figure(figsize=(4, 2.8))
plt.semilogy([m["step"] for m in metrics], [m["loss"] for m in metrics])
plt.xlabel("step")
plt.ylabel("scale-free loss")
plt.show()

# %% [markdown]
# ## A symmetric, linear direction
#
# The paper's network is nonlinear in the residual, so DCDM with it is not a
# preconditioned CG: the error components one step removes can come back at
# the next. `SymmetricDCDMNet` keeps the architecture and the loss but makes
# the direction `f(r) = NᵀN r` with `N` linear (no biases, no activations):
# a symmetric positive semi-definite preconditioner, learned, with which
# DCDM *is* PCG. It cannot see the labels (they would enter additively), only
# the fluid mask. Same data, same loss, same number of steps:


# %%
def mask_only_loss(model, batch, key):
    """The loss of a generator that sees only the fluid mask: the paper's for
    a batch `(b,)`, the A-norm loss for `(b, x*)`."""
    return dcdm.dcdm_loss(dcdm.direction_fn(model, fluid), op, *batch), {}


symmetric = train(
    dcdm.SymmetricDCDMNet(2, pairs=(1, 1, 1), key=jax.random.key(0)),
    mask_only_loss,
    lambda step, key: (batch_fn(step, key),),
    "train_symmetric",
)
print("last logged training loss:", symmetric.metrics["loss"])

# %% [markdown]
# ## The multilevel generator and the A-norm loss
#
# The paper's loss is the A²-norm of the error after one step; the iteration
# reduces the A-norm, where the smooth modes that set the iteration count
# weigh most. The A-norm loss `1 − (qᵀb)²/((qᵀAq)(bᵀx*))` scores exactly
# that, given the solutions `x*` of the training right-hand sides (one sparse
# direct solve each, cached beside the Ritz data). `MultilevelDCDMNet` is
# `NᵀN` with `N` a linear V-cycle whose depth follows the grid, so it reaches
# across the whole domain. This is how the shipped generator was trained
# (there: 1,500 steps on a 64² scene, then 300 on a 128² one; the commands
# are in the docstring of `dcdm.pretrained`); here a short run on the small
# scene:

# %%
x_star = jnp.asarray(data["solutions"], jnp.float32)


@jax.jit
def batch_with_solutions(step, key):
    i = jax.random.randint(key, (8,), 0, rhs.shape[0])
    return rhs[i], x_star[i]


multilevel = train(
    dcdm.MultilevelDCDMNet(2, width=8, key=jax.random.key(0)),
    mask_only_loss,
    batch_with_solutions,
    "train_multilevel",
)
print("last logged A-norm loss:", multilevel.metrics["loss"])

# %% [markdown]
# ## Solving a held-out scene on a finer grid
#
# Other obstacles, twice the resolution: the convolutional network applies
# unchanged. The outer iteration runs in float64, the network in float32.
# Every method stops at the same relative residual `1e-6`; the classical
# ones pass their preconditioner (`M = I` for CG, one AMG V-cycle) as the
# direction generator of the same `solve`.

# %%
test = make_scene(64, seed=11, n_obstacles=3, free_surface=True)
test_op = PoissonOperator(test)
b = jnp.asarray(random_rhs(test, seed=0, kind="smooth"))
methods = {
    "DCDM": dcdm.direction_fn(
        result.model, jnp.asarray(test == FLUID, jnp.float32), dcdm.label_channels(test)
    ),
    "DCDM, NᵀN": dcdm.direction_fn(
        symmetric.model, jnp.asarray(test == FLUID, jnp.float32)
    ),
    "DCDM, multilevel, A-norm": dcdm.direction_fn(
        multilevel.model, jnp.asarray(test == FLUID, jnp.float32)
    ),
    "CG": dcdm.Identity().build(assemble(test), test.shape),
    "AMG-PCG": dcdm.SmoothedAggregationAMG().build(assemble(test), test.shape),
}
solver = dcdm.DCDM(rtol=1e-6, max_steps=600)  # one set of settings for every method
plt.figure(figsize=(5, 3.4))
for name, direction in methods.items():
    sol = dcdm.solve(test_op, b, direction, solver, throw=False)
    h = np.asarray(sol.stats["residual_history"])
    plt.semilogy(h / h[0], label=f"{name} ({int(sol.stats['num_steps'])} it.)")
    print(name, int(sol.stats["num_steps"]), "iterations")
plt.axhline(1e-6, color="0.5", ls=":")
plt.xlabel("iteration")
plt.ylabel("‖r‖ / ‖b‖")
plt.legend()
plt.show()

# %% [markdown]
# Be honest about what this shows. The paper's nonlinear network, trained
# for a minute on one small scene, needs *more* iterations than CG on the
# finer held-out grid (the counts are printed above). Its one-step loss is
# as low as an AMG V-cycle's after longer training, but with a nonlinear
# direction generator and only two A-orthogonal predecessors
# DCDM loses CG's global optimality: what one step removes comes back. The
# symmetric linear `NᵀN`, trained on the same data for the same steps, is a
# preconditioner, so its gains compound: well under half of CG's count.
# AMG-PCG needs a handful of iterations and its count stays nearly flat as
# the grid grows; that is the bar for a learned solver (and, on a CPU, also
# on time, since each DCDM iteration costs a network evaluation, two for
# `NᵀN`). The experiment configs `dcdm_poisson2d` / `dcdm_poisson3d` and
# `benchmarks/dcdm.py` make the comparison with longer training, with IC(0),
# MIC(0) and Jacobi as well. The multilevel generator trained with the A-norm
# loss reaches across the whole grid and weighs the error the iteration
# reduces: the fewest iterations of the three here after the same 300 steps.
# It is the one that beats IC(0)-PCG on held-out scenes at every measured
# size (the benchmarks page has the tables).
