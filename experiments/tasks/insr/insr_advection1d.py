"""INSR on 1-D advection, next to its time-discretisation floor and grid baselines.

Fits the SIREN to the initial Gaussian, steps it with the configured
integrator and per-step solver (`sciml.insr.integrate`, every step's weights
saved), and compares on `eval.n_nodes` uniform nodes of `[lower, upper]`:

- `error`: the paper's metric, the mean absolute error against the exact
  solution averaged over all steps `1..n` (time-averaged MAE);
- `floor`: the same integrator with an exact spatial representation (its
  amplification factor applied to every Fourier mode of the initial condition
  on the periodic grid of the nodes; the Gaussian is ~0 at the ends);
- `grid_first_order`: Crank–Nicolson + first-order upwind on the nodes (the
  paper's baseline; `n_nodes` values = the memory of 901 float32 weights);
- `grid_second_order`: Crank–Nicolson + central differences on the same nodes;
- `seconds_per_step`: wall time of `integrate` divided by the number of steps
  it ran (compilation included), `initial_seconds` that of the initial fit.

The integration runs in chunks of `train.checkpoint_every` steps with progress
lines and checkpoints (see `insr_common.long_run`); `--resume RUN_DIR`
continues it from its last checkpoint.

Also: `n_params`, `param_bytes` (float32), `grid_bytes`, `failed_steps`,
`result` (the `RESULTS` name), `final_error` (MAE at the last step).
Writes `weights.eqx` (the stacked per-step fields; restore with
`eqx.tree_deserialise_leaves` onto the same structure) and `times.npy`;
plots `plots/fields.png` (snapshots vs the exact solution) and
`plots/errors.png` (MAE over time for every method).
"""

from __future__ import annotations

from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np

from experiments.tasks.insr import insr_common as common
from experiments.tasks.insr.insr_plots import plot_errors, plot_profiles
from sciml import insr
from sciml.experiment import Task, save_figure
from solvers.advection import CentralCN, UpwindCN
from solvers.stepping import rollout


INTEGRATORS = {
    "midpoint": insr.Midpoint,
    "implicit_euler": insr.ImplicitEuler,
    "explicit_euler": insr.ExplicitEuler,
}
PROBLEMS = ("advection1d",)


def build(config):
    """`(problem, field, integrator, initial solver)` from the config."""
    p = config.problem
    common.choose("problem.name", p.name, PROBLEMS)
    problem = insr.Advection1D(
        p.velocity, p.lower, p.upper, center=p.center, width=p.width, periodic=bool(p.periodic)
    )
    field = common.siren(config, 1, 1)
    if problem.periodic:
        field = insr.PeriodicEmbedding(common.siren(config, 2, 1), p.lower, p.upper)
    solver, initial = common.step_solvers(config, common.levenberg_marquardt_solvers)
    integrator = INTEGRATORS[common.choose("integrator", config.integrator, tuple(INTEGRATORS))]
    return problem, field, integrator(solver), initial


def mae_over_time(values: np.ndarray, exact: np.ndarray) -> np.ndarray:
    """Mean absolute error per time `(T,)` of `(T, n)` arrays."""
    return np.mean(np.abs(values - exact), axis=-1)


def spectral_floor(integrator, problem, nodes: np.ndarray, dt: float, n_steps: int) -> np.ndarray:
    """`(n_steps + 1, n)`: the integrator applied exactly to every Fourier mode
    of `u₀` on the periodic grid `nodes[:-1]` (last node = first)."""
    x = nodes[:-1]
    k = 2 * np.pi * np.fft.fftfreq(x.size, d=x[1] - x[0])
    g = np.asarray(integrator.amplification(-1j * problem.velocity * k * dt))
    u0 = jax.vmap(problem.initial_condition)(jnp.asarray(x)[:, None])[:, 0]
    u0_hat = np.fft.fft(np.asarray(u0))
    fields = [np.fft.ifft(g**n * u0_hat).real for n in range(n_steps + 1)]
    return np.concatenate([np.stack(fields), np.stack(fields)[:, :1]], axis=1)


def values_on_nodes(fields, problem, nodes: np.ndarray, times) -> tuple[np.ndarray, np.ndarray]:
    """`(n_steps + 1, n)` INSR values of the stacked `fields` and the exact solution on `nodes`."""
    x = jnp.asarray(nodes)[:, None]
    insr_values = np.asarray(jax.vmap(lambda f: jax.vmap(f)(x)[:, 0])(fields))
    exact = np.asarray(
        jax.vmap(lambda t: jax.vmap(lambda y: problem.exact(t, y))(x)[:, 0])(jnp.asarray(times))
    )
    return insr_values, exact


def grid_baselines(config, problem, nodes: np.ndarray, n_steps: int) -> dict[str, np.ndarray]:
    """`(n_steps + 1, n)` Crank–Nicolson solutions on `nodes`: upwind and central differences."""
    p, dt = config.problem, float(config.problem.dt)
    u0 = np.array(jax.vmap(problem.initial_condition)(jnp.asarray(nodes)[:, None])[:, 0])
    if not problem.periodic:
        u0[[0, -1]] = 0.0
    grids = {}
    for name, cls in (("grid_first_order", UpwindCN), ("grid_second_order", CentralCN)):
        stepper = cls(nodes.size, p.lower, p.upper, p.velocity, dt=dt)
        grids[name] = np.asarray(
            jax.jit(rollout(stepper, n_steps, include_init=True))(jnp.asarray(u0)[None])
        )[:, 0]
    return grids


def train_and_evaluate(config, workdir) -> dict:
    workdir = Path(workdir)
    with jax.enable_x64(bool(config.x64)):
        problem, field, integrator, initial = build(config)
        run = common.run_and_save_config(config, workdir, field, integrator, problem, initial)
        times, n_steps, dt = run.times, run.n_steps, float(config.problem.dt)
        nodes = np.linspace(config.problem.lower, config.problem.upper, int(config.eval.n_nodes))
        insr_values, exact = values_on_nodes(run.sol.value, problem, nodes, times)
        floor_values = spectral_floor(integrator, problem, nodes, dt, n_steps)
        grids = grid_baselines(config, problem, nodes, n_steps)

    curves = {
        "INSR": mae_over_time(insr_values, exact),
        "floor (exact space)": mae_over_time(floor_values, exact),
        "grid 1st order (CN + upwind)": mae_over_time(grids["grid_first_order"], exact),
        "grid 2nd order (CN + central)": mae_over_time(grids["grid_second_order"], exact),
    }
    summary = common.method_errors(curves)
    summary.update(common.run_summary(run, common.n_weights(field)))
    summary.update(final_error=float(curves["INSR"][-1]), grid_bytes=int(4 * nodes.size))

    plots, steps = workdir / "plots", common.snapshot_steps(config, n_steps)
    profiles = plot_profiles(nodes, times, steps, exact, insr_values, grids["grid_first_order"])
    save_figure(profiles, plots / "fields.png", bbox_inches="tight")
    errors = plot_errors(times, curves, ylabel="mean absolute error")
    save_figure(errors, plots / "errors.png", bbox_inches="tight")
    return summary


def validate_config(config) -> None:
    """Field, solver and evaluation sizes and choices, checked by the runner
    before anything is written."""
    common.validate_insr_config(
        config,
        positive=("eval.n_nodes",),
        positive_numbers=("problem.dt", "problem.t1"),
        choices={"problem.name": PROBLEMS, "integrator": tuple(INTEGRATORS)},
    )


TASK = Task(train_and_evaluate, validate=validate_config, build=build)
