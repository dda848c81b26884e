"""ParaRNN's language-model claim, small: ParaGRU and ParaLSTM language models
against a causal Transformer and an S5 state-space model of the same size.

The ParaRNN paper trains 7B-parameter ParaGRU / ParaLSTM models "that attain
perplexity comparable to similarly-sized Transformers and Mamba2". This is a
proxy at about 0.14 M parameters: the `char_lm` corpus (the Python standard
library's source, bytes), its budget (2,000 AdamW steps of 16 windows of 256
bytes) and its validation windows; every model trained with each seed of
`config.seeds` (initialisation and batch order: the same batches for every
model of a seed), so the differences to the baseline (`config.baseline`, the
Transformer) are paired by seed.

The recurrent models train as the paper trains them: every recurrence solved
by Newton's method over the sequence (falling back to a sequential scan where
Newton fails). The S5 model is the package's `SequenceModel` on one-hot bytes,
its `(Λ, B, Δ)` in their own optimiser group (S5's recipe:
`config.optimizer.groups.ssm`).

The reading, fixed before the runs (`verdict`): a model is "comparable" to the
Transformer when its mean paired difference in validation bits per byte is
within `config.comparable_bpc` (0.05) of it, "better" or "worse" beyond that;
the 95 % t-interval is reported beside it.

With `config.sweep_learning_rates` (three or more rates), each model instead
trains once (`config.seed`) per rate for `config.train.steps` steps, scored on
the last `data.val_fraction` of the *training* bytes (the reported validation
windows are not read), and the rate of lowest loss is chosen (`at_edge` when
it is the smallest or largest tried; a rate at which training diverges
scores infinitely badly).

Writes `table.md`, `summary.json` (`<model>/seed<k>.val_bpc`, `.n_params`,
`.train_seconds`, `<model>.val_bpc.mean`, `paired/<model>.val_bpc.{mean,low,high}`,
`paired/<model>.verdict`) and `plots/lm_compare.png`; each run trains in
`workdir/<model>/seed<k>/` (sweep: `workdir/sweep/<model>@<rate>/`) and leaves a
`result.json` there, so an interrupted comparison resumes the run it was in.
"""

from __future__ import annotations

import copy
import json
import math
import textwrap
from pathlib import Path

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from experiments.tasks.pararnn.char_lm import (
    cross_entropy,
    loss_fn,
    make_batch_fn,
    mode_solvers,
    split_corpus,
)
from experiments.tasks.pararnn.transformer import CausalTransformer
from sciml.experiment import (
    ConfigError,
    Experiment,
    Task,
    check_config,
    choose_on_grid,
    paired_difference,
    save_figure,
    train_experiment,
)
from sciml.pararnn import RNNModel
from sciml.ssm import SequenceModel, ssm_labels
from sciml.training import NonFiniteLossError, ProcessGroup


FAMILIES = ("paragru", "paralstm", "transformer", "s5")
LABELS = {
    "paragru": "ParaGRU (Newton)",
    "paralstm": "ParaLSTM (Newton)",
    "transformer": "causal Transformer",
    "s5": "S5 state-space model",
}


class OneHotSequenceModel(eqx.Module):
    """A `SequenceModel` on bytes: tokens `(length,)` one-hot encoded, logits `(length, 256)`."""

    model: SequenceModel

    def __call__(self, tokens):
        return self.model(jax.nn.one_hot(tokens, 256))


def build_model(config, family: str, key):
    """The model of `family` with its block of `config.model`."""
    m = config.model[family]
    if family in ("paragru", "paralstm"):
        model = RNNModel(
            256,
            256,
            int(m.width),
            int(m.depth),
            cell=family,
            num_heads=int(m.num_heads),
            mlp_ratio=int(m.mlp_ratio),
            tokens=True,
            key=key,
        )
        return model.with_solver(mode_solvers(config)["newton"])
    if family == "transformer":
        return CausalTransformer(
            256,
            int(m.width),
            int(m.depth),
            num_heads=int(m.num_heads),
            mlp_ratio=int(m.mlp_ratio),
            max_length=int(config.data.seq_len),
            key=key,
        )
    return OneHotSequenceModel(
        SequenceModel(
            256,
            256,
            layer="s5",
            d_model=int(m.d_model),
            n_layers=int(m.n_layers),
            state_size=int(m.state_size),
            pooling="none",
            key=key,
        )
    )


