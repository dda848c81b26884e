"""INSR on 2-D Taylor–Green flow, next to the splitting floor and grid baselines.

Fits the SIREN velocity to the initial Taylor–Green field, steps it with the
operator-splitting integrator (`sciml.insr.Splitting`: advection, implicit
diffusion when `ν > 0`, pressure, projection; every step's weights saved), and
compares on the `eval.n_nodes²` nodes of the periodic grid of `[0, 2π)²`:

- `error`: the paper's metric, the per-component velocity MSE in `[0, 2π]`
  units against the exact solution, averaged over steps `1..n`;
- `floor`: the same first-order splitting with an (almost) exact space: cubic
  semi-Lagrangian + exact FFT projection on `eval.floor_nodes²` nodes;
- `grid_first_order`: bilinear semi-Lagrangian + FFT projection on the
  `eval.n_nodes²` grid (the paper's same-memory baseline at 48²);
- `grid_second_order`: cubic semi-Lagrangian on the same grid;
- `seconds_per_step`: wall time of `integrate` divided by the number of steps
  it ran (compilation included; a resumed run counts the steps after its
  checkpoint), `initial_seconds` that of the initial fit.

The integration runs in compiled chunks of `train.checkpoint_every` steps,
prints a progress line (step, time, loss, seconds per step) and writes a
checkpoint (velocity, pressure, per-step records) to `checkpoints/` after each
chunk and on Ctrl-C or SIGTERM; `--resume RUN_DIR` continues from the last one
and ends with the same fields as a run that was not interrupted.

Also: `n_params`, `param_bytes` (float32, velocity + pressure), `grid_bytes`,
`failed_steps`, `result`, `initial_error` (the fitted initial field's MSE),
`final_error`, `energy` (final `E/E₀` of INSR),
per-sub-step mean losses (`mean_<sub-step>_loss`, and at the warm start
`mean_<sub-step>_loss_initial`). Writes `weights.eqx` (stacked per-step velocity
fields), `pressure.eqx` (final pressure) and `times.npy`; plots
`plots/fields.png` (vorticity snapshots: INSR, exact, their difference) and
`plots/errors.png` (MSE over time for every method).
"""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from experiments.tasks.insr import insr_common as common
from experiments.tasks.insr.insr_plots import plot_errors, plot_vorticity
from sciml import insr
from sciml.experiment import Task, save_figure
from solvers.semi_lagrangian import SemiLagrangian, periodic_grid
from solvers.stepping import rollout


PROBLEMS = ("taylor_green",)
PROJECTIONS = {"strong": insr.StrongProjection, "variational": insr.VariationalProjection}


def build(config):
    """`(problem, velocity field, integrator, initial solver)` from the config."""
    common.choose("problem.name", config.problem.name, PROBLEMS)
    problem = insr.TaylorGreen2D(float(config.problem.viscosity))
    kv, kp = jax.random.split(jax.random.key(config.seed))
    velocity = common.siren(config, 2, 2, key=kv)
    pressure = common.siren(config, 2, 1, key=kp)
    solver, pressure_solver, initial = common.step_solvers(config, _least_squares, 3)
    projection = PROJECTIONS[common.choose("projection", config.projection, tuple(PROJECTIONS))]()
    integrator = insr.Splitting(
        pressure, solver, pressure_solver=pressure_solver, projection=projection
    )
    return problem, velocity, integrator, initial


def _least_squares(config):
    """The Levenberg–Marquardt solvers of the velocity sub-steps, the pressure
    sub-step and the initial fit."""
    s = config.solver
    solver, initial = common.levenberg_marquardt_solvers(config, loss_rtol=s.loss_rtol)
    # after the first step the pressure warm-starts near its optimum (a
    # relative test does not fit it): its own cap and absolute tolerance
    stopping = insr.Stopping(max_steps=s.pressure_max_steps, loss_tol=s.pressure_loss_tol)
    pressure_solver = dataclasses.replace(solver, stopping=stopping)
    return solver, pressure_solver, initial


def exact_velocity(n: int, times: np.ndarray, viscosity: float) -> np.ndarray:
    """`(T, 2, n, n)` Taylor–Green velocity on the periodic grid (physical units)."""
    x = np.asarray(periodic_grid(n))
    u = np.stack([np.sin(x[0]) * np.cos(x[1]), -np.cos(x[0]) * np.sin(x[1])])
    return np.exp(-2 * viscosity * np.asarray(times))[:, None, None, None] * u


