"""The run plots speak to a reader: losses and metrics named in words, legends
that say what each line is, baselines and fractions that say of what.

Before: `loss.png` said "training l2 loss" for a relative L2 error, its legend
repeated the axis label and the validation error was not drawn; the online
validation legend said "persistence", the buffer's y label "fraction".
"""

import json

import numpy as np
import pytest

from experiments.tasks.online.online_plots import plot_buffer, plot_validation
from sciml.experiment import metric_words, plot_loss
from sciml.experiment._plots import smooth


def _texts(ax):
    legend = ax.get_legend()
    labels = [t.get_text() for t in legend.get_texts()] if legend else []
    return labels, [ax.get_xlabel(), ax.get_ylabel()]


def _in_words(text):
    # a config key or metric key (`val_rel_l2`, `tucker:0.1`) is not words
    return text and "_" not in text and ":" not in text.replace(": ", " ")


@pytest.fixture
def metrics(tmp_path):
    rng = np.random.default_rng(0)
    records = [
        {"split": "train", "step": s, "loss": float(0.5 / s * rng.uniform(0.5, 2))}
        for s in range(1, 41)
    ] + [
        {"split": "eval", "step": s, "val_rel_l2": 0.3 / s, "persistence_rel_l2": 0.2}
        for s in (10, 20, 40)
    ]
    path = tmp_path / "metrics.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return path, records


@pytest.mark.parametrize("loss_name", ["l2", "mse"])
def test_loss_plot_names_the_loss_and_overlays_validation(metrics, loss_name):
    import matplotlib.pyplot as plt

    path, _ = metrics
    fig = plot_loss(path, run_name="demo", loss_name=loss_name)
    axes = fig.axes
    legend = [t for ax in axes for t in _texts(ax)[0]]
    ylabels = [ax.get_ylabel() for ax in axes]
    plt.close(fig)
    words = {"l2": "relative L2 error", "mse": "mean squared error"}[loss_name]
    assert f"training loss: {words}" in ylabels[0]
    assert "training, smoothed" in legend and "training, per batch" in legend
    assert "validation relative L2 error" in legend
    assert "persistence baseline, relative L2 error" in legend
    assert all(_in_words(t) for t in legend + ylabels), legend + ylabels
    # an MSE loss and relative errors have different units: two y axes
    assert len(axes) == (2 if loss_name == "mse" else 1)


def test_online_plots_label_in_words(metrics):
    import matplotlib.pyplot as plt

    _, records = metrics
    evals = [r for r in records if r["split"] == "eval"]
    axes = plot_validation(evals, {10: 100, 20: 200, 40: 400}, title="t")
    train = [
        {"step": s, "received": 10 * s, "trained": 16 * s, "fill": 0.5, "reuse": 1.0}
        for s in (1, 2, 3)
    ]
    buffer_axes = plot_buffer(train, title="t")
    texts = [_texts(ax) for ax in list(axes) + list(buffer_axes)]
    plt.close("all")
    assert "persistence baseline (next state = current state)" in texts[0][0]
    assert "buffer" in texts[3][1][1]  # the fill says of what it is a fraction
    assert all(_in_words(t) for legend, labels in texts for t in legend + labels), texts


def test_metric_words():
    assert metric_words("l2") == "relative L2 error"
    assert metric_words("val_rel_h1") == "validation relative H1 error"
    assert metric_words("final_loss") == "final loss"


def test_smooth_is_the_bias_corrected_moving_average():
    values = np.random.default_rng(1).uniform(size=30)
    w = 0.9
    # direct weighted mean: y_t = sum_i w^(t-i) x_i / sum_i w^(t-i)
    expected = [
        np.sum(w ** np.arange(t, -1, -1) * values[: t + 1]) / np.sum(w ** np.arange(t + 1))
        for t in range(30)
    ]
    # float64 sums in a different order: agreement to ~1e-16; 1e-12 leaves room
    np.testing.assert_allclose(smooth(list(values), w), expected, rtol=1e-12)


def test_dcdm_scene_plot_has_one_key_in_words():
    import matplotlib.pyplot as plt

    from experiments.tasks.dcdm.dcdm_plots import plot_scene_residuals

    history = {"dcdm": 0.5 ** np.arange(5), "cg": 0.8 ** np.arange(9), "ic0": 0.7 ** np.arange(7)}
    axes = plot_scene_residuals({"a": history, "b": history}, 1e-3)
    (legend,) = axes.flat[0].figure.legends
    labels = [t.get_text() for t in legend.get_texts()]
    plt.close("all")
    assert labels == [
        "DCDM (learned directions)",
        "conjugate gradient (CG)",
        "CG, incomplete Cholesky (IC0)",
        "tolerance 0.001",
    ]