def make_evaluate(windows: jax.Array):
    """Mean cross-entropy of the next byte over `windows (n, seq_len + 1)`, in
    nats (`val_loss`) and bits per byte (`val_bpc`)."""

    @eqx.filter_jit
    def evaluate(model):
        logits = jax.lax.map(model, windows[:, :-1], batch_size=16)
        loss = cross_entropy(logits, windows[:, 1:])
        return {"val_loss": loss, "val_bpc": loss / math.log(2)}

    return evaluate


def run_config(config, family: str, seed: int, learning_rate: float | None = None):
    """`config` for one run: its seed, and its family's learning rate."""
    run = copy.deepcopy(config)
    with run.unlocked():
        run.seed = int(seed)
        rate = config.learning_rates[family] if learning_rate is None else learning_rate
        run.optimizer.learning_rate = float(rate)
        if family != "s5":  # only S5 has (Λ, B, Δ) to put in their own group
            run.optimizer.groups = {}
    return run


def train_one(config, family: str, train, windows, folder: Path) -> dict:
    """Trains one model (resuming if interrupted) and returns its row:
    `val_bpc`, `val_loss`, `final_loss`, `n_params`, `train_seconds`
    (*collective* on several processes: process 0 reads and writes `result.json`)."""
    done = folder / "result.json"
    group = ProcessGroup.current()
    row = group.broadcast(json.loads(done.read_text()) if group.main and done.is_file() else None)
    if row is not None:
        return row
    model_key, train_key = jax.random.split(jax.random.key(int(config.seed)))
    batch_fn = make_batch_fn(train, int(config.data.seq_len), int(config.train.batch_size))
    experiment = Experiment(
        build_model(config, family, model_key),
        loss_fn,
        batch_fn,
        evaluate=make_evaluate(windows),
        label_fn=ssm_labels if family == "s5" else None,
    )
    trained = train_experiment(
        experiment,
        config,
        folder,
        key=train_key,
        tag={"model": family},
        description=f"{family} seed {config.seed} lr {config.optimizer.learning_rate:g}",
        plots=False,
    )
    keys = ("val_bpc", "val_loss", "final_loss", "n_params", "train_seconds")
    row = {k: trained.summary[k] for k in keys}
    if group.main:
        done.write_text(json.dumps(row, indent=2) + "\n")
    return row


def verdict(interval: dict[str, float], margin: float) -> str:
    """The reading fixed in advance, on the mean paired difference `d = model −
    baseline` in bits per byte: within `margin` "comparable", below "better",
    above "worse"."""
    if abs(interval["mean"]) <= margin:
        return "comparable"
    return "better" if interval["mean"] < 0 else "worse"


def sweep_windows(config) -> tuple[jax.Array, jax.Array]:
    """The training bytes less their last `data.val_fraction`, and windows of
    that held-out tail (`data.val_windows` of `seq_len + 1`): the sweep's
    split, which never reads the reported validation windows."""
    train, _, _ = split_corpus(config)
    seq_len, n = int(config.data.seq_len), int(config.data.val_windows)
    cut = int(train.shape[0] * (1 - float(config.data.val_fraction)))
    tail = np.asarray(train[cut:])
    starts = np.linspace(0, len(tail) - seq_len - 1, n).astype(int)
    return train[:cut], jnp.asarray(np.stack([tail[s : s + seq_len + 1] for s in starts]))


