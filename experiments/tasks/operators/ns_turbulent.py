"""MG-TFNO where the paper makes its claim: FNO vs TFNO vs MG-TFNO on turbulent
2-D Navier–Stokes, for training sets of several sizes.

The `operators_table` comparison (same optimiser, steps and seed for every
model; the model specs of `config.models`) run once per training-set size in
`config.train_sizes`: the first `n` samples of `config.data.path`, always
scored on the same test set (`config.data.test_path`) and zero-shot on its
samples at 2× (`config.data.path_2x`). Each size trains in
`workdir/models/n<size>/<spec>/` and resumes like `operators_table`.

With `config.seeds` (e.g. `(0, 1, 2, 3, 4)`), every model trains once per
seed (its initialisation and batch order; the data stay those of
`config.seed`) in `.../<spec>/seed<k>/`, and its training-set errors are
recorded beside the test errors. `config.paired = (baseline, candidate)` then
compares the two paired by seed: per-seed train and test relative L2 / H1, the
mean difference `baseline − candidate` with its 95 % t-interval, and the
reading fixed in advance (`verdict`): "direction holds" only if the test H1
interval lies above 0.

Writes `table.md` (one table per size, and the paired table), `summary.json`
with keys `n<size>/<spec>.<metric>` (`test_rel_l2`, `test_rel_h1`,
`test_rel_l2_2x`, `n_params`, `compression`, `peak_memory_mb`,
`peak_memory_mb_sharded`, …; with seeds `n<size>/<spec>/seed<k>.<metric>`, the
training errors `train_rel_l2`, `train_rel_h1` included, and with a pair
`n<size>/paired.<metric>.{mean,low,high}`,
`n<size>/paired.verdict`) and plots: `compression.png` (test error against
parameters, one panel per size; the first seed's), `paired.png` (with
`paired`), and for the largest size `predictions.png` (one test sample: truth,
predictions and error maps of `config.plot_models`) and `spectra.png`
(radially averaged enstrophy spectra of predictions and truth over the test
set; turbulent flows are judged by their spectra).

On several processes (`--processes N`) each model's batches are split over
them; process 0 alone writes the files and draws the plots.
"""

from __future__ import annotations

import copy
import json
import textwrap
from pathlib import Path

import equinox as eqx
import jax
import numpy as np

from experiments.tasks.operators.operators_common import (
    OperatorData,
    build_model,
    predict,
    relative_errors,
    validate_operator_config,
)
from experiments.tasks.operators.operators_ns import check_subsample, data_from_config, raw_arrays
from experiments.tasks.operators.operators_table import (
    markdown_table,
    parse_spec,
    plot_errors_against_size,
    spec_label,
    train_model,
)
from sciml.experiment import (
    ConfigError,
    Task,
    check_config,
    choose_on_grid,
    count_params,
    paired_difference,
    readable_log_ticks,
    save_figure,
)
from sciml.training import ProcessGroup, read_metrics, restore_model


# the errors of the paired comparison, training set beside test set
PAIRED_METRICS = ("train_rel_l2", "train_rel_h1", "test_rel_l2", "test_rel_h1")
# the baseline overfits when its final training H1 error is below this
# fraction of its test H1 error on every seed (fixed before the runs)
OVERFIT_RATIO = 0.7


