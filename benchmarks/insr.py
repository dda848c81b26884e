"""INSR on 1-D advection: the Gauss–Newton (Levenberg–Marquardt) and Adam
per-step solvers next to the time-discretisation floor and the grid baselines.

Runs the task of `experiments/configs/insr_advection1d.py` (the paper's
setup: SIREN 2×20 = 901 weights, midpoint, Δt = 0.05) once per per-step
solver and prints one JSON line each: the paper's error (time-averaged MAE),
the floor (midpoint with an exact spatial representation), the same-memory
first-order (CN + upwind, the paper's) and second-order (CN + central) grids,
seconds per step (compilation included), failed steps, mean solver
iterations per step, parameter bytes (float32) and grid bytes.

usage: python -m benchmarks.insr [--steps 240] [--solvers least_squares adam]
       [--adam-max-iters 20000] [--quick]
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

from benchmarks._common import emit, environment
from experiments.configs import insr_advection1d
from experiments.tasks.insr_advection1d import train_and_evaluate


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
    args = parser.parse_args(argv)
    emit({"benchmark": "insr", **environment()})
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