def sweep_one(config, family: str, train, windows, folder: Path) -> dict:
    """`train_one` for the sweep: a rate at which training diverges (a
    non-finite loss, or a recurrence whose states are not finite even
    sequentially) scores `val_bpc = inf` and is recorded as `diverged`, so that
    the sweep goes on to the next rate (and does not retry it on resume)."""
    try:
        return train_one(config, family, train, windows, folder)
    except (NonFiniteLossError, eqx.EquinoxRuntimeError) as error:
        lines = [line.strip() for line in str(error).splitlines() if line.strip()]
        reason = next((line for line in lines if "finite" in line.lower()), lines[0])
        row = {"val_bpc": math.inf, "diverged": reason[:300]}
        if ProcessGroup.current().main:
            (folder / "result.json").write_text(json.dumps(row, indent=2) + "\n")
        return row


def sweep(config, workdir: Path) -> dict:
    """Each family once (`config.seed`) at every rate of `config.sweep_learning_rates`."""
    train, windows = sweep_windows(config)
    rates = sorted(float(r) for r in config.sweep_learning_rates)
    summary, lines = {}, ["| model | " + " | ".join(f"{r:g}" for r in rates) + " | chosen |"]
    lines.append("| --- " * (len(rates) + 2) + "|")
    for family in config.models:
        rows = {
            lr: sweep_one(
                run_config(config, family, int(config.seed), lr),
                family,
                train,
                windows,
                workdir / "sweep" / f"{family}@{lr:g}",
            )
            for lr in rates
        }
        best, at_edge = choose_on_grid({lr: r["val_bpc"] for lr, r in rows.items()})
        summary.update({f"sweep/{family}@{lr:g}.val_bpc": rows[lr]["val_bpc"] for lr in rates})
        summary[f"sweep/{family}.learning_rate"] = best
        summary[f"sweep/{family}.at_edge"] = at_edge
        cells = [
            "diverged" if "diverged" in rows[lr] else f"{rows[lr]['val_bpc']:.4f}" for lr in rates
        ]
        cells = [f"**{c}**" if lr == best else c for c, lr in zip(cells, rates)]
        lines.append(f"| {LABELS[family]} | " + " | ".join(cells) + f" | {best:g} |")
    if ProcessGroup.current().main:
        (workdir / "sweep.md").write_text("\n".join(lines) + "\n")
    return summary


def compare(config, workdir: Path) -> dict:
    """Every family with every seed, and the paired differences to the baseline."""
    train, windows, corpus_info = split_corpus(config)
    seeds = [int(s) for s in config.seeds]
    # seed by seed, every family within a seed: a run stopped early leaves
    # whole paired seeds behind
    runs = {family: {} for family in config.models}
    for seed in seeds:
        for family in config.models:
            runs[family][seed] = train_one(
                run_config(config, family, seed),
                family,
                train,
                windows,
                workdir / family / f"seed{seed}",
            )
    summary = dict(corpus_info)
    base = str(config.baseline)
    margin = float(config.comparable_bpc)
    lines = [
        "| model | parameters | learning rate | "
        + " | ".join(f"seed {s}" for s in seeds)
        + f" | mean | − {LABELS[base]}, mean [95 % interval] | reading |",
        "| --- " * (len(seeds) + 6) + "|",
    ]
    for family, by_seed in runs.items():
        bpc = [by_seed[s]["val_bpc"] for s in seeds]
        for s in seeds:
            summary.update({f"{family}/seed{s}.{k}": v for k, v in by_seed[s].items()})
        summary[f"{family}.val_bpc.mean"] = float(np.mean(bpc))
        reading = "baseline"
        difference = "–"
        if family != base:
            # model − baseline: paired_difference takes (baseline, candidate) as b − c
            diff = paired_difference(bpc, [runs[base][s]["val_bpc"] for s in seeds])
            summary.update({f"paired/{family}.val_bpc.{k}": v for k, v in diff.items()})
            reading = summary[f"paired/{family}.verdict"] = verdict(diff, margin)
            difference = f"{diff['mean']:+.4f} [{diff['low']:+.4f}, {diff['high']:+.4f}]"
        lines.append(
            f"| {LABELS[family]} | {by_seed[seeds[0]]['n_params']:,} "
            f"| {float(config.learning_rates[family]):g} | "
            + " | ".join(f"{b:.4f}" for b in bpc)
            + f" | {np.mean(bpc):.4f} | {difference} | {reading} |"
        )
    if ProcessGroup.current().main:
        (workdir / "plots").mkdir(parents=True, exist_ok=True)
        (workdir / "table.md").write_text("Validation bits per byte.\n\n" + "\n".join(lines) + "\n")
        save_figure(plot_comparison(runs, seeds), workdir / "plots" / "lm_compare.png")
    return summary