def grid_run(n: int, order: int, dt: float, n_steps: int, viscosity: float) -> np.ndarray:
    """`(n_steps + 1, 2, n, n)`: the semi-Lagrangian grid solution."""
    stepper = SemiLagrangian(n, dt, order=order, viscosity=viscosity)
    u0 = jnp.asarray(exact_velocity(n, np.zeros(1), viscosity)[0])
    return np.asarray(jax.jit(rollout(stepper, n_steps, include_init=True))(u0))


def mse_over_time(values: np.ndarray, exact: np.ndarray) -> np.ndarray:
    """Per-component MSE per time `(T,)` of `(T, 2, n, n)` arrays."""
    return np.mean((values - exact) ** 2, axis=(1, 2, 3))


def velocity_on_grid(fields, problem, n: int) -> np.ndarray:
    """`(T, 2, n, n)` velocities of the stacked `fields` on the periodic grid (physical units)."""
    nodes = jnp.asarray(periodic_grid(n)).reshape(2, -1).T / problem.length - 1
    # network units -> physical: u = L U
    values = problem.length * np.asarray(jax.vmap(lambda f: jax.vmap(f)(nodes))(fields))
    return np.moveaxis(values, -1, 1).reshape(values.shape[0], 2, n, n)  # from (T, n², 2)


def error_curves(config, insr_values: np.ndarray, times: np.ndarray, n_steps: int) -> dict:
    """MSE over time of INSR, the fine-grid floor and the two grid baselines."""
    n, nf = int(config.eval.n_nodes), int(config.eval.floor_nodes)
    dt, nu = float(config.problem.dt), float(config.problem.viscosity)
    exact = exact_velocity(n, times, nu)
    floor = grid_run(nf, 3, dt, n_steps, nu)
    return {
        "INSR": mse_over_time(insr_values, exact),
        f"floor (cubic SL {nf}²)": mse_over_time(floor, exact_velocity(nf, times, nu)),
        f"grid 1st order (bilinear SL {n}²)": mse_over_time(grid_run(n, 1, dt, n_steps, nu), exact),
        f"grid 2nd order (cubic SL {n}²)": mse_over_time(grid_run(n, 3, dt, n_steps, nu), exact),
    }


def train_and_evaluate(config, workdir) -> dict:
    workdir = Path(workdir)
    with jax.enable_x64(bool(config.x64)):
        problem, field, integrator, initial = build(config)
        run = common.run_and_save_config(config, workdir, field, integrator, problem, initial)
        sol, times, n_steps = run.sol, run.times, run.n_steps
        eqx.tree_serialise_leaves(workdir / "pressure.eqx", sol.stats["state"])
        n = int(config.eval.n_nodes)
        insr_values = velocity_on_grid(sol.value, problem, n)
        exact = exact_velocity(n, times, float(config.problem.viscosity))
        curves = error_curves(config, insr_values, times, n_steps)

    summary = common.method_errors(curves)
    summary.update(common.run_summary(run, common.n_weights((field, integrator.pressure))))
    energy = 0.5 * np.mean(np.sum(insr_values[-1] ** 2, axis=0)) * (2 * math.pi) ** 2
    summary.update(
        initial_error=float(curves["INSR"][0]),
        final_error=float(curves["INSR"][-1]),
        energy=float(energy / math.pi**2),
        grid_bytes=int(4 * 2 * n * n),
        **{
            f"mean_{key}": float(np.mean(np.asarray(value)))
            for key, value in sol.stats.items()
            if key.endswith(("_loss", "_loss_initial"))
        },
    )

    plots, steps = workdir / "plots", common.snapshot_steps(config, n_steps)
    fields = plot_vorticity(times, steps, insr_values, exact)
    save_figure(fields[0, 0], plots / "fields.png", dpi=110, bbox_inches="tight")
    errors = plot_errors(
        times,
        curves,
        ylabel="velocity MSE per component ([0, 2π] units)",
        title="Taylor–Green: error over time",
        legend={"loc": "upper left", "bbox_to_anchor": (1.01, 1)},
    )
    save_figure(errors, plots / "errors.png", bbox_inches="tight")
    return summary


def validate_config(config) -> None:
    """Field, solver and evaluation sizes and choices, checked by the runner
    before anything is written."""
    common.validate_insr_config(
        config,
        positive=("eval.n_nodes", "eval.floor_nodes"),
        positive_numbers=("problem.dt", "problem.t1"),
        choices={"problem.name": PROBLEMS, "projection": tuple(PROJECTIONS)},
    )


TASK = Task(train_and_evaluate, validate=validate_config, build=build)
