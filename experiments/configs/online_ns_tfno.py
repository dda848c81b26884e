"""The flagship: online training of a TFNO on 2-D Navier–Stokes (`make run`).

Solver processes on this machine run Navier–Stokes with a sampled viscosity
ν ∈ [1e-3, 1e-2] (log-uniform, Monte Carlo) and a random initial vorticity on a
32² grid, and stream 16 time steps each, pairs `(ω(t), ω(t + 0.5))`, to the
trainer over ZeroMQ (authenticated, loopback). The trainer keeps them in a
reservoir buffer and trains a TFNO (Tucker, rank 0.1) on `[ω(t), log ν] ↦
ω(t + 0.5)`; validation on 4 held-out runs. About 10 minutes on 2 CPU cores.
Training stops at its 1,500 steps, before the 1,000 planned runs are all in
(the solvers still running are cancelled), so the result does not depend on
how fast the solvers are next to the trainer.

`python -m experiments.run --config experiments/configs/online_ns_tfno.py[:tiny]`
"""

import ml_collections

from experiments.configs._online import online_config, shrink_online
from experiments.configs._operators import model_config
from sciml.experiment import About, defaults


ABOUT = About(
    "the flagship (make run): online TFNO on Navier–Stokes streamed by solvers",
    minutes=10,
    tiny_minutes=0.5,
)


def get_config(variant: str | None = None) -> ml_collections.ConfigDict:
    config = online_config(
        "online_ns_tfno",
        "experiments.tasks.online.online_ns",
        steps=1500,
        batch_size=16,
        learning_rate=3e-3,
        simulation="solvers.streams.navier_stokes_pairs",
        space={"viscosity": (1e-3, 1e-2, "log")},
        n_runs=1000,
        n_steps=16,
        settings={"resolution": 32, "n_steps": 16, "interval": 0.5, "dt": 5e-3},
    )
    config.train.loss = "l2"
    config.train.eval_every = 150
    config.train.checkpoint_every = 150
    config.buffer.capacity = 1600
    config.buffer.watermark = 160
    config.model = model_config(
        n_modes=(12, 12), hidden_channels=24, n_layers=4, factorization="tucker", rank=0.1
    )
    return defaults.select_variant(config, variant, tiny=tiny)


def tiny(config: ml_collections.ConfigDict) -> None:
    """Seconds-long: a 16² grid, 8 runs of 4 steps, a small TFNO; a FIRO buffer
    that holds every sample and reads each 8 times (64 batches of 4 > 40 steps)."""
    shrink_online(
        config,
        n_runs=8,
        n_steps=4,
        runs_per_job=3,
        settings={"resolution": 16, "interval": 0.2, "dt": 1e-2},
        capacity=32,
    )
    config.model.n_modes = (4, 4)
    config.model.hidden_channels = 8
    config.model.n_layers = 2