def plot_comparison(runs: dict[str, dict[int, dict]], seeds, ax=None):
    """Validation bits per byte of every model, one marker per seed and the
    mean as a bar; returns the axis."""
    import matplotlib.pyplot as plt

    if ax is None:
        _, ax = plt.subplots(figsize=(6.5, 4))
    for i, by_seed in enumerate(runs.values()):
        bpc = [by_seed[s]["val_bpc"] for s in seeds]
        ax.bar(i, np.mean(bpc), color=f"C{i}", alpha=0.35, width=0.6)
        ax.plot([i] * len(bpc), bpc, "o", color=f"C{i}", label=None)
    # labels wrapped to about the width of a bar, so neighbours do not overlap
    ax.set_xticks(
        range(len(runs)), [textwrap.fill(LABELS[f], 12, break_on_hyphens=False) for f in runs]
    )
    low = min(r["val_bpc"] for by_seed in runs.values() for r in by_seed.values())
    high = max(r["val_bpc"] for by_seed in runs.values() for r in by_seed.values())
    ax.set_ylim(low - 0.15 * (high - low + 0.05), high + 0.15 * (high - low + 0.05))
    ax.set(ylabel="validation bits per byte (lower is better)")
    ax.set_title(f"{len(seeds)} seeds each (dots), mean (bar)", fontsize=10)
    ax.grid(True, axis="y", alpha=0.3)
    ax.figure.tight_layout()
    return ax


def train_and_evaluate(config, workdir: Path) -> dict:
    workdir = Path(workdir)
    if config.get("sweep_learning_rates"):
        return sweep(config, workdir)
    return compare(config, workdir)


def validate_config(config) -> None:
    """Models, seeds, rates and sizes, checked by the runner before anything is written."""
    models = tuple(config.models)
    if not models or any(m not in FAMILIES for m in models) or len(set(models)) != len(models):
        raise ConfigError(f"config.models must be distinct names of {FAMILIES}, got {models!r}.")
    if config.baseline not in models:
        raise ConfigError(
            f"config key 'baseline' is {config.baseline!r}; accepted: one of config.models {models}."
        )
    seeds = tuple(config.seeds)
    if len(set(seeds)) < 2 or any(
        not isinstance(s, int) or isinstance(s, bool) or s < 0 for s in seeds
    ):
        raise ConfigError(f"config.seeds must be two or more distinct ints >= 0, got {seeds!r}.")
    for family in models:
        rate = config.learning_rates.get(family)
        if not isinstance(rate, int | float) or isinstance(rate, bool) or not rate > 0:
            raise ConfigError(f"config.learning_rates.{family} must be a number > 0, got {rate!r}.")
    rates = tuple(config.sweep_learning_rates)
    if rates and (
        len(set(rates)) < 3 or any(not isinstance(r, int | float) or r <= 0 for r in rates)
    ):
        raise ConfigError(
            "config.sweep_learning_rates must be () or three or more distinct numbers > 0, "
            f"got {rates!r}."
        )
    check_config(
        config,
        positive=("data.max_bytes", "data.seq_len", "data.val_windows", "newton.max_iter")
        + tuple(f"model.{f}.{k}" for f in models for k in config.model[f]),
        positive_numbers=("data.val_fraction", "comparable_bpc"),
    )


TASK = Task(train_and_evaluate, validate=validate_config, data_parallel=True)
