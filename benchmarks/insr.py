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

usage: python -m benchmarks.insr [--problems advection taylor_green]
       [--steps 240] [--solvers least_squares adam] [--adam-max-iters 20000]
       [--tg-steps 2] [--tg-paper-sizes] [--quick]
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

from benchmarks._common import emit, environment
from experiments.configs import insr_advection1d, insr_taylor_green
from experiments.tasks.insr import insr_taylor_green as taylor_green_task
from experiments.tasks.insr.insr_advection1d import train_and_evaluate


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
    args = parser.parse_args(argv)
    emit({"benchmark": "insr", **environment()})
    if "advection" in args.problems:
        advection(args)
    if "taylor_green" in args.problems:
        taylor_green(args)


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
