"""Online training of an MLP surrogate of the 2-D heat equation (the paper's use case).

Solver processes run the heat equation on a 32² node grid (explicit Euler, the
5-point Laplacian) with five temperatures sampled uniformly in [0, 1] (inside
at t = 0, and the four sides; Monte Carlo) and stream the field at 100 times
`t_k = k · 1e-3` each. The trainer keeps them in a reservoir buffer and trains
an MLP `(θ, t) ↦ T` (6 → 256 → 256 → 32², ReLU, MSE; the SC23 paper's
surrogate on a smaller grid); validation on 8 held-out runs.

`python -m experiments.run --config experiments/configs/online_heat.py[:tiny]`
"""

import ml_collections

from experiments.configs._online import online_config, shrink_online
from sciml.experiment import About, defaults
from solvers.streams import HEAT_PARAMS


ABOUT = About(
    "online training of an MLP on 2-D heat-equation runs streamed by solvers",
    minutes=8,
    tiny_minutes=0.3,
)


def get_config(variant: str | None = None) -> ml_collections.ConfigDict:
    config = online_config(
        "online_heat",
        "experiments.tasks.online.online_heat",
        steps=40000,
        batch_size=64,
        learning_rate=1e-3,
        simulation="solvers.streams.heat_fields",
        space={name: (0.0, 1.0) for name in HEAT_PARAMS},
        n_runs=6000,
        n_steps=100,
        settings={"resolution": 32, "n_steps": 100, "interval": 1e-3, "dt": 2.5e-4},
    )
    config.train.loss = "mse"
    config.train.eval_every = 2000
    config.train.checkpoint_every = 5000
    config.study.runs_per_job = 100
    config.study.n_validation = 8
    config.buffer.capacity = 10000
    config.buffer.watermark = 1000
    config.model = ml_collections.ConfigDict({"width": 256, "depth": 2})
    return defaults.select_variant(config, variant, tiny=tiny)


def tiny(config: ml_collections.ConfigDict) -> None:
    """Seconds-long: a 9² grid, 8 runs of 5 steps, a small MLP; a FIRO buffer
    that holds every sample and reads each 8 times (80 batches of 4 > 40 steps)."""
    shrink_online(
        config,
        n_runs=8,
        n_steps=5,
        runs_per_job=4,
        settings={"resolution": 9, "interval": 4e-3, "dt": 2e-3},
        capacity=40,
    )
    config.model.width = 32
