"""The runner's own plot: training loss and evaluation metrics from `metrics.jsonl`."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from sciml.distributed import is_main_process
from sciml.training import read_metrics


_MAX_EVAL_CURVES = 6
_MIN_SMOOTHED = 20  # fewer training records are drawn as they are


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


# What a metric or loss name means, for axis labels and legends.
_WORDS = {
    "l2": "relative L2 error",
    "rel_l2": "relative L2 error",
    "h1": "relative H1 error",
    "rel_h1": "relative H1 error",
    "mse": "mean squared error",
    "mae": "mean absolute error",
    "ce": "cross-entropy",
    "cross_entropy": "cross-entropy",
    "nll": "negative log-likelihood",
    "bpc": "bits per character",
    "acc": "accuracy",
    "accuracy": "accuracy",
    "a_norm": "A-norm error",
}
_PREFIXES = {
    "val": "validation",
    "test": "test",
    "train": "training",
    "eval": "evaluation",
    "persistence": "persistence baseline,",
}


def metric_words(name: str) -> str:
    """A metric or loss name in words: `"val_rel_l2"` is `"validation relative
    L2 error"`, `"persistence_rel_l2"` is `"persistence relative L2 error"`;
    an unknown name has its underscores turned into spaces."""
    name = str(name)
    if name in _WORDS:
        return _WORDS[name]
    head, _, rest = name.partition("_")
    if rest and (head in _PREFIXES or rest in _WORDS):
        return f"{_PREFIXES.get(head, head)} {metric_words(rest)}"
    return name.replace("_", " ")


def smooth(values: list[float], weight: float | None = None) -> list[float]:
    """Exponential moving average of `values`, bias-corrected (the first
    values are not pulled toward zero); `weight` defaults to a window of about
    a twentieth of the curve (between 0 and 0.98)."""
    if weight is None:
        weight = min(0.98, max(0.0, 1 - 20 / max(len(values), 1)))
    out, average, total = [], 0.0, 0.0
    for value in values:
        average = weight * average + (1 - weight) * value
        total = weight * total + (1 - weight)
        out.append(average / total)
    return out


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

    The training loss is drawn per batch (faint) and smoothed (an exponential
    moving average, solid) when there are more than 20 records; the evaluation metrics as points joined by lines.
    Names are shown in words (`"l2"` is "relative L2 error").

    **Arguments:**

    - `metrics_path`: the run's `metrics.jsonl` (records with `split` `"train"`
      holding `loss`, and `"eval"` holding the evaluation metrics).
    - `plot_dir`: where to write `loss.png` (nothing is written when `None`).
    - `run_name`: shown in the title (e.g. `config.name`).
    - `loss_name`: the training loss's name (e.g. `"h1"`), shown in words on
      the axis label; an evaluation metric whose name holds it is drawn solid,
      the others dashed.
    - `eval_metrics`: the evaluation metrics to draw (default: all, up to
      six); `()` draws the training loss alone.
    - `ax`: a matplotlib axis to draw on (default: a new figure).

    **Returns:** the figure, or `None` when the file holds no training records
    (then nothing is written). On several processes only process 0 writes
    `loss.png`; the others return `None` at once.
    """
    if plot_dir is not None and not is_main_process():
        return None
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
    steps, losses = [m["step"] for m in train], [float(m["loss"]) for m in train]
    if len(train) > _MIN_SMOOTHED:
        ax.plot(steps, losses, color="C0", alpha=0.3, lw=0.8, label="training, per batch")
        ax.plot(steps, smooth(losses), color="C0", lw=1.8, label="training, smoothed")
    else:
        ax.plot(steps, losses, color="C0", label="training")
    matched = [k for k in eval_keys if loss_name and str(loss_name) in k]
    shown = (matched + [k for k in eval_keys if k not in matched])[:_MAX_EVAL_CURVES]
    # A named loss that no metric shares (an MSE beside relative errors) has
    # other units: the metrics then get an axis of their own, on the right.
    eval_ax = ax.twinx() if shown and loss_name and not matched else ax
    for i, key in enumerate(shown):
        points = [(m["step"], float(m[key])) for m in evals if _number(m.get(key))]
        baseline = key.startswith("persistence")  # a reference level, not a curve
        eval_ax.plot(
            *zip(*points),
            marker="" if baseline else "o",
            markersize=4,
            linestyle="--" if baseline or (key not in matched and eval_ax is ax) else "-",
            color="0.5" if baseline else f"C{i + 1}",
            label=metric_words(key),
        )
    ylabel = f"training loss: {metric_words(loss_name)}" if loss_name else "training loss"
    eval_values = [float(m[k]) for m in evals for k in shown if _number(m.get(k))]
    if eval_ax is ax:
        _log_if_positive(ax, losses + eval_values)
        ax.set_ylabel(f"{ylabel}\nand evaluation metrics" if shown else ylabel)
    else:
        _log_if_positive(ax, losses)
        _log_if_positive(eval_ax, eval_values)
        ax.set_ylabel(ylabel)
        eval_ax.set_ylabel("evaluation metrics")
    ax.set_xlabel("optimiser step")
    ax.grid(True, which="major", alpha=0.3)
    lines = ax.get_lines() + (eval_ax.get_lines() if eval_ax is not ax else [])
    eval_ax.legend(lines, [line.get_label() for line in lines], fontsize="small")
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
    (e.g. `bbox_inches="tight"`). On several processes only process 0
    writes; the others close the figure.

    **Returns:** `path`.
    """
    import matplotlib.pyplot as plt

    fig = fig.figure  # an axis's figure; a figure is its own
    if is_main_process():
        fig.savefig(path, dpi=dpi, **options)
    plt.close(fig)
    return Path(path)


def _log_if_positive(ax: Any, values: list[float]) -> None:
    if values and all(v > 0 for v in values):
        ax.set_yscale("log")
        readable_log_ticks(ax)


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
