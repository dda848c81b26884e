"""Quickstart: learn the solution operator of the 1-D periodic heat equation.

Data are made in-process and are exact: the initial temperature
`u0(x) = Σ_k a_k cos(2πkx) + b_k sin(2πkx)` with `a_k, b_k ~ N(0, k^-2)` evolves
under `u_t = κ u_xx` to `u(x, T) = Σ_k e^{-4π²k²κT} (a_k cos(2πkx) + b_k sin(2πkx))`.
An MLP maps `u0` on the grid to `u(·, T)` and is scored by the relative L2
error on held-out samples.
"""

from __future__ import annotations

from pathlib import Path

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from sciml.experiment import Experiment, Headline, Task, check_config, save_figure, train_experiment


HEADLINE = Headline("test_rel_l2", "test rel. L2", percent=True)


def heat_data(key, n: int, resolution: int, n_modes: int, diffusivity: float, t_final: float):
    """`n` pairs `(u0, u(T))`, each of shape `(n, resolution)`, exact to round-off."""
    x = jnp.arange(resolution) / resolution
    k = jnp.arange(1, n_modes + 1)
    coeffs = jax.random.normal(key, (2, n, n_modes)) / k
    basis_cos = jnp.cos(2 * jnp.pi * k[:, None] * x)  # (modes, resolution)
    basis_sin = jnp.sin(2 * jnp.pi * k[:, None] * x)
    decay = jnp.exp(-4 * jnp.pi**2 * k**2 * diffusivity * t_final)
    u0 = coeffs[0] @ basis_cos + coeffs[1] @ basis_sin
    ut = (coeffs[0] * decay) @ basis_cos + (coeffs[1] * decay) @ basis_sin
    return u0, ut


def relative_l2(pred, true):
    """Mean over samples of `‖pred − true‖₂ / ‖true‖₂`; inputs `(n, resolution)`."""
    return jnp.mean(jnp.linalg.norm(pred - true, axis=-1) / jnp.linalg.norm(true, axis=-1))


def build(config) -> Experiment:
    data, model_cfg = config.data, config.model
    key_train, key_test, key_model = jax.random.split(jax.random.key(config.seed), 3)
    args = (data.resolution, data.n_modes, data.diffusivity, data.t_final)
    x_train, y_train = heat_data(key_train, data.n_train, *args)
    x_test, y_test = heat_data(key_test, data.n_test, *args)
    model = eqx.nn.MLP(
        data.resolution,
        data.resolution,
        model_cfg.width,
        model_cfg.depth,
        activation=jax.nn.gelu,
        key=key_model,
    )
    batch_size = config.train.batch_size

    @jax.jit
    def batch_fn(step, key):
        index = jax.random.randint(key, (batch_size,), 0, data.n_train)
        return x_train[index], y_train[index]

    def loss_fn(model, batch, key):
        x, y = batch
        pred = jax.vmap(model)(x)
        loss = jnp.mean((pred - y) ** 2) / jnp.mean(y**2)
        return loss, {"rel_l2": relative_l2(pred, y)}

    @eqx.filter_jit
    def evaluate(model):
        return {"test_rel_l2": relative_l2(jax.vmap(model)(x_test), y_test)}

    def plot(model, plot_dir: Path):
        axes = plot_predictions(x_test[:3], y_test[:3], jax.vmap(model)(x_test[:3]))
        save_figure(axes[0], plot_dir / "predictions.png")

    return Experiment(model=model, loss_fn=loss_fn, batch_fn=batch_fn, evaluate=evaluate, plot=plot)


def plot_predictions(x, y, pred, axes=None):
    """Each sample's initial temperature, exact `u(T)` and the prediction, side by side.

    **Arguments:** `x`, `y`, `pred`: `(n, resolution)` on the periodic grid;
    `axes`, `n` matplotlib axes (default: a new figure).

    **Returns:** the axes.
    """
    import matplotlib.pyplot as plt

    new = axes is None
    if new:
        _, axes = plt.subplots(1, len(x), figsize=(4 * len(x), 3.2), sharey=True)
    grid = np.arange(x.shape[-1]) / x.shape[-1]
    for i, ax in enumerate(axes):
        ax.plot(grid, np.asarray(x[i]), color="0.6", label="initial $u_0$")
        ax.plot(grid, np.asarray(y[i]), "k", label="exact $u(T)$")
        ax.plot(grid, np.asarray(pred[i]), "C1--", label="MLP prediction")
        ax.set(xlabel="x", title=f"test sample {i}")
    axes[0].legend(fontsize=8)
    if new:
        axes[0].figure.tight_layout()
    return axes


def train_and_evaluate(config, workdir: Path) -> dict:
    """Trains the MLP with the standard loop; the summary holds `test_rel_l2`."""
    return train_experiment(build(config), config, workdir).summary


def validate_config(config) -> None:
    """The data and model sizes, checked by the runner before anything is written."""
    check_config(
        config,
        positive=(
            "data.n_train", "data.n_test", "data.resolution", "data.n_modes",
            "model.width", "model.depth",
        ),
        positive_numbers=("data.diffusivity", "data.t_final"),
    )  # fmt: skip


TASK = Task(
    train_and_evaluate, validate=validate_config, headline=HEADLINE, data_parallel=True, build=build
)
