"""INSR on the paper's clamped stretch against converged P1 / P2 meshes.

`python -m experiments.run --config experiments/configs/insr_stretch.py:small`
steps a SIREN displacement of the square `[−1, 1]²` clamped on `x = ±1`, the
right face moved by `(2, 0)` (a = 1, b = 10³; Chen et al., ICML 2023,
`elasticity2Dstretch`), quasi-static in load steps with the clamps exact, and
compares it, on a 200² grid, with P1 and P2 meshes of the same memory
solved by a sparse Newton method, all against a converged P2 reference
(`experiments.tasks.insr.insr_stretch`). Variants:

- `small`: SIREN 2×20 (942 weights);
- `medium`: SIREN 2×41 (3,651 weights);
- the default: the paper's SIREN 3×68 (14,418 weights), a GPU job
  (`benchmarks/gpu`, row `insr_elasticity`);
- `tiny`: seconds, for the tests.

The integration checkpoints after every load step; `--resume RUN_DIR`
continues a stopped run, and the mesh solutions it finished are read back.
"""

import ml_collections

from experiments.configs._insr import insr_config
from sciml.experiment import About, defaults


ABOUT = About(
    "INSR on the paper's clamped stretch against converged P1 / P2 meshes (:small: 23 CPU minutes)",
    minutes=None,
    tiny_minutes=0.5,
    gpu=True,
)


def tiny(config: ml_collections.ConfigDict) -> None:
    config.field.width = 8
    config.field.hidden_layers = 1
    config.problem.load_steps = 2
    config.solver.n_grid = 400
    config.solver.max_steps = 6
    config.solver.n_heldout = 400
    config.initial.max_steps = 3
    config.reference.cells = (2, 4)
    config.meshes.memory = (1.0,)
    config.eval.n_grid = 40
    config.eval.snapshots = 2


def small(config: ml_collections.ConfigDict) -> None:
    """942 weights, the size of the package's other elasticity runs, on a
    4,000-point grid (about four points per weight), 60 iterations a load step
    (30 left the error at 2.3e-3 instead of 1.4e-3: docs/results.md)."""
    config.field.width = 20
    config.field.hidden_layers = 2
    config.solver.n_grid = 4000
    config.solver.max_steps = 60


def medium(config: ml_collections.ConfigDict) -> None:
    """3,651 weights (about four times `small`) on a 16,000-point grid: a
    Jacobian of 80,000 × 3,651 in float64 (2.3 GB) per iteration."""
    config.field.width = 41
    config.field.hidden_layers = 2
    config.solver.n_grid = 16000
    config.solver.max_steps = 60


def get_config(variant: str | None = None) -> ml_collections.ConfigDict:
    # 14,418 weights, the paper's 2-D elasticity field
    config = insr_config("insr_stretch", width=68, hidden_layers=3)
    config.field.omega0 = 3.0  # a smooth displacement: low frequencies

    config.problem = ml_collections.ConfigDict()
    config.problem.load_steps = 4  # quasi-static load ramp

    config.solver = ml_collections.ConfigDict()
    config.solver.name = "least_squares"
    config.solver.n_points = 0  # random interior points per point set
    # a fixed midpoint grid of the square, about three points per weight at the
    # paper's size (a Jacobian of 200,000 × 14,418 in float64, 23 GB: a GPU job)
    config.solver.n_grid = 40000
    config.solver.n_boundary = 1  # unused: the clamps are exact
    config.solver.max_steps = 30  # Levenberg–Marquardt iterations per load step
    config.solver.rtol = 1e-6
    config.solver.atol = 1e-9
    config.solver.rounds = 1  # point sets per solve, each drawn fresh
    config.solver.n_heldout = 10000  # held-out points of the overfitting check
    config.solver.grad_rtol = 1e-5  # converged when |J^T r| <= grad_rtol |J^T r_0|
    config.solver.matrix_free = False  # CG on J^T J through JVP / VJP instead of Cholesky
    config.solver.cg_rtol = 1e-8  # matrix_free only
    config.solver.cg_max_steps = 200  # matrix_free only
    config.initial = ml_collections.ConfigDict()
    config.initial.max_steps = 10  # the fit of the field at rest (load 0)
    config.train.checkpoint_every = 1  # a checkpoint after every load step

    config.reference = ml_collections.ConfigDict()
    # P2 on n² cells, each mesh twice as fine: the last is the reference, the
    # one before it estimates the reference's error
    config.reference.cells = (32, 64, 128)

    config.meshes = ml_collections.ConfigDict()
    # the P1 / P2 curves of the figure: multiples of the SIREN's memory (1 always)
    config.meshes.memory = (0.25, 0.5, 1.0, 2.0, 4.0)
    config.meshes.max_iterations = 1000  # Newton iterations per solve at most
    config.meshes.tol = 1e-10  # converged: a whole Newton step below this (max-norm)

    config.eval = ml_collections.ConfigDict()
    config.eval.n_grid = 200  # the errors on the midpoints of an n × n grid
    config.eval.near = 0.9  # "near corner": |x| above this
    config.eval.snapshots = 3
    return defaults.select_variant(config, variant, tiny=tiny, small=small, medium=medium)