def radial_spectrum(w: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Radially averaged spectrum of periodic fields on the unit square.

    `E(k) = Σ_{k − 1/2 ≤ |κ| < k + 1/2} |ŵ_κ|²`, `ŵ` the Fourier coefficients
    (`fft2 / s²`, so `Σ_k E(k) = mean(w²)` by Parseval), averaged over the
    leading axes.

    **Arguments:** `w`, `(..., s, s)`.

    **Returns:** `(k, E)`, wavenumbers `0 … s/2` and the spectrum, each `(s/2 + 1,)`.
    """
    w = np.asarray(w, dtype=np.float64)
    s = w.shape[-1]
    if w.ndim < 2 or w.shape[-2] != s:
        raise ValueError(f"`w` must be square fields (..., s, s), got shape {w.shape}.")
    power = np.abs(np.fft.fft2(w) / s**2) ** 2
    power = power.reshape(-1, s, s).mean(axis=0)
    k = np.fft.fftfreq(s, 1 / s)
    shell = np.rint(np.hypot(k[:, None], k[None, :])).astype(int)
    kmax = s // 2
    spectrum = np.bincount(shell.ravel(), weights=power.ravel(), minlength=kmax + 1)
    return np.arange(kmax + 1), spectrum[: kmax + 1]


def size_config(config, n_train: int):
    """`config` with `data.n_train = n_train`."""
    sized = copy.deepcopy(config)
    with sized.unlocked():
        sized.data.n_train = int(n_train)
    return sized


def seed_config(config, seed: int):
    """`config` with `seed = seed`: the model's initialisation and batch order
    (the data are drawn before, with the run's own seed)."""
    seeded = copy.deepcopy(config)
    with seeded.unlocked():
        seeded.seed = int(seed)
    return seeded


def model_dir(workdir: Path, n_train: int, spec: str, seed: int | None = None) -> Path:
    """The run folder of model `spec` trained on `n_train` samples (of one of
    `config.seeds`: a `seed<k>` folder inside)."""
    folder = workdir / "models" / f"n{n_train}" / spec.replace(":", "-")
    return folder if seed is None else folder / f"seed{seed}"


def trained_model(config, spec: str, data, model_dir: Path):
    """The model of `spec` restored from its run folder."""
    model_cfg = parse_spec(spec, config.model)
    like = eqx.filter_eval_shape(
        build_model, model_cfg, data.x_train.shape[1], data.y_train.shape[1], jax.random.key(0)
    )
    return restore_model(model_dir, like)


def train_curve(folder: Path) -> dict[str, float]:
    """`train_rel_h1@<step>` for every evaluation logged in `folder/metrics.jsonl`
    that scored the training set (`config.eval_on_train`); a resumed run's
    last record of a step wins."""
    records = read_metrics(folder / "metrics.jsonl")
    return {
        f"train_rel_h1@{r['step']}": r["train_rel_h1"]
        for r in records
        if r.get("split") == "eval" and "train_rel_h1" in r
    }


def seed_row(config, spec: str, data, folder: Path) -> dict:
    """`train_model`'s row of `spec` trained with `config.seed`, with its
    training-set errors beside the test errors (saved with the row) and, when
    the evaluations scored the training set, its training H1 error at each of
    them (`train_rel_h1@<step>`)."""
    row = train_model(config, spec, data, folder)
    extra = {k: v for k, v in train_curve(folder).items() if k not in row}
    if "train_rel_l2" not in row:
        model = trained_model(config, spec, data, folder)
        errors = relative_errors(
            predict(model, data.x_train), data.y_train, periodic=True, domain_length=1.0
        )
        extra.update({f"train_{k}": v for k, v in errors.items()})
    if extra:
        row.update(extra)
        if ProcessGroup.current().main:
            (folder / "result.json").write_text(json.dumps(row, indent=2) + "\n")
    return row


def verdict(interval: dict[str, float]) -> str:
    """The reading fixed in advance: the candidate's test H1 error is lower
    than the baseline's only if the interval of `baseline − candidate` lies
    above 0."""
    if interval["low"] > 0:
        return "direction holds"
    if interval["high"] < 0:
        return "direction reversed"
    return "not shown: the interval contains 0"


def overfitting(runs: dict[int, dict], ratio: float = OVERFIT_RATIO) -> str:
    """The second reading fixed in advance: the baseline overfits (the regime
    where the paper's factorisation should help) only if on every seed its
    final training H1 error is below `ratio` times its test H1 error."""
    shown = all(row["train_rel_h1"] < ratio * row["test_rel_h1"] for row in runs.values())
    return "overfitting regime shown" if shown else "overfitting regime not shown"


def paired_results(runs: dict[str, dict[int, dict]], paired) -> tuple[dict, str]:
    """Summary entries and Markdown tables of the paired comparison `paired =
    (baseline, candidate, ...)`: per-seed train and test errors of every model
    (and its training H1 at each evaluation, where recorded), then for each
    candidate the mean paired difference (baseline − candidate) with its 95 %
    interval and the verdict on the test H1 error, and whether the baseline
    overfits (`overfitting`).

    Summary keys: `<spec>/seed<k>.<metric>`, `paired/<candidate>.<metric>.{mean,low,high}`,
    `paired/<candidate>.verdict` and `paired.overfitting`.
    """
    base, *candidates = paired
    seeds = list(runs[base])
    curve = sorted(
        {k for spec in paired for row in runs[spec].values() for k in row if "@" in k},
        key=lambda k: int(k.split("@")[1]),
    )
    metrics = [*PAIRED_METRICS, *curve]
    names = [
        m.replace("_rel_", " ").replace("l2", "L2").replace("h1", "H1").replace("@", ", step ")
        for m in metrics
    ]
    lines = ["| model | seed | " + " | ".join(names) + " |", "| --- " * (len(names) + 2) + "|"]
    out = {}
    for spec in paired:
        for seed in seeds:
            row = runs[spec][seed]
            cells = ["–" if m not in row else f"{100 * row[m]:.2f}%" for m in metrics]
            lines.append(f"| {spec_label(spec)} | {seed} | " + " | ".join(cells) + " |")
            out.update({f"{spec}/seed{seed}.{m}": row[m] for m in metrics if m in row})
    lines += [
        "",
        f"| candidate ({spec_label(base)} − candidate) | metric | mean | 95 % interval |",
        "| --- " * 4 + "|",
    ]
    for cand in candidates:
        for m in PAIRED_METRICS:
            diff = paired_difference(*([runs[s][k][m] for k in seeds] for s in (base, cand)))
            out.update({f"paired/{cand}.{m}.{k}": v for k, v in diff.items()})
            interval = f"[{100 * diff['low']:+.2f}, {100 * diff['high']:+.2f}]"
            lines.append(
                f"| {spec_label(cand)} | {m} | {100 * diff['mean']:+.2f} pts | {interval} pts |"
            )
        interval = {k: out[f"paired/{cand}.test_rel_h1.{k}"] for k in ("low", "high")}
        out[f"paired/{cand}.verdict"] = verdict(interval)
    lines.append("")
    for cand in candidates:
        lines.append(
            f"Test H1 ({spec_label(cand)} against {spec_label(base)}): "
            f"**{out[f'paired/{cand}.verdict']}**."
        )
    out["paired.overfitting"] = overfitting(runs[base])
    ratios = ", ".join(f"{r['train_rel_h1'] / r['test_rel_h1']:.2f}" for r in runs[base].values())
    lines.append(
        f"\n{spec_label(base)}, final train H1 / test H1 by seed: {ratios} "
        f"(below {OVERFIT_RATIO} on every seed: overfitting): **{out['paired.overfitting']}**."
    )
    return out, "\n".join(lines) + "\n"


def plot_compression(tables: dict[int, dict[str, dict]], axes=None):
    """Test relative L2 against parameters, one panel per training-set size;
    returns the axes."""
    import matplotlib.pyplot as plt

    if axes is None:
        _, axes = plt.subplots(
            1, len(tables), figsize=(4.2 * len(tables), 3.8), squeeze=False, sharey=True
        )
        axes = axes[0]
    for ax, (n, rows) in zip(axes, tables.items(), strict=True):
        plot_errors_against_size(ax, rows)
        ax.set_title(f"{n:,} training samples")
    axes[-1].legend(fontsize=7, loc="center left", bbox_to_anchor=(1.02, 0.5))
    axes[-1].figure.tight_layout()
    return axes


def plot_predictions(truth, predictions: dict[str, np.ndarray], axes=None):
    """One test sample: truth, then each model's prediction over its error, on
    a `(2, models + 1)` grid of axes; returns the axes."""
    import matplotlib.pyplot as plt

    n = len(predictions)
    if axes is None:
        _, axes = plt.subplots(2, n + 1, figsize=(3.2 * (n + 1), 6.2), squeeze=False)
    fig = axes[0][0].figure
    limit = float(np.abs(truth).max())
    errors = {k: p - truth for k, p in predictions.items()}
    error_limit = max(float(np.abs(e).max()) for e in errors.values())
    panels = [("reference solver: vorticity ω(T)", truth, None)] + [
        (textwrap.fill(spec_label(k), 26), p, errors[k]) for k, p in predictions.items()
    ]
    for col, (title, field, error) in enumerate(panels):
        image = axes[0][col].imshow(field.T, origin="lower", cmap="RdBu_r", vmin=-limit, vmax=limit)
        axes[0][col].set_title(title, fontsize=11)
        fig.colorbar(image, ax=axes[0][col], fraction=0.046)
        if error is None:
            axes[1][col].axis("off")
            continue
        relative = np.linalg.norm(error) / np.linalg.norm(truth)
        image = axes[1][col].imshow(
            error.T, origin="lower", cmap="PuOr", vmin=-error_limit, vmax=error_limit
        )
        axes[1][col].set_title(f"error (relative L2 {100 * relative:.1f} %)", fontsize=11)
        fig.colorbar(image, ax=axes[1][col], fraction=0.046)
    for ax in np.ravel(axes):
        ax.set(xticks=[], yticks=[])
    fig.tight_layout()
    return axes


def plot_spectra(truth, predictions: dict[str, np.ndarray], ax=None):
    """Radially averaged enstrophy spectra of the test outputs and predictions;
    returns the axis."""
    import matplotlib.pyplot as plt

    if ax is None:
        _, ax = plt.subplots(figsize=(6, 4.2))
    k, e = radial_spectrum(truth)
    ax.loglog(k[1:], e[1:], "k-", lw=2.5, label="reference solver")
    for spec, p in predictions.items():
        k, e = radial_spectrum(p)
        ax.loglog(k[1:], e[1:], lw=1.2, label=spec_label(spec))
    ax.set(xlabel="wavenumber |k|", ylabel="enstrophy spectrum E(k)")
    readable_log_ticks(ax, "x")
    ax.set_title("test set: spectra of ω(T)")
    ax.grid(True, which="major", alpha=0.3)
    ax.legend(fontsize=8)
    ax.figure.tight_layout()
    return ax


def plot_paired(runs: dict[str, dict[int, dict]], paired, ax=None):
    """Train (open) and test (filled) relative H1 error of the models of
    `paired`, one line per seed joining its models; returns the axis."""
    import matplotlib.pyplot as plt

    if ax is None:
        _, ax = plt.subplots(figsize=(2 + 2.4 * len(paired), 4.8))
    at = list(range(len(paired)))
    for seed in runs[paired[0]]:
        for split, style in (("test", "o-"), ("train", "o--")):
            errors = [runs[spec][seed][f"{split}_rel_h1"] for spec in paired]
            fill = None if split == "test" else "none"
            ax.plot(at, errors, style, color=f"C{seed % 10}", mfc=fill, alpha=0.8)
    names = [textwrap.fill(spec_label(spec), 24) for spec in paired]
    ax.set(xticks=at, xticklabels=names, xlim=(-0.3, at[-1] + 0.3), ylabel="relative H1 error")
    ax.set_title("one line per seed: test (filled), train (open)", fontsize=11)
    ax.figure.tight_layout()
    return ax


def train_size(config, n: int, workdir: Path, specs, seeds):
    """Trains every model on the first `n` samples (once per seed of `seeds`,
    else once with `config.seed`): `(data, {spec: {seed: row}})`. With seeds,
    every model of one seed trains before the next seed starts, so that a run
    cut short holds whole seeds (paired results)."""
    sized = size_config(config, n)
    data = data_from_config(sized)  # drawn with config.seed, whatever the training seed
    if not seeds:
        return data, {
            spec: {None: train_model(sized, spec, data, model_dir(workdir, n, spec))}
            for spec in specs
        }
    runs = {spec: {} for spec in specs}
    for seed in seeds:
        for spec in specs:
            folder = model_dir(workdir, n, spec, seed)
            runs[spec][seed] = seed_row(seed_config(sized, seed), spec, data, folder)
    return data, runs


def validation_data(config) -> OperatorData:
    """The training samples split for choosing a learning rate: the first
    `n_train − n_val` train, the last `config.data.n_val` are scored (the test
    set is never read for a choice); scaled with the training part's statistics."""
    x, y = raw_arrays(config)[:2]
    n_val = int(config.data.n_val)
    return OperatorData.from_arrays(x[:-n_val], y[:-n_val], x[-n_val:], y[-n_val:])


def sweep_table(rows: dict[str, dict[float, dict]], best: dict[str, float]) -> str:
    """The sweep as Markdown: one row per model, validation H1 (L2) per rate,
    the chosen rate in bold."""
    rates = sorted({lr for by_rate in rows.values() for lr in by_rate})
    lines = [
        "| model | " + " | ".join(f"{lr:g}" for lr in rates) + " | chosen |",
        "| --- " * (len(rates) + 2) + "|",
    ]
    for spec, by_rate in rows.items():
        cells = []
        for lr in rates:
            r = by_rate.get(lr)
            cell = (
                "–" if r is None else f"{100 * r['val_rel_h1']:.2f}% ({100 * r['val_rel_l2']:.2f}%)"
            )
            cells.append(f"**{cell}**" if lr == best[spec] else cell)
        lines.append(f"| {spec_label(spec)} | " + " | ".join(cells) + f" | {best[spec]:g} |")
    return "\n".join(lines) + "\n"


def sweep_learning_rates(config, workdir: Path) -> dict:
    """Each model of `config.models` trained once (with `config.seed`) at every
    rate of `config.sweep_learning_rates` on the validation split
    (`validation_data`) of the largest training size; the rate of lowest
    validation H1 error is chosen, and flagged `at_edge` when it is the
    smallest or largest rate tried (then the grid should be widened). Writes
    `sweep.md`, `plots/sweep.png` and summary keys
    `sweep/<spec>@<rate>.val_rel_{l2,h1}`, `sweep/<spec>.learning_rate`,
    `sweep/<spec>.at_edge`; each run trains in `workdir/sweep/<spec>@<rate>/`
    and resumes like `operators_table`."""
    rates = sorted(float(r) for r in config.sweep_learning_rates)
    sized = size_config(config, max(int(n) for n in config.train_sizes))
    data = validation_data(sized)
    rows, best, summary = {}, {}, {}
    for spec in (s.strip().split("@")[0] for s in config.models):
        rows[spec] = {}
        for lr in rates:
            name = f"{spec}@{lr:g}"
            row = train_model(sized, name, data, workdir / "sweep" / name.replace(":", "-"))
            row = {"val_rel_l2": row["test_rel_l2"], "val_rel_h1": row["test_rel_h1"], **row}
            rows[spec][lr] = row
            summary.update({f"sweep/{name}.{k}": row[k] for k in ("val_rel_l2", "val_rel_h1")})
        best[spec], at_edge = choose_on_grid({lr: r["val_rel_h1"] for lr, r in rows[spec].items()})
        summary[f"sweep/{spec}.learning_rate"] = best[spec]
        summary[f"sweep/{spec}.at_edge"] = at_edge
    if ProcessGroup.current().main:
        (workdir / "plots").mkdir(parents=True, exist_ok=True)
        (workdir / "sweep.md").write_text(sweep_table(rows, best))
        save_figure(plot_sweep(rows), workdir / "plots" / "sweep.png")
    return summary


def plot_sweep(rows: dict[str, dict[float, dict]], ax=None):
    """Validation H1 error against the learning rate, one line per model;
    returns the axis."""
    import matplotlib.pyplot as plt

    if ax is None:
        _, ax = plt.subplots(figsize=(6, 4.2))
    for spec, by_rate in rows.items():
        rates = sorted(by_rate)
        ax.loglog(rates, [by_rate[lr]["val_rel_h1"] for lr in rates], "o-", label=spec_label(spec))
    ax.set(xlabel="learning rate", ylabel="validation relative H1 error")
    readable_log_ticks(ax, "x")
    readable_log_ticks(ax, "y")
    ax.set_title("learning-rate sweep (validation split of the training set)", fontsize=10)
    ax.grid(True, which="major", alpha=0.3)
    ax.legend(fontsize=8)
    ax.figure.tight_layout()
    return ax


def train_and_evaluate(config, workdir: Path) -> dict:
    workdir = Path(workdir)
    if config.get("sweep_learning_rates"):
        return sweep_learning_rates(config, workdir)
    main = ProcessGroup.current().main
    specs = [s.strip() for s in config.models]
    seeds = [int(s) for s in config.get("seeds", ())]
    pair = tuple(config.get("paired", ()))
    check_specs(config, specs, seeds, pair)
    sizes = sorted(int(n) for n in config.train_sizes)
    tables, summary, text = {}, {}, []
    for n in sizes:
        data, runs = train_size(config, n, workdir, specs, seeds)
        if n == sizes[0]:
            channels = data.x_train.shape[1], data.y_train.shape[1]
            dense = build_model(parse_spec("dense", config.model), *channels, jax.random.key(0))
            summary["dense_params"] = dense_params = count_params(dense)
        rows = {spec: next(iter(by_seed.values())) for spec, by_seed in runs.items()}
        for spec, by_seed in runs.items():
            for seed, row in by_seed.items():
                row = {**row, "compression": dense_params / row["n_params"]}
                name = spec if seed is None else f"{spec}/seed{seed}"
                summary.update({f"n{n}/{name}.{k}": v for k, v in row.items()})
        tables[n] = rows
        text.append(f"### {n:,} training samples\n\n" + markdown_table(rows, dense_params))
        if pair:
            paired, table = paired_results(runs, pair)
            summary.update({f"n{n}/{k}": v for k, v in paired.items()})
            text.append(f"#### {len(seeds)} seeds, paired\n\n{table}")
        if main:
            (workdir / "table.md").write_text("\n".join(text))
    first = seeds[0] if seeds else None
    models = {  # restored on every process, as a checkpoint is read by all of them
        spec: trained_model(config, spec, data, model_dir(workdir, n, spec, first))
        for spec in config.plot_models
    }
    if not main:
        return summary
    plot_dir = workdir / "plots"
    plot_dir.mkdir(parents=True, exist_ok=True)
    save_figure(plot_compression(tables)[0], plot_dir / "compression.png")
    if pair:
        save_figure(plot_paired(runs, pair), plot_dir / "paired.png")
    predictions = {
        spec: np.asarray(predict(model, data.x_test))[:, 0] * data.y_std
        for spec, model in models.items()
    }
    truth = np.asarray(data.y_test)[:, 0] * data.y_std
    sample = {k: p[int(config.plot_sample)] for k, p in predictions.items()}
    axes = plot_predictions(truth[int(config.plot_sample)], sample)
    save_figure(axes[0][0], plot_dir / "predictions.png", dpi=110)
    save_figure(plot_spectra(truth, predictions), plot_dir / "spectra.png")
    spectra = {
        name: radial_spectrum(f)[1].tolist() for name, f in {"truth": truth, **predictions}.items()
    }
    (workdir / "spectra.json").write_text(json.dumps(spectra) + "\n")
    return summary


def check_specs(config, specs, seeds, pair) -> None:
    """Every model spec parses, the plotted and paired models are trained, and
    a paired comparison has two or more seeds; checked before any work."""
    for spec in [*specs, *config.plot_models, *pair]:
        parse_spec(spec, config.model)
    if unknown := sorted(set(config.plot_models) - set(specs)):
        raise ValueError(f"config.plot_models: {unknown} are not in config.models.")
    if pair and (len(pair) < 2 or len(set(pair)) != len(pair) or not set(pair) <= set(specs)):
        raise ValueError(
            "config.paired must be two or more distinct models of config.models "
            f"{specs} (the baseline first), got {pair}."
        )
    if pair and len(set(seeds)) < 2:
        raise ValueError(f"config.paired needs two or more distinct config.seeds, got {seeds}.")


def validate_config(config) -> None:
    """Data and model sizes and choices, checked by the runner before anything is written."""
    validate_operator_config(config)
    check_config(config, positive_numbers=("data.dt", "data.t_final", "data.viscosity"))
    check_config(config, positive=("train_sizes",))
    seeds = config.get("seeds", ())
    if not isinstance(seeds, tuple | list) or any(
        not isinstance(s, int) or isinstance(s, bool) or s < 0 for s in seeds
    ):
        raise ValueError(f"config.seeds must be a tuple of ints >= 0, got {seeds!r}.")
    specs = [s.strip() for s in config.models]
    check_specs(config, specs, list(seeds), tuple(config.get("paired", ())))
    check_subsample(config)
    if config.get("sweep_learning_rates"):
        rates = config.sweep_learning_rates
        if (
            not isinstance(rates, tuple | list)
            or len(set(rates)) < 3
            or any(not isinstance(r, int | float) or isinstance(r, bool) or r <= 0 for r in rates)
        ):
            raise ConfigError(
                f"config.sweep_learning_rates must be three or more distinct numbers > 0 "
                f"(so that a choice can lie inside the grid), got {rates!r}."
            )
        check_config(config, positive=("data.n_val",))
        if int(config.data.n_val) >= max(int(n) for n in config.train_sizes):
            raise ConfigError(
                f"config.data.n_val: {int(config.data.n_val)} validation samples leave none "
                f"of the {max(config.train_sizes)} training samples to train on; accepted: "
                "fewer than the largest of config.train_sizes."
            )


TASK = Task(train_and_evaluate, validate=validate_config, data_parallel=True)
