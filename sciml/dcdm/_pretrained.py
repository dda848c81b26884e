"""Trained direction generators shipped with the package.

`pretrained("poisson2d")` and `pretrained("poisson3d")` are
[`MultilevelDCDMNet`][sciml.dcdm.MultilevelDCDMNet]s (fully convolutional, one
set of weights for every grid size) for the 2-D and 3-D voxel pressure-Poisson
matrices of `solvers.poisson` (fluid unknowns, solid walls as Neumann, air as
Dirichlet), trained with the A-norm loss: the 2-D one on one 64² scene with
obstacles and a free surface, then fine-tuned for 300 steps on one 128² scene
(which brings its growth per grid doubling under 1.5×), the 3-D one, like the
reference code, on one empty closed box (16³). `pretrained("poisson2d_multires")`
is the 2-D one fine-tuned on closed tanks and free-surface scenes at 64², 128²
and 256² at once, with a gain per level and geometry masks (it takes the label
channels: pass `labels_onehot` to `direction_fn`); on closed tanks its
iteration count hardly grows with the grid up to 512². Their weights are stored as raw leaves
(`equinox.tree_serialise_leaves`, no pickle) beside a JSON file with the
architecture, the training command and one iteration count recorded when the
weights were written, which the tests reproduce.
"""

from __future__ import annotations

import json
from importlib import resources

import equinox as eqx
import jax

from ._multilevel import MultilevelDCDMNet


NAMES = ("poisson2d", "poisson3d", "poisson2d_multires")


def pretrained_info(name: str = "poisson2d") -> dict:
    """The JSON record beside the weights of `name`: `architecture`,
    `training_command` and `recorded` (scene, right-hand side, tolerance and
    the iteration count measured when the weights were written)."""
    if name not in NAMES:
        raise ValueError(f"`name` must be one of {NAMES}, got {name!r}.")
    return json.loads(resources.files(__package__).joinpath(f"weights/{name}.json").read_text())


def pretrained(name: str = "poisson2d") -> MultilevelDCDMNet:
    """A trained direction generator, ready for [`direction_fn`][sciml.dcdm.direction_fn].

    ```python
    import jax

    jax.config.update("jax_enable_x64", True)  # the float64 outer loop; before any array

    import jax.numpy as jnp
    import sciml.dcdm


    def poisson(x):  # the 5-point Laplacian of a 64² box of fluid (Dirichlet walls)
        xp = jnp.pad(x, 1)
        return 4 * x - xp[:-2, 1:-1] - xp[2:, 1:-1] - xp[1:-1, :-2] - xp[1:-1, 2:]


    fluid = jnp.ones((64, 64))  # 1 at the unknowns, 0 at solid and air cells
    f = sciml.dcdm.direction_fn(sciml.dcdm.pretrained("poisson2d"), fluid)
    solver = sciml.dcdm.DCDM(rtol=1e-6, max_steps=1000)
    sol = sciml.dcdm.solve(poisson, jnp.ones((64, 64)), f, solver)
    print(sol.stats["num_steps"])
    ```

    **Arguments:** `name`: `"poisson2d"` (2-D), trained by

    ```
    python -m experiments.run --config experiments/configs/dcdm_poisson2d.py \\
      --config.model.kind=multilevel --config.model.width=8 --config.model.smooth=2 \\
      --config.data.resolution=64 --config.data.n_ritz=800 --config.data.n_rhs=1000 \\
      --config.train.steps=1500 --config.train.batch_size=8 --workdir runs/ml64
    python -m experiments.run --config experiments/configs/dcdm_poisson2d.py \
      --config.model.kind=multilevel --config.model.width=8 --config.model.smooth=2 \
      --config.model.init=runs/ml64 --config.data.resolution=128 \
      --config.data.n_ritz=800 --config.data.n_rhs=1000 --config.train.steps=300 \
      --config.train.batch_size=8 --config.optimizer.learning_rate=3e-4 --workdir runs/ft128
    ```

    (the A-norm loss is the default for this model; the second run fine-tunes
    the first's weights at 128²), `"poisson2d_multires"` (2-D, those weights
    fine-tuned by `python -m experiments.run --config
    experiments/configs/dcdm_poisson2d.py:multires`: 400 steps on closed and
    free-surface scenes at 64², 128² and 256² together, 6 per-level gains,
    geometry masks; bind it with `direction_fn(net, fluid, label_channels(labels))`),
    or `"poisson3d"` (3-D,
    the same architecture with 3×3×3 convolutions, width 4), trained on an
    empty closed 16³ box by `python -m benchmarks.dcdm --dim 3 --model
    multilevel --train-scene empty_box ...` (which also writes the weights;
    the full command is in `pretrained_info("poisson3d")["training_command"]`,
    as is the 2-D one in `pretrained_info("poisson2d")`).

    **Returns:** the network, float32 parameters.
    """
    info = pretrained_info(name)
    arch = info["architecture"]
    skeleton = MultilevelDCDMNet(
        arch["dim"],
        width=arch["width"],
        smooth=arch["smooth"],
        coarsest=arch["coarsest"],
        # written only for weights with per-level gains or geometry masks
        gains=arch.get("gains", 1),
        geometry=arch.get("geometry", False),
        key=jax.random.key(0),
    )
    with resources.files(__package__).joinpath(f"weights/{name}.eqx").open("rb") as f:
        return eqx.tree_deserialise_leaves(f, skeleton)
