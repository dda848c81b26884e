"""INSR on 1-D advection and 2-D Taylor–Green flow: the Gauss–Newton
(Levenberg–Marquardt) and Adam per-step solvers next to the
time-discretisation floor and the grid baselines.

Runs the task of `experiments/configs/insr_advection1d.py` (the paper's
setup: SIREN 2×20 = 901 weights, midpoint, Δt = 0.05) once per per-step
solver and prints one JSON line each: the paper's error (time-averaged MAE),
the floor (midpoint with an exact spatial representation), the same-memory
first-order (CN + upwind, the paper's) and second-order (CN + central) grids,
seconds per step (compilation included), failed steps, mean solver
iterations per step, parameter bytes (float32) and grid bytes.

Taylor–Green (`experiments/configs/insr_taylor_green.py`, operator
splitting, Δt = 0.05): one JSON line per solver with the paper's error
(time-averaged per-component velocity MSE), the splitting floor (cubic
semi-Lagrangian 256²), the same-memory bilinear (the paper's) and cubic
semi-Lagrangian 48² grids, seconds per step and parameter bytes (velocity +
pressure). The default run is short (`--tg-steps 2`, SIREN 2×16 fields,
2000 points); `--tg-paper-sizes` uses the paper's 3×32 fields and 8000 points.

Elasticity, one step (`--problems elasticity_step`): the released column
(SIREN 2×20 = 942 weights, Δt = 0.08, float64, Levenberg–Marquardt) fitted
to its first mode and stepped once, printing the fit's value and strain
errors, the step's energy on its training points and on held-out points, the
total energy ratio `E₁/E₀` on a 32² grid against implicit Euler's, the
gradient and loss ratios and the step's result — the overfitting measurement
of the sampling options (`--points`, `--rounds`, `--grid`, `--value-fit`);
`--matrix-free` solves both the fit and the step with truncated CG on `JᵀJ`
(`--cg-max-steps`, `--cg-rtol`) instead of the dense normal equations;
`--omega0` sets the SIREN's first-layer frequency (the paper's 30).
`--field p1` / `p2` steps a P1 / P2 triangle mesh of the SIREN's memory
instead (interpolated, not fitted, with the face nodes held exactly under
`--exact-boundary`); `--mesh-quadrature K` steps them on their Gauss points
(the three-point rule on K² sub-triangles of every element) instead of
random or grid points.

usage: python -m benchmarks.insr [--problems advection taylor_green elasticity_step]
       [--steps 240] [--solvers least_squares adam] [--adam-max-iters 20000]
       [--tg-steps 2] [--tg-paper-sizes] [--quick]
       [--points 2000] [--rounds 1] [--grid 0] [--value-fit] [--exact-boundary]
       [--max-steps 20] [--matrix-free] [--cg-max-steps 100] [--cg-rtol 1e-6]
       [--field siren] [--omega0 30] [--mesh-quadrature 0]
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import tempfile
import time
from pathlib import Path

import equinox as eqx
import jax
import jax.numpy as jnp
import lineax as lx
import optimistix as optx

from benchmarks._common import emit, environment
from experiments.configs import insr_advection1d, insr_taylor_green
from experiments.tasks.insr import insr_taylor_green as taylor_green_task
from experiments.tasks.insr.insr_advection1d import train_and_evaluate
from sciml import insr
from sciml.solution import result_name
from solvers.mesh_fields import fix_nodes, interpolate, p1_field, p2_field, quadrature_points


KEYS = (
    "error",
    "floor",
    "grid_first_order",
    "grid_second_order",
    "seconds_per_step",
    "initial_seconds",
    "final_error",
    "failed_steps",
    "mean_iterations",
    "param_bytes",
    "grid_bytes",
    "n_steps",
)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=240)
    parser.add_argument("--solvers", nargs="+", default=["least_squares", "adam"])
    parser.add_argument("--adam-max-iters", type=int, default=20000)
    parser.add_argument("--quick", action="store_true", help="the tiny config, seconds")
    parser.add_argument("--problems", nargs="+", default=["advection", "taylor_green"])
    parser.add_argument("--tg-steps", type=int, default=2)
    parser.add_argument("--tg-paper-sizes", action="store_true")
    parser.add_argument("--points", type=int, default=2000, help="elasticity: points per set")
    parser.add_argument("--rounds", type=int, default=1, help="elasticity: point sets per solve")
    parser.add_argument("--grid", type=int, default=0, help="elasticity: quadrature grid points")
    parser.add_argument("--value-fit", action="store_true", help="elasticity: fit values only")
    parser.add_argument("--exact-boundary", action="store_true")
    parser.add_argument("--max-steps", type=int, default=20, help="elasticity: LM iterations")
    parser.add_argument("--matrix-free", action="store_true", help="elasticity: CG on J^T J")
    parser.add_argument("--cg-max-steps", type=int, default=100)
    parser.add_argument("--cg-rtol", type=float, default=1e-6)
    parser.add_argument(
        "--field", choices=("siren", "p1", "p2"), default="siren", help="elasticity: the field"
    )
    parser.add_argument("--omega0", type=float, default=30.0, help="elasticity: SIREN ω₀")
    parser.add_argument(
        "--mesh-quadrature",
        type=int,
        default=0,
        help="elasticity, --field p1/p2: step on the mesh's Gauss points (3k² per triangle)",
    )
    args = parser.parse_args(argv)
    emit({"benchmark": "insr", **environment()})
    if "advection" in args.problems:
        advection(args)
    if "taylor_green" in args.problems:
        taylor_green(args)
    if "elasticity_step" in args.problems:
        with jax.enable_x64(True):
            elasticity_step(args)


def column_energy(problem, fields, x, dt):
    """`(E₀, E₁)`: mean kinetic plus elastic energy over `x` of the fit and the
    step (the body starts at rest)."""
    before, after = fields
    psi = [jnp.mean(jax.vmap(lambda y, f=f: problem.energy_density(f, y))(x)) for f in fields]
    velocity = (jax.vmap(after)(x) - jax.vmap(before)(x)) / dt
    kinetic = problem.mass * jnp.mean(jnp.sum(velocity**2, -1))
    return float(psi[0]), float(psi[1] + kinetic)


def elasticity_step(args):
    if args.mesh_quadrature and args.field == "siren":
        raise SystemExit("--mesh-quadrature is for the meshes (--field p1 or p2)")
    dt = 0.08
    problem = insr.Elasticity2D.scene("column", exact_boundary=args.exact_boundary)
    network = insr.SIREN(2, 2, width=20, hidden_layers=2, omega0=args.omega0, key=jax.random.key(0))
    linear = lx.Normal(lx.Cholesky())
    if args.matrix_free:
        linear = lx.Normal(insr.Truncated(lx.CG(args.cg_rtol, 0.0, max_steps=args.cg_max_steps)))
    optimiser = optx.LevenbergMarquardt(rtol=1e-6, atol=1e-9, linear_solver=linear)
    points = dict(n_points=args.points, rounds=args.rounds, n_grid=args.grid, n_heldout=8000)
    solver = insr.LeastSquaresSolver(
        optimiser,
        collocation=insr.Collocation(n_boundary=150, overfit_rtol=0.05, **points),
        stopping=insr.Stopping(max_steps=args.max_steps, grad_rtol=1e-3),
        matrix_free=args.matrix_free,
    )
    fitter = insr.LeastSquaresSolver(
        optimiser,
        collocation=insr.Collocation(**points),
        stopping=insr.Stopping(max_steps=40),
        matrix_free=args.matrix_free,
    )
    objective = insr.InitialObjective(problem, gradient_weight=0.0 if args.value_fit else None)
    start = time.perf_counter()
    if args.field == "siren":
        fit = eqx.filter_jit(lambda f, k: fitter.solve(objective, f, key=k))(
            problem.constrain(network), jax.random.key(1)
        )
        field0 = fit.value
    else:  # a mesh of the SIREN's memory, interpolated at its nodes
        n_params = sum(x.size for x in jax.tree_util.tree_leaves(eqx.filter(network, eqx.is_array)))
        mesh = (p1_field if args.field == "p1" else p2_field)(problem, int(n_params))
        field0 = interpolate(mesh, problem.initial_condition)
        if args.exact_boundary:
            field0 = fix_nodes(field0, problem.constraints)
        if args.mesh_quadrature:
            points = quadrature_points(field0, args.mesh_quadrature)
            solver = dataclasses.replace(solver, n_points=0, n_grid=0, quadrature=points)
    integrator = insr.IncrementalPotential(solver)
    jax.block_until_ready(field0)
    fit_seconds = time.perf_counter() - start
    sol, _ = eqx.filter_jit(lambda f, k: integrator.step(f, problem, 0.0, dt, key=k))(
        field0, jax.random.key(2)
    )
    jax.block_until_ready(sol.stats["loss"])
    step_seconds = time.perf_counter() - start - fit_seconds
    n = 32
    axes = [
        lo + (hi - lo) * (jnp.arange(n) + 0.5) / n for lo, hi in zip(problem.lower, problem.upper)
    ]
    x = jnp.stack(jnp.meshgrid(*axes, indexing="ij"), -1).reshape(-1, 2)
    exact_u = jax.vmap(problem.initial_condition)(x)
    exact_grad = jax.vmap(jax.jacfwd(problem.initial_condition))(x)
    fit_grad = jax.vmap(jax.jacfwd(field0))(x)
    e0, e1 = column_energy(problem, (field0, sol.value), x, dt)
    omega = math.pi * math.sqrt((problem.a + problem.b) / problem.mass) / 4
    emit(
        {
            "problem": "elasticity_step",
            **points,
            "matrix_free": args.matrix_free,
            "value_fit": args.value_fit,
            "exact_boundary": args.exact_boundary,
            "field": args.field,
            "omega0": args.omega0 if args.field == "siren" else None,
            "mesh_quadrature": args.mesh_quadrature if args.field != "siren" else None,
            "fit_value_rms": float(jnp.sqrt(jnp.mean((jax.vmap(field0)(x) - exact_u) ** 2))),
            "fit_strain_error": float(
                jnp.linalg.norm(fit_grad - exact_grad) / jnp.linalg.norm(exact_grad)
            ),
            "energy_train": float(sol.stats["energy"]),
            "energy_heldout": float(sol.stats["energy_heldout"]),
            "energy_ratio": e1 / e0,
            "implicit_euler": 1 / (1 + omega**2 * dt**2),
            "grad_ratio": float(sol.stats["grad_ratio"]),
            "loss_ratio": float(sol.stats["loss_ratio"]),
            "result": "successful" if bool(sol.successful) else result_name(sol.result),
            "iterations": int(sol.stats["iterations"]),
            "max_steps": args.max_steps,
            "cg_max_steps": args.cg_max_steps if args.matrix_free else None,
            "fit_seconds": fit_seconds,
            "step_seconds": step_seconds,
        }
    )


def taylor_green(args):
    for solver in args.solvers:
        config = insr_taylor_green.get_config("tiny" if args.quick else None)
        config.solver.name = solver
        if not args.quick:
            config.problem.t1 = args.tg_steps * config.problem.dt
            if not args.tg_paper_sizes:
                config.field.width, config.field.hidden_layers = 16, 2
                config.solver.n_points = 2000
        if solver == "adam":
            config.solver.n_points = 16384 if args.tg_paper_sizes else 2000
            config.solver.max_iters = args.adam_max_iters
        with tempfile.TemporaryDirectory() as workdir:
            (Path(workdir) / "plots").mkdir()
            summary = taylor_green_task.train_and_evaluate(config, workdir)
        keys = [key for key in KEYS if key in summary] + ["initial_error", "energy", "n_params"]
        emit({"problem": "taylor_green", "solver": solver, **{k: summary[k] for k in keys}})


def advection(args):
    for solver in args.solvers:
        config = insr_advection1d.get_config("tiny" if args.quick else None)
        config.solver.name = solver
        if not args.quick:
            config.problem.t1 = args.steps * config.problem.dt
        if solver == "adam":
            config.solver.n_points = 5000
            config.solver.max_iters = args.adam_max_iters
        with tempfile.TemporaryDirectory() as workdir:
            (Path(workdir) / "plots").mkdir()
            summary = train_and_evaluate(config, workdir)
        emit({"solver": solver, **{key: summary[key] for key in KEYS}})


if __name__ == "__main__":
    main()
