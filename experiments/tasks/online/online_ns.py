"""Online training of a TFNO on 2-D Navier–Stokes, fed by solver processes.

The study's runs are Navier–Stokes solutions (`solvers.streams.navier_stokes_pairs`)
with a sampled viscosity ν and a random initial vorticity; each time step of a
run is a pair `(ω(t), ω(t + Δ))`. The TFNO maps `[ω(t), c(ν)]` to `ω(t + Δ)`,
where `c(ν)` is a constant channel with the standardised `log ν`. Validation:
the relative L2 error on held-out runs, beside the persistence baseline
`ω(t + Δ) ≈ ω(t)` (the error of predicting no change).
"""

from __future__ import annotations

import math
from pathlib import Path

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
from experiments.tasks.operators.operators_common import (
    build_model,
    predict,
    validate_operator_config,
)
from sciml._checks import check_choice
from sciml.experiment import check_config, save_figure
from sciml.online import Study
from sciml.operators import h1_loss, relative_lp_loss


def viscosity_channel(study: Study):
    """`c(params)`: `log ν` scaled to [-1, 1] over the study's range."""
    index = study.space.names.index("viscosity")
    low = math.log(study.space.lows[index])
    high = math.log(study.space.highs[index])

    def channel(params):
        return (2 * jnp.log(params[..., index]) - (low + high)) / (high - low)

    return channel


def make_inputs(study: Study):
    """`inputs(batch) -> (x, y)`: `x = [ω(t), c(ν)]` `(n, 2, s, s)`, `y = ω(t + Δ)`."""
    channel = viscosity_channel(study)

    def inputs(batch):
        w = batch["w"]
        c = channel(batch["params"])[:, None, None, None] * jnp.ones_like(w)
        return jnp.concatenate([w, c], axis=1), batch["w_next"]

    return inputs


def make_loss_fn(inputs, loss: str):
    check_choice("config.train.loss", loss, ("h1", "l2"))

    def loss_fn(model, batch, key):
        x, y = inputs(batch)
        pred = jax.vmap(model)(x)
        l2 = relative_lp_loss(pred, y, d=2, reduction="mean")
        h1 = h1_loss(pred, y, d=2, periodic=True, domain_length=1.0, reduction="mean")
        return (h1 if loss == "h1" else l2), {"rel_l2": l2, "rel_h1": h1}

    return loss_fn


def make_evaluate(inputs):
    def evaluate(model, validation) -> dict[str, float]:
        x, y = inputs({k: jnp.asarray(validation[k]) for k in ("w", "w_next", "params")})
        pred = predict(model, x)
        return {
            "val_rel_l2": float(relative_lp_loss(pred, y, d=2, reduction="mean")),
            "val_rel_h1": float(
                h1_loss(pred, y, d=2, periodic=True, domain_length=1.0, reduction="mean")
            ),
            "persistence_rel_l2": float(relative_lp_loss(x[:, :1], y, d=2, reduction="mean")),
        }

    return evaluate


def plot_predictions(
    model, inputs, validation, plot_dir: Path, study: Study, step: int | None = None
) -> None:
    """ω(t), truth ω(t + Δ), prediction and |error| for three validation steps
    (the errors on one colour scale), titled with the model's training step."""
    n_steps = study.n_steps
    interval = float(study.settings.get("interval", float("nan")))  # Δ: time between the pair
    picks = [0, n_steps // 2, validation["w"].shape[0] - 1]
    batch = {k: jnp.asarray(validation[k][picks]) for k in ("w", "w_next", "params")}
    x, y = inputs(batch)
    pred = np.asarray(predict(model, x))
    truths = [np.asarray(y[i, 0]) for i in range(len(picks))]
    errors = error_limits([pred[i, 0] - truth for i, truth in enumerate(truths)])
    rows = []
    for i, (pick, truth) in enumerate(zip(picks, truths)):
        vmax = float(np.max(np.abs(truth)))
        limits, bar = (-vmax, vmax), "vorticity ω"
        panels = [
            Panel(np.asarray(x[i, 0]), "input ω(t)", "RdBu_r", limits, bar),
            Panel(truth, f"truth ω(t + Δ), Δ = {interval:g}", "RdBu_r", limits, bar),
            Panel(pred[i, 0], "prediction of ω(t + Δ)", "RdBu_r", limits, bar),
            Panel(np.abs(pred[i, 0] - truth), "|prediction − truth|", "magma", errors, "|ω error|"),
        ]
        run, step_of_run = int(validation["run"][pick]), int(validation["step"][pick])
        nu = float(validation["params"][pick][study.space.names.index("viscosity")])
        rows.append((f"validation run {run}, step {step_of_run}\nν = {nu:.2e}", panels))
    axes = plot_panels(rows, title=predictions_title(step))
    save_figure(axes[0, 0], plot_dir / "predictions.png", dpi=110)


def surrogate(config, study: Study) -> Surrogate:
    """The TFNO of `config.model` on `[ω(t), c(ν)] ↦ ω(t + Δ)`."""
    model = build_model(
        config.model, in_channels=2, out_channels=1, key=jax.random.key(config.seed)
    )
    inputs = make_inputs(study)
    return Surrogate(
        model=model,
        loss_fn=make_loss_fn(inputs, config.train.loss),
        evaluate=make_evaluate(inputs),
        plot=lambda model, data, plot_dir, step=None: plot_predictions(
            model, inputs, data, plot_dir, study, step
        ),
    )


def validate_config(config) -> None:
    """The online blocks, the TFNO's `model` block and the loss, checked by the
    runner before anything is written."""
    validate_online_config(config)
    validate_operator_config(config, data=False)
    check_config(config, choices={"train.loss": ("h1", "l2")})


TASK = online_task(surrogate, validate_config)
