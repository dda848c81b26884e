"""Character-level language model, trained with sequential and with Newton-parallel RNN layers.

The corpus is the source of the running interpreter's standard library (its
top-level `*.py` files, sorted by name, read as bytes: 256 symbols), so it is
available offline; `summary.json` records its size and hash because it changes
with the Python version. The last `val_fraction` of the bytes is held out.

A residual [`RNNModel`][sciml.pararnn.RNNModel] is trained twice from the same
initial parameters on the same batches: once with every recurrent layer in
`"sequential"` mode (a `lax.scan`), once in `"newton"` mode (Newton's method
with the implicit-function backward pass). Both runs go through the standard
loop (`sciml.experiment.train_experiment`) in `workdir/<mode>/`; the summary
compares their learning curves.
"""

from __future__ import annotations

import hashlib
import math
import sysconfig
from pathlib import Path

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from experiments.tasks.pararnn.pararnn_plots import plot_learning_curves
from sciml.experiment import (
    Experiment,
    Headline,
    Task,
    check_config,
    count_params,
    save_figure,
    train_experiment,
)
from sciml.pararnn import AutoScan, Fallback, Newton, RNNModel, Sequential
from sciml.training import read_metrics


MODES = ("sequential", "newton")


def load_corpus(max_bytes: int) -> tuple[np.ndarray, dict]:
    """The standard library's top-level `*.py` files as one byte array (at most `max_bytes`)."""
    stdlib = Path(sysconfig.get_paths()["stdlib"])
    files = sorted(stdlib.glob("*.py"))
    chunks, total = [], 0
    for file in files:
        if total >= max_bytes:
            break
        data = file.read_bytes() + b"\n"
        chunks.append(data)
        total += len(data)
    text = b"".join(chunks)[:max_bytes]
    info = {
        "corpus_bytes": len(text),
        "corpus_files": len(chunks),
        "corpus_sha256": hashlib.sha256(text).hexdigest()[:16],
        "corpus_dir": stdlib.name,
    }
    return np.frombuffer(text, dtype=np.uint8).astype(np.int32), info


def cross_entropy(logits, targets):
    """Mean cross-entropy (nats) of `logits (..., 256)` for the bytes `targets (...)`."""
    logp = jax.nn.log_softmax(logits.astype(jnp.float32))
    return -jnp.mean(jnp.take_along_axis(logp, targets[..., None], axis=-1))


def split_corpus(config) -> tuple[jax.Array, jax.Array, dict]:
    """The training bytes, the validation windows `(val_windows, seq_len + 1)` and the corpus info."""
    data = config.data
    corpus, corpus_info = load_corpus(int(data.max_bytes))
    seq_len = int(data.seq_len)
    split = int(len(corpus) * (1 - float(data.val_fraction)))
    train, val = jnp.asarray(corpus[:split]), corpus[split:]
    if split < 2 * (seq_len + 1) or len(val) < seq_len + 1:
        raise ValueError(
            f"data.max_bytes={data.max_bytes} gives too little text for data.seq_len={seq_len}."
        )
    starts = np.linspace(0, len(val) - seq_len - 1, int(data.val_windows)).astype(int)
    val_batch = jnp.asarray(np.stack([val[s : s + seq_len + 1] for s in starts]))
    return train, val_batch, corpus_info


def build_model(config, key) -> RNNModel:
    model_cfg = config.model
    return RNNModel(
        256,
        256,
        int(model_cfg.width),
        int(model_cfg.depth),
        cell=str(model_cfg.cell),
        num_heads=int(model_cfg.num_heads),
        mlp_ratio=int(model_cfg.mlp_ratio),
        tokens=True,
        dtype=jnp.dtype(str(model_cfg.dtype)),
        key=key,
    )


def mode_solvers(config) -> dict:
    """The recurrent layers' solver of each mode."""
    # config.newton: max_iter, fallback ("sequential" only) and method ("auto" only, both
    # checked by validate_config) of the Newton layers
    return {
        "sequential": Sequential(),
        "newton": Fallback(
            Newton(max_steps=int(config.newton.max_iter), linear=AutoScan()), Sequential()
        ),
    }


