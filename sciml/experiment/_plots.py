"""The runner's own plot: training loss and evaluation metrics from `metrics.jsonl`."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from sciml.training import read_metrics


_MAX_EVAL_CURVES = 6


def readable_log_ticks(ax: Any, axis: str = "y") -> None:
    """Log-axis ticks that can be read on any range.

    Matplotlib's default puts one labelled tick per decade and, when fewer than
    two decades are shown, labels minor ticks as `6×10⁻¹`. Here the labels are
    plain numbers (`0.4`, `2000`, `1e-05`), placed at the sparsest of
    `1`, `1-2-5`, `1-2-3-5` and `1…9` times the powers of ten that puts at least
    three labels in view; minor ticks carry no label.

    **Arguments:** `ax`, a matplotlib axis with a log scale; `axis`, `"x"` or `"y"`.
    """
    from matplotlib import ticker

    target = ax.yaxis if axis == "y" else ax.xaxis
    low, high = sorted(float(v) for v in (ax.get_ylim() if axis == "y" else ax.get_xlim()))
    candidates = (
        (1.0,),
        (1.0, 2.0, 5.0),
        (1.0, 2.0, 3.0, 5.0),
        tuple(float(k) for k in range(1, 10)),
    )
    for subs in candidates:
        if low > 0 and _ticks_in_view(low, high, subs) >= 3:
            break
    target.set_major_locator(ticker.LogLocator(base=10, subs=subs, numticks=30))
    target.set_major_formatter(ticker.FuncFormatter(lambda v, _: f"{v:g}"))
    target.set_minor_formatter(ticker.NullFormatter())


def _ticks_in_view(low: float, high: float, subs: tuple[float, ...]) -> int:
    first, last = math.floor(math.log10(low)), math.ceil(math.log10(high))
    return int(sum(low <= s * 10.0**e <= high for e in range(first, last + 1) for s in subs))


def plot_loss(
    metrics_path: str | Path,
    plot_dir: str | Path | None = None,
    *,
    run_name: str | None = None,
    loss_name: str | None = None,
    eval_metrics: Any = None,
    ax: Any = None,
) -> Any:
    """Plots the training loss and the evaluation metrics of a run.

    **Arguments:**

    - `metrics_path`: the run's `metrics.jsonl` (records with `split` `"train"`
      holding `loss`, and `"eval"` holding the evaluation metrics).
    - `plot_dir`: where to write `loss.png` (nothing is written when `None`).
    - `run_name`: shown in the title (e.g. `config.name`).
    - `loss_name`: the training loss's name (e.g. `"h1"`), shown in the legend
      and axis label; an evaluation metric whose name holds it is drawn solid,
      the others dashed.
    - `eval_metrics`: the evaluation metrics to draw (default: all, up to
      five); `()` draws the training loss alone, for a task that plots its
      evaluation in a figure of its own.
    - `ax`: a matplotlib axis to draw on (default: a new figure).

    **Returns:** the figure, or `None` when the file holds no training records
    (then nothing is written).
    """
    import matplotlib

    if ax is None:
        matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    records = read_metrics(metrics_path)
    train = [m for m in records if m.get("split") == "train" and "loss" in m]
    if not train:
        return None
    evals = [m for m in records if m.get("split") == "eval"]
    eval_keys = sorted(
        {k for m in evals for k, v in m.items() if k not in ("split", "step") and _number(v)}
    )
    if eval_metrics is not None:
        eval_keys = [k for k in eval_keys if k in set(eval_metrics)]
    if ax is None:
        fig, ax = plt.subplots(figsize=(6.4, 4.2), layout="constrained")
    else:
        fig = ax.figure
    loss_label = f"{loss_name} loss" if loss_name else "loss"
    ax.plot(
        [m["step"] for m in train],
        [float(m["loss"]) for m in train],
        color="C0",
        label=f"training {loss_label}",
    )
    matched = [k for k in eval_keys if loss_name and str(loss_name) in k]
    shown = (matched + [k for k in eval_keys if k not in matched])[:_MAX_EVAL_CURVES]
    for i, key in enumerate(shown):
        points = [(m["step"], float(m[key])) for m in evals if _number(m.get(key))]
        ax.plot(
            *zip(*points),
            marker="o",
            markersize=4,
            linestyle="-" if key in matched else "--",
            color=f"C{i + 1}",
            label=f"evaluation: {key}",
        )
    values = [float(m["loss"]) for m in train] + [
        float(m[k]) for m in evals for k in shown if _number(m.get(k))
    ]
    if all(v > 0 for v in values):
        ax.set_yscale("log")
        readable_log_ticks(ax)
    ax.set(xlabel="step", ylabel=f"{loss_label} / metric" if shown else f"training {loss_label}")
    ax.grid(True, which="major", alpha=0.3)
    ax.legend(fontsize="small")
    title = run_name or Path(metrics_path).parent.name
    ax.set_title(f"{title}: training and evaluation" if shown else f"{title}: training")
    if plot_dir is not None:
        fig.savefig(Path(plot_dir) / "loss.png", dpi=120)
        plt.close(fig)
    return fig


def save_figure(fig: Any, path: str | Path, *, dpi: int = 120, **options: Any) -> Path:
    """Writes a figure (or the figure of an axis) to `path` and closes it.

    **Arguments:** `fig`, a matplotlib figure or axis; `path`, the file (its
    suffix picks the format); `dpi` and further `options` go to `savefig`
    (e.g. `bbox_inches="tight"`).

    **Returns:** `path`.
    """
    import matplotlib.pyplot as plt

    fig = fig.figure  # an axis's figure; a figure is its own
    fig.savefig(path, dpi=dpi, **options)
    plt.close(fig)
    return Path(path)


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
