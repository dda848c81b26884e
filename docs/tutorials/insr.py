# %% [markdown]
# # Neural fields stepped in time (INSR)
#
# In an implicit neural spatial representation the solution at time $t_n$ is
# a small network $u_\theta(x)$, and a time step finds new weights
# $\theta^{n+1}$ so that the new field satisfies a classical integrator
# applied to the previous one (Chen et al., ICML 2023). For the implicit
# midpoint rule and $\partial_t u = F(u)$ the step minimises, over random
# points $x_i$,
# $$L(\theta) = \frac{1}{N}\sum_i \Big\lVert \frac{u_\theta(x_i) - u^n(x_i)}{\Delta t}
# - F\big(\tfrac12(u_\theta + u^n)\big)(x_i) \Big\rVert^2
# + \lambda\,(\text{boundary penalty}).$$
# The paper minimises it with thousands of Adam iterations per step; here the
# default per-step solver is Levenberg–Marquardt on the per-point residuals,
# which needs a few tens of iterations. This page advects a Gaussian pulse
# with a SIREN field on a CPU in a few minutes (the time is printed below),
# compares it with the exact solution and with two grids of the same memory,
# and checks the
# integrators on a field where the answer is known exactly.

# %%
import functools
import time

import equinox as eqx
import jax
import jax.numpy as jnp
import lineax as lx
import matplotlib.pyplot as plt
import numpy as np
import optimistix as optx

from sciml import insr
from solvers.advection import CentralCN, UpwindCN
from solvers.stepping import rollout


jax.config.update("jax_enable_x64", True)  # the least-squares steps run in float64

# %% [markdown]
# ## The problem and the field
#
# The paper's first example: $\partial_t u + a\,\partial_x u = 0$ on
# $[-2, 2]$ with $a = 0.25$, a Gaussian of width $0.1$ at $x = -1.5$, and
# $u = 0$ at both ends (a soft penalty on points next to the ends). The field
# is the paper's SIREN with two hidden layers of 20 units: 901 weights, the
# memory of a grid of 901 values.

# %%
problem = insr.Advection1D()
field = insr.SIREN(1, 1, width=20, hidden_layers=2, omega0=30.0, key=jax.random.key(0))
n_weights = sum(
    a.size for a in jax.tree_util.tree_leaves(eqx.filter(field, eqx.is_array))
)
print(f"{n_weights} weights")

# %% [markdown]
# ## Fit the initial condition, then step
#
# Both use `LeastSquaresSolver`: fresh random points each step (its
# `Collocation`: 2,000, many more than the 901 weights, so the fit cannot
# interpolate between points), optimistix's Levenberg–Marquardt with the
# damped normal equations. A step stops (its `Stopping`), converged, as soon
# as its objective is below `loss_tol` (or below
# `loss_rtol` of its warm start's, or its gradient `‖JᵀR‖` below `grad_rtol`
# of its start's), tested inside the optimiser's loop at every iteration, or
# when the optimiser meets its own tolerance; a step that meets none runs to
# `max_steps`, and `integrate(..., throw=False)` reports it in
# `stats["step_result"]` rather than accepting it silently.

# %%
optimiser = optx.LevenbergMarquardt(
    rtol=1e-4, atol=1e-8, linear_solver=lx.Normal(lx.Cholesky())
)
points = insr.Collocation(n_points=2000)
initial_solver = insr.LeastSquaresSolver(
    optimiser, collocation=points, stopping=insr.Stopping(max_steps=60, loss_tol=1e-8)
)
step_solver = insr.LeastSquaresSolver(
    optimiser, collocation=points, stopping=insr.Stopping(max_steps=20, loss_tol=1e-6)
)

fit = eqx.filter_jit(insr.fit_initial)(
    field, problem, initial_solver, key=jax.random.key(1), throw=False
)
print(f"initial fit: mean squared misfit {float(fit.stats['loss']):.1e}")

