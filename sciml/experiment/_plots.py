"""The runner's own plot: the training loss from `metrics.jsonl`."""

from __future__ import annotations

from pathlib import Path

from sciml.training import read_metrics


def plot_loss(metrics_path: str | Path, plot_dir: str | Path) -> None:
    """Plots the training loss from `metrics.jsonl` to `plot_dir/loss.png`.

    Writes nothing when the file holds no training records.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    train = [m for m in read_metrics(metrics_path) if m.get("split") == "train"]
    if not train:
        return
    fig, ax = plt.subplots(figsize=(5, 3.5))
    ax.semilogy([m["step"] for m in train], [float(m["loss"]) for m in train])
    ax.set(xlabel="step", ylabel="training loss")
    fig.tight_layout()
    fig.savefig(Path(plot_dir) / "loss.png", dpi=120)
    plt.close(fig)
