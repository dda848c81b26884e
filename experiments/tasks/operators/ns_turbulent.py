"""MG-TFNO where the paper makes its claim: FNO vs TFNO vs MG-TFNO on turbulent
2-D Navier–Stokes, for training sets of several sizes.

The `operators_table` comparison (same optimiser, steps and seed for every
model; the model specs of `config.models`) run once per training-set size in
`config.train_sizes`: the first `n` samples of `config.data.path`, always
scored on the same test set (`config.data.test_path`) and zero-shot on its
samples at 2× (`config.data.path_2x`). Each size trains in
`workdir/models/n<size>/<spec>/` and resumes like `operators_table`.

Writes `table.md` (one table per size), `summary.json` with keys
`n<size>/<spec>.<metric>` (`test_rel_l2`, `test_rel_h1`, `test_rel_l2_2x`,
`n_params`, `compression`, `peak_memory_mb`, `peak_memory_mb_sharded`, …) and
three plots: `compression.png` (test error against parameters, one panel per
size), and for the largest size `predictions.png` (one test sample: truth,
predictions and error maps of `config.plot_models`) and `spectra.png`
(radially averaged enstrophy spectra of predictions and truth over the test
set; turbulent flows are judged by their spectra).
"""

from __future__ import annotations

import copy
import json
from pathlib import Path

import equinox as eqx
import jax
import numpy as np

from experiments.tasks.operators.operators_common import (
    build_model,
    predict,
    validate_operator_config,
)
from experiments.tasks.operators.operators_ns import data_from_config
from experiments.tasks.operators.operators_table import (
    markdown_table,
    parse_spec,
    plot_errors_against_size,
    train_model,
)
from sciml.experiment import check_config, count_params, readable_log_ticks
from sciml.training import restore_model


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


def model_dir(workdir: Path, n_train: int, spec: str) -> Path:
    """The run folder of model `spec` trained on `n_train` samples."""
    return workdir / "models" / f"n{n_train}" / spec.replace(":", "-")


def trained_model(config, spec: str, data, model_dir: Path):
    """The model of `spec` restored from its run folder."""
    model_cfg = parse_spec(spec, config.model)
    like = eqx.filter_eval_shape(
        build_model, model_cfg, data.x_train.shape[1], data.y_train.shape[1], jax.random.key(0)
    )
    return restore_model(model_dir, like)


def plot_compression(tables: dict[int, dict[str, dict]], plot_dir: Path) -> None:
    """Test relative L2 against parameters, one panel per training-set size."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(
        1, len(tables), figsize=(4.2 * len(tables), 3.8), squeeze=False, sharey=True
    )
    for ax, (n, rows) in zip(axes[0], tables.items(), strict=True):
        plot_errors_against_size(ax, rows)
        ax.set_title(f"{n:,} training samples")
    axes[0][-1].legend(fontsize=7, loc="center left", bbox_to_anchor=(1.02, 0.5))
    fig.tight_layout()
    fig.savefig(plot_dir / "compression.png", dpi=120)
    plt.close(fig)


def plot_predictions(truth, predictions: dict[str, np.ndarray], plot_dir: Path) -> None:
    """One test sample: truth, then each model's prediction over its error."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    n = len(predictions)
    fig, axes = plt.subplots(2, n + 1, figsize=(3.2 * (n + 1), 6.2), squeeze=False)
    limit = float(np.abs(truth).max())
    errors = {k: p - truth for k, p in predictions.items()}
    error_limit = max(float(np.abs(e).max()) for e in errors.values())
    panels = [("truth ω(T)", truth, None)] + [(k, p, errors[k]) for k, p in predictions.items()]
    for col, (title, field, error) in enumerate(panels):
        image = axes[0][col].imshow(field.T, origin="lower", cmap="RdBu_r", vmin=-limit, vmax=limit)
        axes[0][col].set_title(title, fontsize=9)
        fig.colorbar(image, ax=axes[0][col], fraction=0.046)
        if error is None:
            axes[1][col].axis("off")
            continue
        relative = np.linalg.norm(error) / np.linalg.norm(truth)
        image = axes[1][col].imshow(
            error.T, origin="lower", cmap="PuOr", vmin=-error_limit, vmax=error_limit
        )
        axes[1][col].set_title(f"error (rel. L2 {100 * relative:.1f}%)", fontsize=9)
        fig.colorbar(image, ax=axes[1][col], fraction=0.046)
    for ax in axes.ravel():
        ax.set(xticks=[], yticks=[])
    fig.tight_layout()
    fig.savefig(plot_dir / "predictions.png", dpi=110)
    plt.close(fig)