dt, t1 = 0.05, 0.3
start = time.perf_counter()
sol = eqx.filter_jit(insr.integrate)(
    fit.value,
    insr.Midpoint(step_solver),
    problem,
    0.0,
    t1,
    dt,
    key=jax.random.key(2),
    saveat=insr.SaveAt(t0=True, steps=True),
    throw=False,
)
jax.block_until_ready(sol.stats["loss"])
elapsed = time.perf_counter() - start
print(f"{elapsed:.0f} s for {round(t1 / dt)} steps (compilation included)")
print("all steps converged:", bool(sol.successful))
print("iterations per step:", np.asarray(sol.stats["iterations"]))
print(
    "objective per step: ", np.array2string(np.asarray(sol.stats["loss"]), precision=1)
)

# %% [markdown]
# ## Against the exact solution and two grids
#
# The exact solution is the shifted pulse $u_0(x - at)$. The grids have 901
# nodes (the same memory as the weights) and Crank–Nicolson in time: the
# paper's baseline uses first-order upwind differences in space, which smear
# the pulse (numerical diffusion $ah/2$); central differences are second
# order.

# %%
nodes = np.linspace(-2.0, 2.0, 901)
x = jnp.asarray(nodes)[:, None]
times = np.asarray(sol.stats["ts"])
insr_values = np.asarray(jax.vmap(lambda f: jax.vmap(f)(x)[:, 0])(sol.value))
exact = np.stack(
    [np.asarray(jax.vmap(functools.partial(problem.exact, t))(x)[:, 0]) for t in times]
)

u0 = np.array(jax.vmap(problem.initial_condition)(x)[:, 0])
u0[[0, -1]] = 0.0
n_steps = len(times) - 1
grids = {}
for name, cls in (("grid, upwind", UpwindCN), ("grid, central", CentralCN)):
    stepper = cls(nodes.size, -2.0, 2.0, problem.velocity, dt=dt)
    grids[name] = np.asarray(
        rollout(stepper, n_steps, include_init=True)(jnp.asarray(u0)[None])
    )[:, 0]

fig, (left, right) = plt.subplots(1, 2, figsize=(9, 3.6))
window = (nodes > -1.8) & (nodes < -1.0)
left.plot(nodes[window], exact[-1][window], "k", lw=3, alpha=0.3, label="exact")
left.plot(nodes[window], insr_values[-1][window], label="INSR (SIREN, 901 weights)")
for name, values in grids.items():
    left.plot(nodes[window], values[-1][window], ls=":", label=f"{name} (901 nodes)")
left.set(xlabel="x", ylabel="u", title=f"t = {t1}")
left.legend()
right.semilogy(
    times[1:], np.mean(np.abs(insr_values - exact), axis=1)[1:], label="INSR"
)
for name, values in grids.items():
    right.semilogy(
        times[1:], np.mean(np.abs(values - exact), axis=1)[1:], ls=":", label=name
    )
right.set(xlabel="t", ylabel="mean absolute error")
right.legend()
fig.tight_layout()

# %% [markdown]
# The field's error stays close to the time-discretisation floor of the
# midpoint rule (about $10^{-4}$ after six steps: the error of the same
# integrator with an exact spatial representation) and well below the
# first-order grid's; the central grid, which has no numerical diffusion, is
# as good. The experiment `insr_advection1d` runs the paper's full 240 steps
# with all four curves.

