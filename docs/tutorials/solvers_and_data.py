# %% [markdown]
# # Numerical solvers and data sets
#
# `solvers/` holds the classical PDE solvers that produce training data, ground
# truth and baselines for the models in `sciml`. This page (executed when the
# docs are built) generates a small Navier–Stokes and a Darcy data set, plots
# samples, steps the Navier–Stokes stepper module through the exact Taylor–Green
# decay and streams a run chunk by chunk, writes a resumable HDF5 file, and
# builds a voxel Poisson system.
#
# Large data sets come from the command line, e.g.
#
# ```bash
# python -m solvers.generate navier_stokes --n 1000 --resolution 64 \
#     --out data/ns.h5
# python -m solvers.generate darcy --n 1000 --resolution 65 --out data/darcy.h5
# ```

# %%
import tempfile
from pathlib import Path

import h5py
import jax
import jax.numpy as jnp
import matplotlib.pyplot as plt
import numpy as np

from sciml.data import Batches, Normalizer, read_dataset, train_test_split
from solvers import darcy, generate, navier_stokes as ns, poisson
from solvers.stepping import record, repeat, rollout


jax.config.update("jax_enable_x64", True)

# %% [markdown]
# ## Navier–Stokes
#
# Vorticity form on the periodic unit square, pseudo-spectral with 2/3
# dealiasing, Crank–Nicolson + Heun in time, FNO forcing
# $0.1(\sin 2\pi(x+y) + \cos 2\pi(x+y))$, initial vorticity from the Gaussian
# random field $7^{3/2}(-\Delta + 49I)^{-2.5}$. `make_dataset` returns the
# initial fields and the vorticity at the record times; sample $i$ depends only
# on `(seed, i)`.

# %%
data = ns.make_dataset(
    4, 64, seed=0, viscosity=1e-3, t_final=4.0, record_every=1.0, dt=2e-3
)
print({k: v.shape for k, v in data.items()})

fig, axes = plt.subplots(2, 5, figsize=(13, 5.2))
for row in range(2):
    fields = [data["inputs"][row], *data["outputs"][row]]
    titles = ["t = 0"] + [f"t = {t:g}" for t in data["times"]]
    for ax, field, title in zip(axes[row], fields, titles):
        ax.imshow(field.T, origin="lower", cmap="RdBu_r", extent=(0, 1, 0, 1))
        ax.set_title(title)
        ax.set_xticks([])
        ax.set_yticks([])
fig.suptitle("Vorticity, two samples, ν = 1e-3")
plt.tight_layout()

# %% [markdown]
# The grids nest: the grid at resolution $s$ is every second point of the grid
# at $2s$, and the random initial field is the same function at every
# resolution, so subsampling a fine sample gives the coarse one up to the
# coarse grid's discretisation error (useful for zero-shot super-resolution).

# %%
fine = ns.make_dataset(
    1, 128, seed=0, viscosity=1e-3, t_final=4.0, record_every=1.0, dt=2e-3
)
diff = np.abs(fine["outputs"][0, -1, ::2, ::2] - data["outputs"][0, -1]).max()
field_max = np.abs(data["outputs"][0, -1]).max()
print(f"max |fine[::2, ::2] - coarse| at t = 4: {diff:.2e} (field max {field_max:.2f})")

# %% [markdown]
# ### The stepper module and the time loop
#
# The solver itself is a one-sample stepper, an Equinox module:
# `ns.NavierStokes(s, viscosity=..., dt=...)` maps one field
# `(channels, s, s) = (1, s, s)` to the field one step `dt` later. Trajectories
# come from `solvers.stepping`: `rollout(stepper, n)` (every step, by
# `lax.scan`), `repeat(stepper, n)` (a stepper making `n` steps per call, by
# `lax.fori_loop`) and `record(stepper, u0, times)` (the fields at given
# multiples of `dt`). The library never jits; batches are `jax.vmap`, compilation
# is the caller's `jax.jit`. (`make_dataset` above is a batched convenience over
# `record`.)
#
# ### Taylor–Green decay
#
# Without forcing, $\omega = \sin(2\pi kx)\sin(2\pi ky)$ is an exact solution:
# the nonlinear term vanishes and the vorticity decays as
# $e^{-8\pi^2k^2\nu t}$. The solver's only error here is the $O(dt^2)$ of
# Crank–Nicolson (about $10^{-8}$ with these settings; the test suite checks
# $10^{-11}$ with a smaller step). Here the trajectory is a rollout of the
# 50-step stepper `repeat(stepper, 50)`, one field every 0.05.

