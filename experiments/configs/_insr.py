"""Config blocks shared by the INSR configs (not a config itself)."""

from __future__ import annotations

import ml_collections

from sciml.experiment import defaults


def insr_config(name: str, *, width: int, hidden_layers: int) -> ml_collections.ConfigDict:
    """The run skeleton in float64 and the SIREN `field` block (`omega0 = 30`).

    An INSR task trains no model: its config has no `optimizer` block, and of
    `train` it uses the chunking of long runs (`checkpoint_every` steps a
    chunk, `keep_checkpoints`)."""
    config = defaults.base_config(
        name,
        f"experiments.tasks.insr.{name}",
        steps=0,
        train={"checkpoint_every": 500, "keep_checkpoints": 2},
    )
    config.x64 = True
    config.field = ml_collections.ConfigDict()
    config.field.name = "siren"
    config.field.width = width
    config.field.hidden_layers = hidden_layers
    config.field.omega0 = 30.0
    return config


def add_adam_and_initial(config: ml_collections.ConfigDict, *, initial_steps: int) -> None:
    """The `solver` block's Adam settings (used when `solver.name == "adam"`)
    and the `initial` block (least-squares iterations of the initial fit)."""
    config.solver.learning_rate = 1e-4  # adam only
    config.solver.max_iters = 20000  # adam only
    config.initial = ml_collections.ConfigDict()
    config.initial.max_steps = initial_steps