# %% [markdown]
# ## How many points per weight
#
# A step minimises its objective *on its points*. When the residual rows
# (points × residuals per point) are not many more than the weights, the
# network can push the sampled loss below the true minimum by letting the
# residual grow between the points: it overfits, and more iterations on the
# same points make it worse. Advection above has one residual per point, a
# smooth answer and 2,000 points for 901 weights. Elasticity is harder: its energy
# depends on $\nabla u$, where a SIREN with $\omega_0 = 30$ oscillates
# fastest. On one step of the released column (SIREN 2×20, 942 weights,
# 2,000 points, Levenberg–Marquardt) the training-point energy fell to
# 1.34e-2 while the energy on 8,000 held-out points was 6.62e-2, and the
# total energy grew by a factor 2.27 in a step that should lose 4 %.
#
# What to do, in this order:
#
# - **Fit the initial condition in $H^1$** where the energy depends on
#   $\nabla u$: `InitialObjective` matches gradients as well as values for
#   `Elasticity2D` (its `initial_gradient_weight` is 1). On the column the
#   strain error of the fit fell from 13.4 % to 1.5 % (value error
#   5.8e-5 → 1.3e-5), and the step's `E₁/E₀` from 2.27 to 1.38 — still
#   overfitted at 2,000 points.
# - **Use at least ten points per weight** (`Collocation`'s `n_points`), redraw
#   them within the solve (`rounds`), or add a fixed quadrature grid (`n_grid`). With
#   10,000 points (10.6 per weight) the same step's held-out energy was
#   1.88e-2 against 1.77e-2 on its training points (at 2,000 points: 3.66e-2
#   against 1.49e-2), and the energy no longer grew; the step then needs
#   more iterations to converge (the benchmarks page has the table).
# - **Impose the constraints exactly** (`Elasticity2D(...,
#   exact_boundary=True)`) once the step converges: a penalty of weight
#   1e3 gives way where the energy gains by it. On the column a converged
#   step with the penalty rollers kept 61 % of the energy — for a P1 mesh
#   (11 iterations, gradient ratio 6e-9) as for the SIREN — against implicit
#   Euler's 96 %; with the rollers exact the converged P1 step kept 95.3 %.
#   A SIREN with exact rollers needs more than ten points per weight: at
#   10,000 points its held-out energy was 38 % above its training energy.
# - **Match the first-layer frequency to the answer** (`SIREN(...,
#   omega0=...)`): the column moves as a quarter wave, and the paper's
#   $\omega_0 = 30$ gives the field several wavelengths of room between the
#   points. At $\omega_0 = 3$ the same step on 4,000 points (4.2 per weight)
#   has its held-out energy within 4.5 % of its training energy (at
#   $\omega_0 = 10$: 26 %).
# - **Prefer a quadrature grid to random points** where the domain allows
#   it (`n_grid`, with `n_points=0`): on the column's 4,000-point midpoint
#   grid the held-out energy stays within 1.5 % of the training energy, and
#   five steps (`insr_elasticity.py:small`) at `grad_rtol` 1e-3 end at an
#   energy-ratio error of 2.9e-3, against 5.5e-3 on 4,000 random points per
#   step. Then solve to a tight gradient ratio: at `grad_rtol` 1e-5 the grid
#   run ends at 8.6e-5.
#   Even so a P1 mesh of the same memory, stepped on its Gauss points, is
#   4.5× closer to implicit Euler and a P2 mesh 19×.
# - **Watch the held-out energy**: every least-squares solve reports
#   `energy` (training points) and `energy_heldout` (points drawn apart) in
#   its `stats`; with `overfit_rtol` set a step whose held-out energy is
#   more than that above the training energy (beyond sampling noise) is
#   reported as `RESULTS.insr_overfitted`, not `successful`.

# %% [markdown]
# ## The integrators, exactly
#
# On a periodic domain with a field *linear* in its weights — a Fourier basis
# — each step's least-squares problem is linear and has an exact solution, so
# one Gauss–Newton iteration reproduces the integrator's amplification factor
# for every mode $e^{ikx}$: the midpoint rule keeps each amplitude at 1 and
# turns the phase by $2\arctan(ak\Delta t/2)$ per step, implicit Euler damps
# by $1/\sqrt{1 + (ak\Delta t)^2}$.

# %%
periodic = insr.Advection1D(periodic=True)
n_modes, m = 4, 3  # a cosine of wavenumber k = 2πm/4
coefficients = jnp.zeros((1, 2 * n_modes + 1)).at[0, m].set(1.0)
mode = insr.FourierBasis(n_modes, -2.0, 2.0, coefficients=coefficients)
exact_solver = insr.LeastSquaresSolver(
    optx.GaussNewton(rtol=1e-10, atol=1e-12), collocation=insr.Collocation(n_points=64)
)
k = 2 * np.pi * m / 4.0
z = periodic.velocity * k * 0.1
for name, integrator in (
    ("midpoint", insr.Midpoint(exact_solver)),
    ("implicit Euler", insr.ImplicitEuler(exact_solver)),
):
    out = insr.integrate(
        mode, integrator, periodic, 0.0, 1.0, 0.1, key=jax.random.key(3)
    )
    c = insr.field_at(out.value, -1).coefficients[0]
    amplitude = float(jnp.hypot(c[m], c[n_modes + m]))
    expected = 1.0 if name == "midpoint" else (1 + z**2) ** -5
    print(
        f"{name:15s} amplitude after 10 steps {amplitude:.12f}",
        f"(closed form {expected:.12f})",
    )
