# %% [markdown]
# # Newton-parallel RNNs (ParaRNN)
#
# A recurrent network computes $h_t = f(h_{t-1}, x_t)$ one step after the
# other. `sciml.pararnn` can instead solve for the whole trajectory at once:
# the states are the root of the residual $R_t = h_t - f(h_{t-1}, x_t)$, and
# each Newton step is a *linear* recurrence $\delta_t = J_t \delta_{t-1} - R_t$
# with $J_t = \partial f / \partial h$, which a parallel scan solves in
# $O(\log T)$ depth. Gradients come from one reverse linear recurrence at the
# solution (implicit-function theorem), never by differentiating the Newton
# iterations.
#
# The cost of a Newton step depends on the structure of $J_t$: the ParaRNN
# cells (`ParaGRU`, `ParaLSTM`) are designed so that it is diagonal or made of
# $2 \times 2$ blocks of diagonals. This page writes a cell of its own,
# declares its structure, checks it, trains it in Newton mode and reads the
# solver's diagnostics.

# %%
import functools
import tempfile
from typing import ClassVar

import equinox as eqx
import jax
import jax.numpy as jnp
import matplotlib.pyplot as plt

from sciml.pararnn import (
    RNN,
    AbstractCell,
    Auto,
    DampedNewton,
    Diagonal,
    Fallback,
    Newton,
    RNNModel,
    Sequential,
    check_structure,
    sequential_solve,
    solve_recurrence,
)
from sciml.training import TrainSettings, fit, make_optimizer, read_metrics


# %% [markdown]
# ## A cell of our own
#
# A leaky recurrent unit with a learned per-unit leak
# $\lambda = \sigma(c)$ and diagonal recurrent weights $a$:
# $$h' = \lambda \odot h + (1 - \lambda) \odot \tanh(a \odot h + W x + b).$$
# Every unit only sees its own previous value, so $\partial h'/\partial h$ is
# diagonal. A cell subclasses `AbstractCell`: `project` holds the input-only
# work (computed for all steps at once, outside the recurrence), `step` the
# recurrence, and the class attribute `structure` declares the Jacobian.


# %%
class LeakyCell(AbstractCell):
    structure: ClassVar[Diagonal] = Diagonal()
    a: jax.Array
    c: jax.Array
    W: jax.Array
    b: jax.Array
    input_size: int = eqx.field(static=True)
    hidden_size: int = eqx.field(static=True)

    def __init__(self, input_size, hidden_size, *, key):
        k1, k2 = jax.random.split(key)
        self.a = jax.random.uniform(k1, (hidden_size,), minval=-0.9, maxval=0.9)
        self.c = jnp.linspace(0.0, 4.0, hidden_size)  # leaks from 0.5 to 0.98
        self.W = jax.random.normal(k2, (hidden_size, input_size)) / jnp.sqrt(input_size)
        self.b = jnp.zeros(hidden_size)
        self.input_size, self.hidden_size = input_size, hidden_size

    def project(self, xs):
        return xs @ self.W.T + self.b

    def step(self, h, u):
        leak = jax.nn.sigmoid(self.c)
        return leak * h + (1 - leak) * jnp.tanh(self.a * h + u)


cell = LeakyCell(1, 16, key=jax.random.key(0))

# %% [markdown]
# The Newton solver computes a diagonal Jacobian with a single JVP (an all-ones
# tangent). That trick is only right if the Jacobian really is diagonal, so
# check the declaration against `jax.jacfwd` at random states:

# %%
hs = jax.random.normal(jax.random.key(1), (8, 16))
us = cell.project(jax.random.normal(jax.random.key(2), (8, 1)))
print(
    "largest entry outside the declared structure:",
    check_structure(cell.step, hs, us, Diagonal()),
)

# %% [markdown]
# A cell that mixes its units (here a dense matrix) but claims to be diagonal is
# caught:

# %%
mix = jax.random.normal(jax.random.key(3), (16, 16)) / 4


def lying_step(h, u):
    return jnp.tanh(mix @ h + u)


try:
    check_structure(lying_step, hs, us, Diagonal())
except ValueError as error:
    print(error)

# %% [markdown]
# ## Newton evaluation equals the sequential one
#
# `solve_recurrence(fn, h0, xs, solver)` takes any pure function `fn(h, x)`
# and a solver module; the default is `Fallback(Newton(), Sequential())`. It
# returns a `Solution`: the states, a result (`successful` here) and stats: the
# number of Newton iterations, the final residual $\max_t |R_t|$, whether it
# converged, whether the fallback ran. The structure comes from the cell
# (`cell.step` is a method of a cell that declares `Diagonal()`).

# %%
xs = jax.random.normal(jax.random.key(4), (1000, 1))
us = cell.project(xs)
h0 = jnp.zeros(16)
solution = jax.jit(
    lambda us: solve_recurrence(cell.step, h0, us, Fallback(Newton(), Sequential()))
)(us)
sequential_states = jax.jit(lambda us: sequential_solve(cell.step, h0, us))(us)
print(solution)
print(
    "max |newton - sequential|:",
    float(jnp.max(jnp.abs(solution.value - sequential_states))),
)

