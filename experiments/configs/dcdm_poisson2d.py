"""DCDM on 2-D pressure-Poisson systems: train at 128², evaluate up to 512².

`python -m experiments.run --config experiments/configs/dcdm_poisson2d.py`;
the `tiny` variant (`dcdm_poisson2d.py:tiny`) runs in seconds for the tests.
The symmetric linear networks (with which DCDM is PCG) instead of the
paper's: `--config.model.kind=multilevel` (`sciml.dcdm.MultilevelDCDMNet`,
a linear V-cycle `NᵀN`, trained with the A-norm loss) or
`--config.model.kind=symmetric` (`sciml.dcdm.SymmetricDCDMNet`).
"""

import ml_collections

from sciml.experiment import About, defaults


ABOUT = About(
    "DCDM trained on 2-D Poisson at 128², against CG, IC(0) and AMG up to 512²",
    minutes=140,
    tiny_minutes=0.7,
)


def data_block(dim: int, resolution: int, *, n_ritz: int, n_rhs: int) -> ml_collections.ConfigDict:
    """The `data.*` block shared by the 2-D and 3-D configs."""
    data = ml_collections.ConfigDict()
    data.dim = dim
    data.resolution = resolution
    data.scene_seed = 0
    data.n_obstacles = 3
    data.free_surface = True
    data.n_ritz = n_ritz  # Lanczos steps (memory: see sciml.dcdm.lanczos)
    data.n_rhs = n_rhs
    data.n_valid = 64
    data.factor = 9.0
    data.low_fraction = 0.6  # None: the first paper's k/2 + 500 rule
    data.rhs_seed = 0
    # several training scenes at once: every resolution × family (empty: the
    # one scene of `resolution` and `free_surface`)
    data.resolutions = ()
    data.families = ()  # "closed", "free_surface"
    return data


def model_block() -> ml_collections.ConfigDict:
    model = ml_collections.ConfigDict()
    # "paper"; "symmetric": NᵀN with the paper's layout as a linear N; "multilevel":
    # NᵀN with N a linear V-cycle (both linear and SPD, no label channels)
    model.kind = "paper"
    model.loss = "auto"  # "paper", "a_norm"; auto: paper's for kind="paper", else A-norm
    model.pairs = (2, 3, 2)  # the paper's N = 64 model: 4 + 6 + 4 convs
    model.width = 16
    # fluid / solid / air one-hot, as in Lan et al. 2024 (paper network: input
    # channels; multilevel: per-level multiplicative masks, N stays linear)
    model.label_channels = False
    model.odd = False  # paper network: keep only its odd part
    model.reference_layout = False  # paper network: the reference code's first stage
    model.smooth = 2  # multilevel: residual convolutions per level and side
    model.coarsest = 4  # multilevel: pool while the smallest side exceeds this
    model.gains = 1  # multilevel: 1 shared coarse-correction gain, or one per level
    model.init = ""  # multilevel: start from shipped weights ("poisson2d"), e.g. to fine-tune
    return model


def eval_block(resolutions, scene_seeds) -> ml_collections.ConfigDict:
    ev = ml_collections.ConfigDict()
    ev.resolutions = resolutions
    ev.scene_seeds = scene_seeds  # held out: the training scene has seed data.scene_seed
    ev.methods = ("dcdm", "cg", "jacobi", "ic0", "mic0", "amg")
    ev.families = ()  # "closed", "free_surface" (empty: data.free_surface's one)
    ev.rhs = "smooth"  # or "divergence" (−div u* of a random smooth velocity)
    ev.rtol = 1e-6
    ev.rtols = ()  # looser tolerances, read off the same iterates
    ev.max_steps = 4000
    ev.n_orthogonal = 2
    ev.x64 = True
    return ev


def tiny(config: ml_collections.ConfigDict) -> None:
    config.data.resolution = 16
    config.data.n_ritz = 60
    config.data.n_rhs = 160
    config.data.n_valid = 16
    config.model.pairs = (1, 1, 1)
    config.eval.resolutions = (16, 32)
    config.eval.scene_seeds = (101,)
    config.eval.max_steps = 160
    defaults.shrink_training(
        config,
        steps=60,
        batch_size=8,
        log_every=20,
        eval_every=30,
        checkpoint_every=30,
        warmup_steps=5,
    )


def multires(config: ml_collections.ConfigDict) -> None:
    """Toward size independence: the shipped generator fine-tuned on closed
    and free-surface scenes at 64², 128² and 256² at once (Ritz data per
    scene: 800 Lanczos vectors, 1,000 right-hand sides), with a gain per
    level and geometry masks; evaluated on validation scenes (seeds 105 and
    106, both families, divergence right-hand sides) up to 512². The final
    held-out evaluation is `python -m benchmarks.dcdm_growth --model <run>`."""
    model = config.model
    model.kind, model.width, model.smooth, model.init = "multilevel", 8, 2, "poisson2d"
    model.gains, model.label_channels = 6, True  # 6 levels at 256²; 512² reuses the top gain
    config.data.resolutions, config.data.families = (64, 128, 256), ("closed", "free_surface")
    config.data.n_ritz, config.data.n_rhs = 800, 1000
    config.train.steps, config.train.batch_size = 400, 4
    config.train.eval_every, config.train.checkpoint_every = 100, 50
    config.optimizer.learning_rate, config.optimizer.warmup_steps = 3e-4, 20
    ev = config.eval
    ev.resolutions, ev.scene_seeds = (64, 128, 256, 512), (105, 106)
    ev.families = ("closed", "free_surface")
    ev.rhs, ev.rtols, ev.methods = "divergence", (1e-4,), ("dcdm", "mic0")


def get_config(variant: str | None = None) -> ml_collections.ConfigDict:
    config = defaults.base_config(
        "dcdm_poisson2d",
        "experiments.tasks.dcdm.dcdm",
        steps=10000,
        batch_size=16,
        learning_rate=1e-3,
        train={"log_every": 50, "eval_every": 500, "checkpoint_every": 500, "keep_checkpoints": 2},
        optimizer={"schedule": "cosine", "warmup_steps": 100, "clip_norm": 1.0},
    )
    config.data = data_block(2, 128, n_ritz=1600, n_rhs=4000)
    config.model = model_block()
    config.eval = eval_block((128, 256, 512), (101, 102))
    return defaults.select_variant(config, variant, tiny=tiny, multires=multires)
