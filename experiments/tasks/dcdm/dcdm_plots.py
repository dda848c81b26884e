"""Plots of the DCDM experiments: each takes `ax=None` / `axes=None` and returns them."""

from __future__ import annotations

from typing import Any

import numpy as np


METHOD_NAMES = {
    "dcdm": "DCDM (learned directions)",
    "cg": "conjugate gradient (CG)",
    "jacobi": "CG, Jacobi preconditioner",
    "ic0": "CG, incomplete Cholesky (IC0)",
    "mic0": "CG, modified incomplete Cholesky (MIC0)",
    "amg": "CG, algebraic multigrid (AMG)",
}


def plot_residuals(
    histories: dict[str, np.ndarray], rtol: float, *, title: str = "", ax: Any = None
) -> Any:
    """Relative residual `‖r‖ / ‖b‖` against the iteration, one line per method.

    **Arguments:** `histories`, each method's residual history (DCDM drawn
    thicker); `rtol`, the tolerance (a dotted line); `title`; `ax`, a matplotlib
    axis (default: a new figure).

    **Returns:** the axis.
    """
    import matplotlib.pyplot as plt

    if ax is None:
        _, ax = plt.subplots(figsize=(4.2, 3.3))
    for method, h in histories.items():
        label = METHOD_NAMES.get(method, method)
        ax.semilogy(h, label=label, lw=2 if method == "dcdm" else 1.2)
    ax.axhline(rtol, color="0.5", ls=":", lw=1, label=f"tolerance {rtol:g}")
    ax.set(title=title, xlabel="iteration", ylabel="relative residual ‖r‖ / ‖b‖")
    return ax


def plot_scene_residuals(histories: dict[str, dict], rtol: float, axes: Any = None) -> Any:
    """`plot_residuals` for every scene, up to three to a row.

    **Arguments:** `histories`, each scene's method histories; `rtol`; `axes`,
    a 2-D array of at least as many matplotlib axes as scenes (default: a new
    figure); the spare ones are switched off.

    **Returns:** the axes.
    """
    import matplotlib.pyplot as plt

    names = list(histories)
    new = axes is None
    if new:
        cols = min(3, len(names))
        rows = -(-len(names) // cols)
        _, axes = plt.subplots(rows, cols, figsize=(4.2 * cols, 3.3 * rows), squeeze=False)
    for ax, name in zip(axes.flat, names, strict=False):
        plot_residuals(histories[name], rtol, title=name, ax=ax)
    for ax in list(axes.flat)[len(names) :]:
        ax.axis("off")
    fig = axes.flat[0].figure
    # one key for the whole figure, below the panels: every panel has the same methods
    handles, labels = axes.flat[0].get_legend_handles_labels()
    if new:
        fig.tight_layout(rect=(0, 0.12 / axes.shape[0], 1, 1))
    fig.legend(handles, labels, loc="lower center", ncol=min(4, len(labels)), fontsize=9)
    return axes