# %% [markdown]
# ## Training in Newton mode
#
# The `RNN` layer runs a cell with any solver: `Sequential()`,
# `Fallback(Newton(), Sequential())`, or `Auto()` (the default); all use the
# same parameters. `RNNModel` stacks residual
# blocks (layer norm, RNN, layer norm, MLP) and accepts our cell through a
# factory. The task: from white noise $x_t$, predict
# $y_t = \tanh(3 m_t)$ where $m_t$ is the exponential moving average
# $m_t = 0.95\, m_{t-1} + 0.05\, x_t$: a nonlinear readout of a memory of
# about 20 steps.

# %%
length, batch = 256, 16


def make_batch(key):
    x = jax.random.normal(key, (batch, length, 1))

    def ema(m, x_t):
        m = 0.95 * m + 0.05 * x_t
        return m, m

    _, m = jax.lax.scan(ema, jnp.zeros((batch, 1)), jnp.swapaxes(x, 0, 1))
    return x, jnp.tanh(3 * jnp.swapaxes(m, 0, 1))


model = RNNModel(
    1,
    1,
    16,
    1,
    cell=lambda width, key: LeakyCell(width, width, key=key),
    solver=Fallback(Newton(), Sequential()),
    key=jax.random.key(5),
)


def loss_fn(model, batch, key):
    x, y = batch
    return jnp.mean((jax.vmap(model)(x) - y) ** 2), {}


workdir = tempfile.mkdtemp()
result = fit(
    model,
    loss_fn,
    lambda step, key: make_batch(key),
    optimizer=make_optimizer({"learning_rate": 3e-3, "clip_norm": 1.0}),
    key=jax.random.key(6),
    settings=TrainSettings(steps=200, workdir=workdir, log_every=10, progress=False),
)
curve = [m for m in read_metrics(f"{workdir}/metrics.jsonl") if m["split"] == "train"]
fig, ax = plt.subplots(figsize=(5, 3))
ax.semilogy([m["step"] for m in curve], [m["loss"] for m in curve])
ax.set(xlabel="step", ylabel="training MSE", title="LeakyCell, Newton mode")
fig.tight_layout()

# %% [markdown]
# The gradients used above came from the implicit-function backward pass.
# They equal the gradients of the sequential model, which differentiates
# through the `lax.scan`:

# %%
batch_ = make_batch(jax.random.key(7))
solvers = {"newton": Fallback(Newton(), Sequential()), "sequential": Sequential()}
grads = {
    mode: eqx.filter_jit(eqx.filter_grad(lambda m, b: loss_fn(m, b, None)[0]))(
        result.model.with_solver(solver), batch_
    )
    for mode, solver in solvers.items()
}
leaves = [jax.tree_util.tree_leaves(grads[mode]) for mode in ("newton", "sequential")]
print(
    "max gradient difference:",
    max(float(jnp.max(jnp.abs(a - b))) for a, b in zip(*leaves)),
)

# %% [markdown]
# `RNNModel.solve` also returns each layer's `Solution`. After training, the
# trained cell still converges in a few iterations:

# %%
_, layer_diagnostics = eqx.filter_jit(lambda m, x: jax.vmap(m.solve)(x))(
    result.model, batch_[0]
)
d = layer_diagnostics[0].stats
print("iterations per sequence:", d["iterations"])
print(
    "largest residual:",
    float(jnp.max(d["residual"])),
    " fallbacks:",
    int(jnp.sum(d["fallback"])),
)

# %% [markdown]
# ## When Newton does not converge
#
# Newton converges fast when the recurrence is contractive ($|J_t| \lesssim 1$).
# Scale the recurrent weights up and it stalls: after `max_steps` iterations the
# solver reports it, and the backup of `Fallback` gives the answer:
# `Sequential()` evaluates with `lax.scan`; `DampedNewton()` takes
# Levenberg–Marquardt steps by a parallel Kalman filter, as in ELK, which do
# converge but, for a recurrence this far from contractive, need about one
# iteration per time step. `Newton` alone with `throw=False` returns the
# unconverged iterate, flagged `recurrence_max_steps_reached`; with
# `throw=True` (the default) it raises.

# %%
wild = eqx.tree_at(lambda c: (c.a, c.c), cell, (8 * cell.a, jnp.full(16, -4.0)))
newton = Newton(max_steps=5)
for name, solver in (
    ("sequential", Fallback(newton, Sequential())),
    ("damped", Fallback(newton, DampedNewton(max_steps=250))),
    ("none", newton),
):
    solve = functools.partial(
        solve_recurrence, wild.step, h0, solver=solver, throw=False
    )
    solution = jax.jit(solve)(wild.project(xs[:200]))
    print(f"{name:>10}: {solution}")

# %% [markdown]
# ## Which mode is faster?
#
# On a GPU the Newton iterations run thousands of steps in parallel. On a CPU a
# compiled sequential step costs only tens of nanoseconds, so Newton mode
# mostly loses there; `Auto()` follows the crossovers measured by
# `benchmarks/pararnn.py` (see the benchmarks page). The layer tells you what it
# will run:

# %%
layer = RNN(cell, Auto())
print(jax.default_backend(), "length 4096 ->", layer.resolved_solver(4096))
