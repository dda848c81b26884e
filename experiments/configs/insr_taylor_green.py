"""INSR on 2-D Taylor–Green flow (Chen et al., ICML 2023): operator splitting.

`python -m experiments.run --config experiments/configs/insr_taylor_green.py`
runs the paper's setup (inviscid Taylor–Green on [0, 2π]² as network input
[−1, 1]², free-slip walls, Δt = 0.05, 100 steps, SIREN 3×32 velocity and
pressure fields, strong-form pressure projection) with the Gauss–Newton /
Levenberg–Marquardt per-step solver in float64 (hours on a CPU; with 2×16
fields on 2,000 points, `--config.field.width=16 --config.field.hidden_layers=2
--config.solver.n_points=2000`, about 50 s per step);
`--config.solver.name=adam` runs the paper's Adam loop instead,
`--config.problem.viscosity=0.05` the viscous flow, and
`--config.projection=variational` the first-derivative pressure projection.
The steps run in chunks of `train.checkpoint_every` (5) with a progress line
and a checkpoint after each; an interrupted run (Ctrl-C, SIGTERM) continues with
`python -m experiments.run --resume RUN_DIR`.
The `tiny` variant (`insr_taylor_green.py:tiny`) runs in seconds for the tests.
"""

import ml_collections

from experiments.configs._insr import add_adam_and_initial, insr_config
from sciml.experiment import About, defaults


ABOUT = About(
    "INSR on the Taylor–Green vortex by operator splitting, 100 steps",
    minutes=None,
    tiny_minutes=0.5,
    gpu=True,
)


def tiny(config: ml_collections.ConfigDict) -> None:
    config.problem.t1 = 0.1  # 2 steps
    config.field.width = 8
    config.field.hidden_layers = 1
    config.field.omega0 = 3.0  # a small field needs low frequencies to hold one TG cell
    config.solver.n_points = 300
    config.solver.n_boundary = 40
    config.solver.max_steps = 3
    config.solver.pressure_max_steps = 3
    config.initial.max_steps = 10
    config.eval.n_nodes = 16
    config.eval.floor_nodes = 32
    config.eval.snapshots = 2


def get_config(variant: str | None = None) -> ml_collections.ConfigDict:
    # 3330 velocity + 3297 pressure weights, as the paper
    config = insr_config("insr_taylor_green", width=32, hidden_layers=3)

    config.problem = ml_collections.ConfigDict()
    config.problem.name = "taylor_green"
    config.problem.viscosity = 0.0  # the paper's Euler flow
    config.problem.t1 = 5.0  # 100 steps of dt
    config.problem.dt = 0.05

    config.projection = "strong"  # or "variational"

    config.solver = ml_collections.ConfigDict()
    config.solver.name = "least_squares"  # or "adam" (the paper's loop)
    config.solver.n_points = 8000
    config.solver.n_boundary = 160  # ~1% + of the points on the walls, as the paper's 16,384 / 1%
    config.solver.max_steps = 60
    # a velocity sub-step (advection, diffusion, projection) has converged, and
    # stops, when it has cut its objective to loss_rtol of its warm start's, or
    # below loss_tol
    config.solver.loss_tol = 1e-9
    config.solver.loss_rtol = 1e-3
    config.solver.pressure_max_steps = 150
    config.solver.pressure_loss_tol = 1e-6
    config.solver.rtol = 1e-4
    config.solver.atol = 1e-8
    add_adam_and_initial(config, initial_steps=60)
    config.initial.loss_tol = 1e-9  # the fit stops here

    # steps per compiled chunk: progress, a checkpoint (resume with --resume RUN_DIR)
    config.train.checkpoint_every = 5

    config.eval = ml_collections.ConfigDict()
    config.eval.n_nodes = 48  # evaluation grid = the paper's same-memory grid baseline
    config.eval.floor_nodes = 256  # cubic semi-Lagrangian grid for the splitting floor
    config.eval.snapshots = 3
    return defaults.select_variant(config, variant, tiny=tiny)
