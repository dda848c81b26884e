"""Plots of the online experiments: each takes `axes=None` and returns the axes."""

from __future__ import annotations

from typing import Any, NamedTuple

from sciml.experiment import metric_words, readable_log_ticks


def _axes(axes: Any, n: int, figsize: tuple[float, float]) -> Any:
    import matplotlib.pyplot as plt

    return plt.subplots(1, n, figsize=figsize)[1] if axes is None else axes


def _finish(axes: Any, title: str) -> None:
    """The title over a new figure's panels, laid out."""
    fig = axes[0].figure
    fig.suptitle(title)
    fig.tight_layout()


def plot_validation(
    evals: list[dict],
    received_at: dict[int, int],
    *,
    metric: str = "val_rel_l2",
    title: str = "",
    axes=None,
) -> Any:
    """The validation error against the optimiser step (left) and the samples
    received by then (right), with the persistence baseline when recorded.

    **Arguments:** `evals`, the `"eval"` records of `metrics.jsonl`;
    `received_at`, the samples received at each training step; `metric`; `axes`,
    two matplotlib axes (default: a new figure).

    **Returns:** the axes.
    """
    new = axes is None
    axes = _axes(axes, 2, (10, 3.6))
    steps = [r["step"] for r in evals]
    persistence = evals[0].get("persistence_rel_l2")
    baseline = "persistence baseline (next state = current state)"
    ylabel = metric_words(metric)
    axes[0].semilogy(steps, [r[metric] for r in evals], "o-", label="trained surrogate")
    if persistence is not None:
        axes[0].axhline(persistence, color="0.5", ls="--", label=baseline)
    axes[0].set(xlabel="optimiser step", ylabel=ylabel)
    received = [received_at.get(s) for s in steps]
    keep = [i for i, r in enumerate(received) if r is not None]
    axes[1].semilogy(
        [received[i] for i in keep],
        [evals[i][metric] for i in keep],
        "o-",
        color="C1",
        label="trained surrogate",
    )
    if persistence is not None:
        axes[1].axhline(persistence, color="0.5", ls="--", label=baseline)
    axes[1].set(xlabel="samples received from the solvers", ylabel=ylabel)
    for ax in axes:
        ax.set_ylim(top=ax.get_ylim()[1] * 1.6)  # room for the legend above the baseline
        ax.legend(fontsize="small", loc="upper right")
        readable_log_ticks(ax)
        ax.grid(alpha=0.3)
    if new:
        _finish(axes, title)
    return axes


def plot_buffer(train: list[dict], *, title: str = "", axes=None) -> Any:
    """Samples received and trained on, the buffer's fill and the reads per
    buffered sample, against the optimiser step.

    **Arguments:** `train`, the `"train"` records of `metrics.jsonl` (with
    `received`, `trained`, `fill`, `reuse`); `title`, over a new figure;
    `axes`, three matplotlib axes (default: a new figure).

    **Returns:** the axes.
    """
    new = axes is None
    axes = _axes(axes, 3, (13, 3.4))
    steps = [r["step"] for r in train]
    axes[0].plot(steps, [r["received"] for r in train], label="received from the solvers")
    axes[0].plot(steps, [r["trained"] for r in train], label="read by training (with repeats)")
    axes[0].set(xlabel="optimiser step", ylabel="samples (cumulative)", title="samples")
    axes[0].legend()
    axes[1].plot(steps, [r["fill"] for r in train], color="C2")
    axes[1].set(
        xlabel="optimiser step",
        ylabel="fraction of buffer capacity in use",
        title="buffer fill",
        ylim=(0, 1.05),
    )
    axes[2].plot(steps, [r["reuse"] for r in train], color="C3")
    axes[2].set(
        xlabel="optimiser step",
        ylabel="mean reads per sample in the buffer",
        title="reads per buffered sample",
    )
    for ax in axes:
        ax.grid(alpha=0.3)
    if new:
        _finish(axes, title)
    return axes


def plot_online_vs_offline(records: dict[str, list[dict]], *, title: str = "", axes=None) -> Any:
    """The validation error on held-out runs (left) and the training loss
    (right) against the optimiser step, one line per part.

    **Arguments:** `records`, each part's (`"offline"`, `"online"`) records
    of `metrics.jsonl`; `title`, over a new figure; `axes`, two matplotlib axes
    (default: a new figure).

    **Returns:** the axes.
    """
    new = axes is None
    axes = _axes(axes, 2, (11, 3.8))
    for (part, part_records), color in zip(records.items(), ("C0", "C1")):
        evals = [r for r in part_records if r.get("split") == "eval" and "val_rel_l2" in r]
        train = [r for r in part_records if r.get("split") == "train"]
        axes[0].semilogy(
            [r["step"] for r in evals], [r["val_rel_l2"] for r in evals], "o-", color=color,
            label=f"{part} training", ms=3,
        )  # fmt: skip
        axes[1].semilogy(
            [r["step"] for r in train], [r["loss"] for r in train], color=color,
            label=f"{part} training", lw=1,
        )  # fmt: skip
    axes[0].set(xlabel="optimiser step", ylabel="relative L2 error on held-out runs")
    axes[1].set(xlabel="optimiser step", ylabel="training loss")
    for ax in axes:
        readable_log_ticks(ax)
        ax.grid(alpha=0.3)
        ax.legend()
    if new:
        _finish(axes, title)
    return axes


class Panel(NamedTuple):
    """One image of `plot_panels`: a `(s, s)` field (first axis `x`)."""

    field: Any
    title: str
    cmap: str
    limits: tuple[float, float] | None = None  # the colour range (default: the field's)
    bar_label: str | None = None


def plot_panels(rows: list[tuple[str, list[Panel]]], axes=None, *, title: str | None = None) -> Any:
    """Rows of fields side by side, each with its colour bar and the row's label.

    **Arguments:** `rows`, `(row label, panels)` pairs; `axes`, a 2-D array
    of matplotlib axes, one row per pair (default: a new figure, 3.2 in high a
    row); `title`, over the figure.

    **Returns:** the axes.
    """
    import matplotlib.pyplot as plt

    new = axes is None
    if new:
        n_cols = max(len(panels) for _, panels in rows)
        width = {3: 10, 4: 13}.get(n_cols, 3.3 * n_cols)
        _, axes = plt.subplots(len(rows), n_cols, figsize=(width, 3.2 * len(rows)), squeeze=False)
    fig = axes[0][0].figure
    for row, (label, panels) in zip(axes, rows):
        for ax, panel in zip(row, panels):
            low, high = panel.limits or (None, None)
            image = ax.imshow(panel.field.T, origin="lower", cmap=panel.cmap, vmin=low, vmax=high)
            ax.set(title=panel.title, xticks=[], yticks=[])
            bar = fig.colorbar(image, ax=ax, fraction=0.046)
            if panel.bar_label is not None:
                bar.set_label(panel.bar_label)
        row[0].set_ylabel(label)
    if title is not None:
        fig.suptitle(title)
    if new:
        fig.tight_layout()
    return axes


def error_limits(errors: list[Any]) -> tuple[float, float]:
    """One colour range `(0, max)` for the error panels of every row, so that
    rows can be compared by their colours."""
    return 0.0, max(float(abs(e).max()) for e in errors)


def predictions_title(step: int | None) -> str:
    """The title of a predictions figure: the step of the model shown."""
    shown = "the trained model" if step is None else f"the model after training step {step:,}"
    return f"validation predictions of {shown} (one error scale for all rows)"
