"""Plots of the SSM experiments: each takes `ax=None` and returns the axis."""

from __future__ import annotations

from typing import Any


def plot_accuracy(
    sweep: list[float],
    curves: dict[str, list[float]],
    clean: dict[str, float],
    omega: float,
    *,
    labels: dict[str, str] | None = None,
    ax: Any = None,
) -> Any:
    """Test accuracy against the noise amplitude, one line per model.

    **Arguments:** `sweep`, the noise amplitudes; `curves`, each model's
    accuracy at them; `clean`, each model's accuracy without noise (drawn at
    amplitude 0); `omega`, the noise frequency (in the title); `labels`, each
    model's legend entry (default: its name); `ax`, a matplotlib axis (default:
    a new figure).

    **Returns:** the axis.
    """
    import matplotlib.pyplot as plt

    new = ax is None
    if new:
        _, ax = plt.subplots(figsize=(5, 3.5))
    for name, accuracies in curves.items():
        label = (labels or {}).get(name, name)
        ax.plot([0.0, *sweep], [clean[name], *accuracies], "o-", label=label)
    ax.set(
        xlabel="noise amplitude a (noise a·U(0,1)·cos ωt)",
        ylabel="test accuracy",
        title=f"noise at ω = {omega:.1f}",
    )
    ax.legend()
    if new:
        ax.figure.tight_layout()
    return ax
