"""Plots of the ParaRNN experiments: each takes `axes=None` and returns the axes."""

from __future__ import annotations

import math
from typing import Any


def plot_learning_curves(curves: dict[str, dict[int, float]], axes: Any = None) -> Any:
    """Both training-loss curves (bits per byte), and their difference below.

    **Arguments:** `curves`, the training loss (nats) per step of each mode,
    `"sequential"` and `"newton"`; `axes`, two matplotlib axes sharing the step
    axis (default: a new figure).

    **Returns:** the two axes.
    """
    import matplotlib.pyplot as plt

    new = axes is None
    if new:
        _, axes = plt.subplots(2, 1, figsize=(6, 5), sharex=True, height_ratios=(3, 1))
    top, bottom = axes
    names = {"sequential": "sequential evaluation", "newton": "Newton-parallel evaluation"}
    for mode, style in zip(("sequential", "newton"), ("-", "--")):
        steps = sorted(curves[mode])
        values = [curves[mode][s] / math.log(2) for s in steps]
        top.plot(steps, values, style, label=names[mode])
    top.set(ylabel="training loss (bits / byte)")
    top.legend()
    common = sorted(set(curves["sequential"]) & set(curves["newton"]))
    bottom.plot(common, [curves["newton"][s] - curves["sequential"][s] for s in common], "k.-")
    bottom.set(xlabel="optimiser step", ylabel="Newton − sequential\n(nats)")
    if new:
        top.figure.tight_layout()
    return axes