def plot_spectra(truth, predictions: dict[str, np.ndarray], plot_dir: Path) -> None:
    """Radially averaged enstrophy spectra of the test outputs and predictions."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 4.2))
    k, e = radial_spectrum(truth)
    ax.loglog(k[1:], e[1:], "k-", lw=2.5, label="truth")
    for spec, p in predictions.items():
        k, e = radial_spectrum(p)
        ax.loglog(k[1:], e[1:], lw=1.2, label=spec)
    ax.set(xlabel="wavenumber |k|", ylabel="enstrophy spectrum E(k)")
    readable_log_ticks(ax, "x")
    ax.set_title("test set: spectra of ω(T)")
    ax.grid(True, which="major", alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(plot_dir / "spectra.png", dpi=120)
    plt.close(fig)


def train_and_evaluate(config, workdir: Path) -> dict:
    workdir = Path(workdir)
    specs = [s.strip() for s in config.models]
    for spec in [*specs, *config.plot_models]:  # every spec is checked before any work
        parse_spec(spec, config.model)
    if unknown := sorted(set(config.plot_models) - set(specs)):
        raise ValueError(f"config.plot_models: {unknown} are not in config.models.")
    sizes = sorted(int(n) for n in config.train_sizes)
    tables, summary, text = {}, {}, []
    for n in sizes:
        sized = size_config(config, n)
        data = data_from_config(sized)
        if n == sizes[0]:
            dense = build_model(
                parse_spec("dense", config.model),
                data.x_train.shape[1],
                data.y_train.shape[1],
                jax.random.key(0),
            )
            summary["dense_params"] = dense_params = count_params(dense)
        rows = {}
        for spec in specs:
            rows[spec] = train_model(sized, spec, data, model_dir(workdir, n, spec))
            row = {**rows[spec], "compression": dense_params / rows[spec]["n_params"]}
            summary.update({f"n{n}/{spec}.{k}": v for k, v in row.items()})
        tables[n] = rows
        text.append(f"### {n:,} training samples\n\n" + markdown_table(rows, dense_params))
        (workdir / "table.md").write_text("\n".join(text))
    plot_dir = workdir / "plots"
    plot_dir.mkdir(parents=True, exist_ok=True)
    plot_compression(tables, plot_dir)
    n = sizes[-1]
    predictions = {}
    for spec in config.plot_models:
        model = trained_model(config, spec, data, model_dir(workdir, n, spec))
        predictions[spec] = np.asarray(predict(model, data.x_test))[:, 0] * data.y_std
    truth = np.asarray(data.y_test)[:, 0] * data.y_std
    sample = int(config.plot_sample)
    plot_predictions(truth[sample], {k: p[sample] for k, p in predictions.items()}, plot_dir)
    plot_spectra(truth, predictions, plot_dir)
    (workdir / "spectra.json").write_text(
        json.dumps(
            {
                name: radial_spectrum(field)[1].tolist()
                for name, field in {"truth": truth, **predictions}.items()
            }
        )
        + "\n"
    )
    return summary


def validate_config(config) -> None:
    """Data and model sizes and choices, checked by the runner before anything is written."""
    validate_operator_config(config)
    check_config(config, positive_numbers=("data.dt", "data.t_final", "data.viscosity"))
    check_config(config, positive=("train_sizes",))
