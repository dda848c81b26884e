"""Online training of an MLP surrogate of the 2-D heat equation, fed by solver processes.

The paper's heat use case (Meyer et al., ICML 2023): each run of the study
(`solvers.streams.heat_fields`) solves the heat equation on the unit square for
five sampled temperatures (inside at t = 0, and the four sides), and streams
the field at `t_k = k · interval`. The surrogate is a fully connected network
mapping `(θ, t)` (the five temperatures scaled to [0, 1] over their ranges, and
`t / t_max`) to the whole `s × s` field, trained on the MSE (the paper's loss)
or the relative L2 error. Validation: the relative L2 error on held-out runs.
"""

from __future__ import annotations

from pathlib import Path

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from experiments.tasks.online.online_common import (
    Surrogate,
    online_task,
    validate_online_config,
)
from experiments.tasks.online.online_plots import (
    Panel,
    error_limits,
    plot_panels,
    predictions_title,
)
from sciml._checks import check_choice
from sciml.experiment import check_config, save_figure
from sciml.online import Study
from sciml.operators import relative_lp_loss


def make_inputs(study: Study):
    """`inputs(batch) -> x` `(n, n_params + 1)`: the run's parameters scaled to
    [0, 1] over the study's ranges, and `t / t_max`."""
    if any(scale != "linear" for scale in study.space.scales):
        raise ValueError(
            "the heat surrogate expects linear parameter ranges in config.study.space."
        )
    low, high = np.array(study.space.lows), np.array(study.space.highs)
    t_max = float(study.settings["n_steps"]) * float(study.settings["interval"])

    def inputs(batch):
        theta = (batch["params"] - low) / (high - low)
        t = batch["t"] / t_max
        return jnp.concatenate([theta, t], axis=-1).astype(batch["temperature"].dtype)

    return inputs


def apply(model, x, resolution: int):
    """The fields `(n, 1, s, s)` the MLP `model` predicts for inputs `x` `(n, n_in)`."""
    return jax.vmap(model)(x).reshape(x.shape[0], 1, resolution, resolution)


def make_loss_fn(inputs, resolution: int, loss: str):
    check_choice("config.train.loss", loss, ("mse", "l2"))

    def loss_fn(model, batch, key):
        pred, y = apply(model, inputs(batch), resolution), batch["temperature"]
        mse = jnp.mean((pred - y) ** 2)
        l2 = relative_lp_loss(pred, y, d=2, reduction="mean")
        return (mse if loss == "mse" else l2), {"mse": mse, "rel_l2": l2}

    return loss_fn


def make_evaluate(inputs, resolution: int):
    @eqx.filter_jit
    def errors(model, batch):
        pred, y = apply(model, inputs(batch), resolution), batch["temperature"]
        return relative_lp_loss(pred, y, d=2, reduction="mean"), jnp.mean((pred - y) ** 2)

    def evaluate(model, data) -> dict[str, float]:
        batch = {k: jnp.asarray(data[k]) for k in ("t", "temperature", "params")}
        l2, mse = errors(model, batch)
        return {"val_rel_l2": float(l2), "val_mse": float(mse)}

    return evaluate


def plot_predictions(
    model, inputs, data, plot_dir: Path, study: Study, step: int | None = None
) -> None:
    """Truth, prediction and |error| at three times of the first validation run
    (the errors on one colour scale), titled with the model's training step."""
    s = int(study.settings["resolution"])
    picks = [0, study.n_steps // 4, study.n_steps - 1]
    batch = {k: jnp.asarray(data[k][picks]) for k in ("t", "temperature", "params")}
    pred = np.asarray(apply(model, inputs(batch), s))
    truths = [np.asarray(batch["temperature"][i, 0]) for i in range(len(picks))]
    errors = error_limits([pred[i, 0] - truth for i, truth in enumerate(truths)])
    rows = []
    for i, (pick, truth) in enumerate(zip(picks, truths)):
        limits = (float(truth.min()), float(truth.max()))
        panels = [
            Panel(truth, "truth", "inferno", limits),
            Panel(pred[i, 0], "prediction", "inferno", limits),
            Panel(np.abs(pred[i, 0] - truth), "|error|", "magma", errors),
        ]
        t = float(data["t"][pick][0])
        rows.append((f"validation run {int(data['run'][pick])}\nt = {t:.3g}", panels))
    axes = plot_panels(rows, title=predictions_title(step))
    save_figure(axes[0, 0], plot_dir / "predictions.png", dpi=110)


def surrogate(config, study: Study) -> Surrogate:
    """The MLP of `config.model` (`width`, `depth` hidden layers, ReLU) on `(θ, t) ↦ T`."""
    s = int(study.settings["resolution"])
    model = eqx.nn.MLP(
        in_size=study.space.dim + 1,
        out_size=s * s,
        width_size=int(config.model.width),
        depth=int(config.model.depth),
        activation=jax.nn.relu,
        key=jax.random.key(int(config.seed)),
    )
    inputs = make_inputs(study)
    return Surrogate(
        model=model,
        loss_fn=make_loss_fn(inputs, s, config.train.loss),
        evaluate=make_evaluate(inputs, s),
        plot=lambda model, data, plot_dir, step=None: plot_predictions(
            model, inputs, data, plot_dir, study, step
        ),
    )


def validate_config(config) -> None:
    """The online blocks, the MLP's width and depth and the loss, checked by the
    runner before anything is written."""
    validate_online_config(config)
    check_config(
        config,
        positive=(
            "model.width",
            "model.depth",
        ),
        choices={"train.loss": ("mse", "l2")},
    )


TASK = online_task(surrogate, validate_config)
