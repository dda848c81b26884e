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
    build_model,
    predict,
    relative_errors,
    validate_operator_config,
)
from experiments.tasks.operators.operators_ns import data_from_config
from experiments.tasks.operators.operators_table import (
    markdown_table,
    parse_spec,
    plot_errors_against_size,
    spec_label,
    train_model,
)
from sciml.experiment import check_config, count_params, readable_log_ticks, save_figure
from sciml.training import ProcessGroup, restore_model


# the errors of the paired comparison, training set beside test set
PAIRED_METRICS = ("train_rel_l2", "train_rel_h1", "test_rel_l2", "test_rel_h1")
DATA_PARALLEL = True  # every model trains through train_experiment; process 0 writes the files


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


def seed_row(config, spec: str, data, folder: Path) -> dict:
    """`train_model`'s row of `spec` trained with `config.seed`, with its
    training-set errors beside the test errors (saved with the row)."""
    row = train_model(config, spec, data, folder)
    if "train_rel_l2" not in row:
        model = trained_model(config, spec, data, folder)
        errors = relative_errors(
            predict(model, data.x_train), data.y_train, periodic=True, domain_length=1.0
        )
        row.update({f"train_{k}": v for k, v in errors.items()})
        if ProcessGroup.current().main:
            (folder / "result.json").write_text(json.dumps(row, indent=2) + "\n")
    return row


def paired_difference(baseline, candidate, confidence: float = 0.95) -> dict[str, float]:
    """Mean of the paired differences `d_s = baseline_s − candidate_s` over
    seeds and its t-interval `mean ± t_{(1+confidence)/2, n−1} · sd(d) / √n`
    (`sd` with `n − 1`); keys `mean`, `low`, `high`."""
    from scipy import stats

    d = np.asarray(baseline, np.float64) - np.asarray(candidate, np.float64)
    if d.ndim != 1 or d.size < 2:
        raise ValueError(f"a paired interval needs two or more seeds, got {d.size}.")
    half = stats.t.ppf((1 + confidence) / 2, d.size - 1) * d.std(ddof=1) / np.sqrt(d.size)
    return {"mean": float(d.mean()), "low": float(d.mean() - half), "high": float(d.mean() + half)}


def verdict(interval: dict[str, float]) -> str:
    """The reading fixed in advance: the candidate's test H1 error is lower
    than the baseline's only if the interval of `baseline − candidate` lies
    above 0."""
    if interval["low"] > 0:
        return "direction holds"
    if interval["high"] < 0:
        return "direction reversed"
    return "not shown: the interval contains 0"


def paired_results(runs: dict[str, dict[int, dict]], pair) -> tuple[dict, str]:
    """Summary entries and a Markdown table of the paired comparison `pair =
    (baseline, candidate)`: per-seed train and test errors of both models,
    then the mean paired difference (baseline − candidate) with its 95 %
    interval and the verdict on the test H1 error."""
    base, cand = pair
    seeds = list(runs[base])
    names = [f"{spec} {m.replace('_rel_', ' ').upper()}" for spec in pair for m in PAIRED_METRICS]
    lines = ["| seed | " + " | ".join(names) + " |", "| --- " * (len(names) + 1) + "|"]
    out = {}
    for seed in seeds:
        cells = [f"{100 * runs[s][seed][m]:.2f}%" for s in pair for m in PAIRED_METRICS]
        lines.append(f"| {seed} | " + " | ".join(cells) + " |")
        for spec in pair:
            out.update({f"{spec}/seed{seed}.{m}": runs[spec][seed][m] for m in PAIRED_METRICS})
    lines += ["", f"| {base} − {cand} | mean | 95 % interval |", "| --- | --- | --- |"]
    for m in PAIRED_METRICS:
        diff = paired_difference(*([runs[s][k][m] for k in seeds] for s in pair))
        out.update({f"paired.{m}.{k}": v for k, v in diff.items()})
        interval = f"[{100 * diff['low']:+.2f}, {100 * diff['high']:+.2f}]"
        lines.append(f"| {m} | {100 * diff['mean']:+.2f} pts | {interval} pts |")
    out["paired.verdict"] = verdict({k: out[f"paired.test_rel_h1.{k}"] for k in ("low", "high")})
    lines += ["", f"Test H1 ({cand} against {base}): **{out['paired.verdict']}**."]
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


def plot_paired(runs: dict[str, dict[int, dict]], pair, ax=None):
    """Train (open) and test (filled) relative H1 error of the two models of
    `pair`, one line per seed joining its two models; returns the axis."""
    import matplotlib.pyplot as plt

    if ax is None:
        _, ax = plt.subplots(figsize=(4.5, 4))
    for seed in runs[pair[0]]:
        for split, style in (("test", "o-"), ("train", "o--")):
            errors = [runs[spec][seed][f"{split}_rel_h1"] for spec in pair]
            fill = None if split == "test" else "none"
            ax.plot([0, 1], errors, style, color=f"C{seed % 10}", mfc=fill, alpha=0.8)
    names = [textwrap.fill(spec_label(spec), 18) for spec in pair]
    ax.set(xticks=[0, 1], xticklabels=names, xlim=(-0.3, 1.3), ylabel="relative H1 error")
    ax.set_title("one line per seed: test (filled), train (open)", fontsize=11)
    ax.figure.tight_layout()
    return ax


def train_size(config, n: int, workdir: Path, specs, seeds):
    """Trains every model on the first `n` samples (once per seed of `seeds`,
    else once with `config.seed`): `(data, {spec: {seed: row}})`."""
    sized = size_config(config, n)
    data = data_from_config(sized)  # drawn with config.seed, whatever the training seed
    runs = {}
    for spec in specs:
        if not seeds:
            runs[spec] = {None: train_model(sized, spec, data, model_dir(workdir, n, spec))}
            continue
        runs[spec] = {
            seed: seed_row(seed_config(sized, seed), spec, data, model_dir(workdir, n, spec, seed))
            for seed in seeds
        }
    return data, runs


def train_and_evaluate(config, workdir: Path) -> dict:
    workdir = Path(workdir)
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
    if pair and (len(pair) != 2 or not set(pair) <= set(specs)):
        raise ValueError(f"config.paired must be two of config.models {specs}, got {pair}.")
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