def make_batch_fn(train: jax.Array, seq_len: int, batch_size: int):
    """Random windows of `seq_len + 1` training bytes."""

    @jax.jit
    def batch_fn(step, key):
        offsets = jax.random.randint(key, (batch_size,), 0, train.shape[0] - seq_len - 1)
        return jax.vmap(lambda o: jax.lax.dynamic_slice(train, (o,), (seq_len + 1,)))(offsets)

    return batch_fn


def loss_fn(model, batch, key):
    loss = cross_entropy(jax.vmap(model)(batch[:, :-1]), batch[:, 1:])
    return loss, {"bpc": loss / math.log(2)}


def make_evaluate(val_batch: jax.Array):
    """Validation loss and bits per byte, and the Newton layers' iterations and fallbacks."""

    @eqx.filter_jit
    def evaluate(model):
        logits, diagnostics = jax.vmap(model.solve)(val_batch[:, :-1])
        loss = cross_entropy(logits, val_batch[:, 1:])
        metrics = {"val_loss": loss, "val_bpc": loss / math.log(2)}
        layers = [d for d in diagnostics if d is not None]
        if layers:
            iterations = jnp.stack([d.stats["iterations"] for d in layers])
            metrics["newton_iterations_max"] = jnp.max(iterations)
            metrics["newton_iterations_mean"] = jnp.mean(iterations)
            metrics["newton_fallbacks"] = sum(jnp.sum(d.stats["fallback"]) for d in layers)
        return metrics

    return evaluate


def mode_summary(result: dict, mode: str) -> dict:
    """A run's summary entries, suffixed by `mode` (the Newton diagnostics as they are)."""
    result = dict(result)
    summary = {
        f"train_seconds_{mode}": result.pop("train_seconds"),
        f"final_loss_{mode}": result.pop("final_loss"),
    }
    result.pop("steps")
    result.pop("n_params")
    for name, value in result.items():
        summary[name if name.startswith("newton_") else f"{name}_{mode}"] = value
    return summary


def training_curve(run_dir: Path) -> dict[int, float]:
    """The training loss per step from `run_dir/metrics.jsonl`."""
    train_log = [m for m in read_metrics(run_dir / "metrics.jsonl") if m["split"] == "train"]
    return {int(m["step"]): float(m["loss"]) for m in train_log}


def train_and_evaluate(config, workdir: Path) -> dict:
    train, val_batch, corpus_info = split_corpus(config)
    model_key, train_key = jax.random.split(jax.random.key(int(config.seed)))
    model = build_model(config, model_key)
    solvers = mode_solvers(config)
    batch_fn = make_batch_fn(train, int(config.data.seq_len), int(config.train.batch_size))
    evaluate = make_evaluate(val_batch)

    summary: dict = {"n_params": count_params(model), **corpus_info}
    curves = {}
    for mode in MODES:
        trained = train_experiment(
            Experiment(model.with_solver(solvers[mode]), loss_fn, batch_fn, evaluate=evaluate),
            config,
            workdir / mode,
            key=train_key,
            tag={"mode": mode},
            description=f"{config.name} ({mode})",
            plots=False,
        )
        summary.update(mode_summary(trained.summary, mode))
        curves[mode] = training_curve(workdir / mode)
    summary["steps"] = trained.summary["steps"]
    common = sorted(set(curves["sequential"]) & set(curves["newton"]))
    summary["max_abs_loss_difference"] = max(
        (abs(curves["sequential"][s] - curves["newton"][s]) for s in common), default=None
    )
    plot_dir = workdir / "plots"
    plot_dir.mkdir(parents=True, exist_ok=True)
    save_figure(plot_learning_curves(curves)[0], plot_dir / "learning_curves.png")
    return summary


def validate_config(config) -> None:
    """Data, model and Newton settings, checked by the runner before anything is written."""
    check_config(
        config,
        positive=(
            "data.max_bytes", "data.seq_len", "data.val_windows", "model.width", "model.depth",
            "model.num_heads", "model.mlp_ratio", "newton.max_iter",
        ),
        positive_numbers=("data.val_fraction",),
        choices={
            "model.dtype": ("float32", "float64", "bfloat16", "float16"),
            "newton.fallback": ("sequential",),
            "newton.method": ("auto",),
        },
    )  # fmt: skip


TASK = Task(
    train_and_evaluate,
    validate=validate_config,
    headline=Headline(
        "final_loss_newton", "final loss (Newton)", "final_loss_sequential", "sequential"
    ),
    data_parallel=True,
)
