"""2-D Navier–Stokes: a TFNO (Tucker, rank 0.1) learns the map `ω(0) ↦ ω(T)`.

Vorticity form on the periodic unit square with the FNO forcing, ν = 1e-3,
T = 2, 64² grid; 1,000 training trajectories from our pseudo-spectral solver,
generated in-process (a few minutes on a CPU); 2,000 steps of batch 8 (about
15 minutes on a laptop CPU). Evaluated at 64² and zero-shot
at 128² (the same initial functions on the finer grid).

`python -m experiments.run --config experiments/configs/ns_tfno.py[:tiny]`;
`--config.data.path=FILE` (and `--config.data.path_2x=FILE`) reads files written
by `python -m solvers.generate navier_stokes` instead of generating in-process
(the target is the last recorded time).
"""

import ml_collections

from experiments.configs._operators import base_config, data_config, make_tiny
from sciml.experiment import About, defaults


ABOUT = About("a Tucker TFNO on Navier–Stokes 64², zero-shot at 128²", minutes=18, tiny_minutes=0.2)


def get_config(variant: str | None = None) -> ml_collections.ConfigDict:
    config = base_config("ns_tfno", "experiments.tasks.operators.operators_ns", steps=2000)
    config.train.batch_size = 8
    config.data = data_config()
    config.data.n_train = 1000
    config.data.n_test = 100
    config.data.resolution = 64
    config.data.viscosity = 1e-3
    config.data.t_final = 2.0
    config.data.dt = 5e-3  # relative difference to dt = 1e-3 at T = 5: 8e-5
    config.data.super_resolution = True
    config.model.n_modes = (16, 16)
    config.model.factorization = "tucker"
    config.model.rank = 0.1

    return defaults.select_variant(config, variant, tiny=tiny)


def tiny(config: ml_collections.ConfigDict) -> None:
    make_tiny(config)
    config.data.n_train = 16
    config.data.n_test = 4
    config.data.resolution = 32
    config.data.t_final = 0.1
    config.data.dt = 1e-2