# %%
nu = 1e-2
stepper = ns.NavierStokes(32, viscosity=nu, dt=1e-3, forcing="none")
w0 = ns.taylor_green(32, k=1)[None]  # (channels, s, s)
out = np.asarray(jax.jit(rollout(repeat(stepper, 50), 40, include_init=True))(w0))[:, 0]
times = 0.05 * np.arange(41)
amplitude = out[:, 8, 8] / np.asarray(w0)[0, 8, 8]
exact = np.exp(-8 * np.pi**2 * nu * times)
print(f"max deviation from exp(-8π²νt): {np.abs(amplitude - exact).max():.1e}")

fig, ax = plt.subplots(figsize=(5, 3.5))
ax.plot(times, exact, "k-", label="exact $e^{-8\\pi^2\\nu t}$")
ax.plot(times, amplitude, "o", ms=4, label="solver")
ax.set_xlabel("t")
ax.set_ylabel("amplitude")
ax.set_yscale("log")
ax.legend()
plt.tight_layout()

# %% [markdown]
# ### Batches and streaming
#
# A batch is `jax.vmap` of the one-sample function. Streaming a long run chunk by
# chunk, as an online-training client does between saved snapshots, is
# `repeat`: four calls of a 25-step chunk equal one `record` at 100 steps, up to
# one FFT round trip of rounding per chunk.

# %%
forced = ns.NavierStokes(64, viscosity=1e-3, dt=2e-3)
batch = data["inputs"][:, None]  # (batch, channels, s, s)
chunk = jax.jit(jax.vmap(repeat(forced, 25)))
w = batch
for _ in range(4):
    w = chunk(w)
direct = jax.jit(jax.vmap(lambda u: record(forced, u, [0.2])))(batch)[:, 0]
print(f"chunked vs direct after 100 steps: {np.abs(w - direct).max():.1e}")

# %% [markdown]
# ## Darcy flow
#
# $-\nabla\cdot(a\nabla u) = 1$ with $u = 0$ on the boundary; $a$ is 12 or 3
# from a thresholded Gaussian field $(-\Delta + 9I)^{-2}$. Finite differences
# with harmonic-mean face coefficients on the node grid $x_i = i/(s-1)$
# (boundary included, so $s_\text{fine} = 2s_\text{coarse} - 1$ nests), sparse
# direct solve.

# %%
dset = darcy.make_dataset(3, 65, seed=0)
fig, axes = plt.subplots(2, 3, figsize=(10, 6.5))
for i in range(3):
    axes[0, i].imshow(
        dset["inputs"][i].T, origin="lower", cmap="viridis", extent=(0, 1, 0, 1)
    )
    axes[0, i].set_title(f"a, sample {i}")
    im = axes[1, i].imshow(
        dset["outputs"][i].T, origin="lower", cmap="magma", extent=(0, 1, 0, 1)
    )
    axes[1, i].set_title(f"u, sample {i}")
    plt.colorbar(im, ax=axes[1, i], shrink=0.8)
for ax in axes.ravel():
    ax.set_xticks([])
    ax.set_yticks([])
plt.tight_layout()

# %% [markdown]
# With $a \equiv 1$ the centre value matches the series solution 0.07367.

# %%
print(f"u(1/2, 1/2) with a = 1: {darcy.solve(np.ones((129, 129)))[64, 64]:.5f}")

# %% [markdown]
# ## HDF5 data sets
#
# `solvers.generate` writes the same arrays to HDF5, with a channel axis on
# every field, and describes the file in its attributes: each physical
# parameter on its own, the axis order, channel names and units of each array,
# the grid convention, the numerical scheme, the package version and the
# creation time. It writes chunk by chunk and marks each finished sample, so a
# run that is interrupted (Ctrl-C, SIGTERM) keeps its finished samples and
# completes the missing ones when re-run with the same command; a file from
# another problem or other settings is refused.

# %%
workdir = Path(tempfile.mkdtemp())
path = generate.generate(
    "darcy", 8, 33, workdir / "darcy.h5", seed=1, chunk=4, progress=False
)
with h5py.File(path) as f:
    print({k: f[k].shape for k in f})
    print(
        "axes of outputs:", f["outputs"].attrs["axes"], "| a_high =", f.attrs["a_high"]
    )
    print("grid:", f.attrs["grid"])
try:
    generate.generate("heat", 8, 33, path, progress=False)
except ValueError as error:
    print("refused:", error)

# %% [markdown]
# ### Reading it back with `sciml.data`
#
# The library reads the format (it never imports `solvers`):
# [`read_dataset`](../api/data.html) keeps the finished samples only, here after
# pretending that sample 5 was interrupted; `train_test_split` splits by the
# index in the file, so the split does not move while a file is being
# completed; `Normalizer` standardises per channel and inverts; `Batches` draws
# seeded mini-batches, a pure function of `(seed, step)`.

# %%
with h5py.File(path, "r+") as f:
    f["done"][5] = False  # as if the run had stopped before sample 5 was written
ds = read_dataset(path)
train, test = train_test_split(ds, 6)
print(
    "finished samples:", ds.indices, "| train:", train.indices, "| test:", test.indices
)
print(
    "fields:", ds.fields["inputs"], ds.fields["outputs"], "| axes:", ds.axes["inputs"]
)

norm = Normalizer.fit(train["inputs"], channel_axis=train.channel_axis("inputs"))
z = norm(train["inputs"])
print(
    f"normalised mean {float(z.mean()):.1e}, std {float(z.std()):.3f}, "
    f"round trip error {float(np.abs(norm.inverse(z) - train['inputs']).max()):.1e}"
)
batches = Batches(train, batch_size=2, seed=0)
print(
    "batches per epoch:",
    len(batches),
    "| first batch:",
    {k: v.shape for k, v in batches.at(0).items()},
)

# %% [markdown]
# ## Voxel Poisson systems
#
# For DCDM: a random scene of fluid, solid obstacles and air above a free
# surface; the Poisson matrix as CSR and as a matrix-free JAX operator (equal
# to round-off); a right-hand side in the range of the matrix and its solution.

# %%
labels = poisson.make_scene(64, dim=2, seed=3, n_obstacles=4, free_surface=True)
matrix = poisson.assemble(labels)
op = poisson.PoissonOperator(labels)
b = poisson.random_rhs(labels, seed=0)
x = poisson.solve(labels, b)
matrix_free = np.asarray(op(jnp.asarray(x)))
print(f"{int((labels == poisson.FLUID).sum())} fluid cells, nnz = {matrix.nnz}")
print(
    f"|A x - b| = {np.abs(matrix_free - b).max():.1e} (matrix-free), "
    f"{np.abs((matrix @ x.ravel()).reshape(labels.shape) - b).max():.1e} (CSR)"
)

fig, axes = plt.subplots(1, 3, figsize=(12, 3.8))
axes[0].imshow(labels.T, origin="lower", cmap="Set2")
axes[0].set_title("labels: fluid / solid / air")
axes[1].imshow(b.T, origin="lower", cmap="RdBu_r")
axes[1].set_title("right-hand side b")
axes[2].imshow(
    np.where(labels == poisson.FLUID, x, np.nan).T, origin="lower", cmap="viridis"
)
axes[2].set_title("pressure x")
for ax in axes:
    ax.set_xticks([])
    ax.set_yticks([])
plt.tight_layout()
