"""The MG-TFNO paper's comparison, reproduced small: dense FNO vs TFNO (CP, Tucker,
TT at several ranks, joint Tucker across layers) vs MG-TFNO on 2-D Navier–Stokes.

Every model is trained on the same data (the `operators_ns` task's), with the
same optimiser, steps and seed, and scored on the same held-out set at the
training grid and zero-shot at 2×. Models are given as short specs in
`config.models`:

- `"dense"`: the FNO with dense spectral weights (the baseline);
- `"<factorization>:<rank>"` with factorization `cp`, `tucker` or `tt`, e.g.
  `"tucker:0.1"`: a TFNO, `rank` the fraction of the dense weight's size;
- `"joint:<rank>"`: one Tucker tensor for all layers' weights;
- `"mg<L>-<factorization>:<rank>"`, e.g. `"mg1-tucker:0.1"`: MG-TFNO with `L`
  levels (`config.model.padding_fraction`, `config.model.stitching`);
  `"mg<L>-p<D>-..."` sets the padding fraction to `1/D` (`"mg1-p8-tucker:0.1"`:
  padding 1/8) and `"mg<L>[-p<D>]-tiles-..."` trains per tile (the loss on each
  tile, `stitching=False`; evaluation always stitches). `"mg<L>-...-joint:<rank>"`
  is the paper's model: the domain decomposition with one Tucker tensor for all
  layers (`"mg2-p16-joint:0.001"`: 48² tiles at 128², 7.1× smaller than the
  domain, 158× fewer parameters than the dense FNO);
- any spec may end in `@<learning rate>` (`"dense@4e-3"`, `"joint:0.001@0.016"`):
  that model trains with this rate instead of `config.optimizer.learning_rate`,
  so a table can give each model the rate tuned for it.

With `config.memory_devices = n > 1` (and at least `n` devices, e.g.
`XLA_FLAGS=--xla_force_host_platform_device_count=4` on a CPU), the MG-TFNO rows
also get the peak memory per device of their train step with the tiles sharded
over `n` devices, the neuraloperator recipe's model parallelism
(`peak_memory_mb_sharded`); training itself runs on one device.

Each model trains in `workdir/models/<spec>/` (checkpoints, `metrics.jsonl`) and
leaves a `result.json` there when done, so an interrupted table resumes the
model it was training and never retrains finished ones. The table goes to
`workdir/table.md` and `summary.json` (keys `<spec>.<metric>`), the
error-vs-parameters plot to `plots/compression.png`.

On several processes (`--processes N`) each model's batches are split over
them; process 0 alone writes the files and tells the others which models are
done.
"""

from __future__ import annotations

import copy
import json
import re
from pathlib import Path

import jax
import ml_collections

from experiments.tasks.operators.operators_common import (
    build_model,
    train_step_memory,
    validate_operator_config,
)
from experiments.tasks.operators.operators_ns import data_from_config, experiment
from sciml.distributed import ProcessGroup, is_main_process
from sciml.experiment import (
    Task,
    check_config,
    count_params,
    readable_log_ticks,
    save_figure,
    train_experiment,
)
from sciml.training import make_optimizer


SPEC = re.compile(
    r"^(?:mg(?P<levels>\d+)-(?:p(?P<padding>\d+)-)?(?P<tiles>tiles-)?)?"
    r"(?P<kind>dense|cp|tucker|tt|joint)(?::(?P<rank>[\d.e-]+))?(?:@(?P<lr>[\d.e+-]+))?$"
)
METRICS = ("test_rel_l2", "test_rel_h1", "test_rel_l2_2x", "test_rel_h1_2x")


def parse_spec(spec: str, base: ml_collections.ConfigDict) -> ml_collections.ConfigDict:
    """The model config of one spec: `base` (a `model_config`) with its changes."""
    match = SPEC.match(spec)
    if (
        match is None
        or (match["kind"] == "dense") != (match["rank"] is None)
        or match["padding"] == "0"
        or not _positive_number(match["lr"])
    ):
        raise ValueError(
            f"config.models: bad model spec {spec!r}; expected 'dense', "
            "'<cp|tucker|tt|joint>:<rank>' or 'mg<L>[-p<D>][-tiles]-<cp|tucker|tt|joint>:<rank>' "
            "(D > 0: padding fraction 1/D), each optionally ending in '@<learning rate>' "
            "(a number > 0)."
        )
    cfg = copy.deepcopy(base)
    kind = match["kind"]
    cfg.factorization = "tucker" if kind == "joint" else kind
    cfg.joint_factorization = kind == "joint"
    if match["rank"] is not None:
        cfg.rank = float(match["rank"])
    if match["levels"] is not None:
        if kind == "dense":
            raise ValueError(
                f"config.models: {spec!r}: MG-TFNO takes cp, tucker, tt or joint weights."
            )
        cfg.kind = "mgtfno"
        cfg.levels = int(match["levels"])
        if match["padding"] is not None:
            cfg.padding_fraction = 1 / int(match["padding"])
        if match["tiles"]:
            cfg.stitching = False
    return cfg


def _positive_number(text: str | None) -> bool:
    """True for `None` (no learning rate given) or the text of a number > 0."""
    if text is None:
        return True
    try:
        return float(text) > 0
    except ValueError:
        return False


def spec_config(config: ml_collections.ConfigDict, spec: str) -> ml_collections.ConfigDict:
    """`config` as model `spec` trains with it: its `@<learning rate>` (if
    any) in `config.optimizer.learning_rate`."""
    lr = SPEC.match(spec)["lr"]
    if lr is None:
        return config
    config = copy.deepcopy(config)
    with config.unlocked():
        config.optimizer.learning_rate = float(lr)
    return config


def sharded_step_memory(config, model_cfg, exp, batch, optimizer) -> int | None:
    """Peak memory per device of an MG-TFNO train step with its tiles sharded
    over `config.memory_devices` devices of this process (None for other
    models, for `memory_devices <= 1`, or when it has fewer devices)."""
    n = int(config.get("memory_devices", 1))
    if model_cfg.kind != "mgtfno" or n <= 1 or jax.local_device_count() < n:
        return None
    import numpy as np
    from jax.sharding import Mesh, NamedSharding, PartitionSpec

    mesh = Mesh(np.array(jax.local_devices()[:n]), ("tiles",))
    sharding = NamedSharding(mesh, PartitionSpec("tiles"))
    x = batch[0]
    model = build_model(model_cfg, x.shape[1], batch[1].shape[1], jax.random.key(0), sharding)
    return train_step_memory(model, exp.loss_fn, batch, optimizer)


def train_model(config, spec: str, data, model_dir: Path) -> dict:
    """Trains one model (resuming if interrupted) and returns its table row
    (*collective* on several processes: process 0 reads and writes `result.json`)."""
    done = model_dir / "result.json"
    group = ProcessGroup.current()
    row = group.broadcast(json.loads(done.read_text()) if group.main and done.is_file() else None)
    if row is not None:
        return row
    model_cfg = parse_spec(spec, config.model)
    config = spec_config(config, spec)
    exp = experiment(config, data, model_cfg)
    optimizer = make_optimizer(config.optimizer)
    batch = exp.batch_fn(0, jax.random.key(0))
    memory = train_step_memory(exp.model, exp.loss_fn, batch, optimizer)
    sharded = sharded_step_memory(config, model_cfg, exp, batch, optimizer)
    trained = train_experiment(
        exp, config, model_dir, tag={"model": spec}, description=spec, plots=False
    )
    steps, steps_run = trained.result.step, trained.result.step - trained.result.start_step
    row = {
        "n_params": trained.summary["n_params"],
        # a resumed model is timed over the steps of its last invocation
        "train_seconds": trained.summary["train_seconds"] * steps / max(steps_run, 1),
        "peak_memory_mb": None if memory is None else memory / 2**20,
        "peak_memory_mb_sharded": None if sharded is None else sharded / 2**20,
        **{k: trained.summary.get(k) for k in METRICS},
        # the training-set errors, where the evaluation records them (`eval_on_train`)
        **{k: v for k, v in trained.summary.items() if k.startswith("train_rel_")},
    }
    if group.main:
        done.write_text(json.dumps(row, indent=2) + "\n")
    return row


def markdown_table(rows: dict[str, dict], dense_params: int) -> str:
    """The comparison as a Markdown table (errors in percent)."""
    lines = [
        "| model | parameters | compression | rel. L2 | rel. H1 | rel. L2 at 2× "
        "| train time (s) | peak memory (MB) | per device, tiles sharded (MB) |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for spec, r in rows.items():

        def pct(key, r=r):
            return "–" if r[key] is None else f"{100 * r[key]:.2f}%"

        def mb(key, r=r):
            return "–" if r.get(key) is None else f"{r[key]:.0f}"

        lines.append(
            f"| {spec} | {r['n_params']:,} | {dense_params / r['n_params']:.1f}× "
            f"| {pct('test_rel_l2')} | {pct('test_rel_h1')} | {pct('test_rel_l2_2x')} "
            f"| {r['train_seconds']:.0f} | {mb('peak_memory_mb')} | {mb('peak_memory_mb_sharded')} |"
        )
    return "\n".join(lines) + "\n"


def spec_label(spec: str) -> str:
    """A model spec in words, for a legend: `mg2-p4-tucker:0.1` is
    `MG-TFNO, 2 levels, padding 1/4, Tucker rank 0.1`."""
    match = SPEC.match(spec)
    if match is None:
        return spec
    rate = "" if match["lr"] is None else f", learning rate {float(match['lr']):g}"
    if match["kind"] == "dense":
        return "dense FNO" + rate
    weights = {"cp": "CP", "tucker": "Tucker", "tt": "TT", "joint": "joint Tucker"}
    label = f"{weights[match['kind']]} rank {match['rank']}{rate}"
    if match["levels"] is None:
        return f"TFNO, {label}"
    levels = int(match["levels"])
    parts = [f"MG-TFNO, {levels} level{'s' if levels != 1 else ''}"]
    if match["padding"] is not None:
        parts.append(f"padding 1/{match['padding']}")
    if match["tiles"]:
        parts.append("tiles not stitched")
    return ", ".join([*parts, label])


def plot_errors_against_size(ax, rows: dict[str, dict]) -> None:
    """Test relative L2 error against parameter count on `ax`, one point per
    model (squares: dense, triangles: MG-TFNO, circles: the other TFNOs)."""
    for spec, r in rows.items():
        if r["test_rel_l2"] is None:
            continue
        match = SPEC.match(spec)  # the grammar's parse, learning-rate suffix and all
        marker = "s" if match["kind"] == "dense" else ("^" if match["levels"] else "o")
        ax.loglog(r["n_params"], r["test_rel_l2"], marker, label=spec_label(spec))
    ax.set(xlabel="parameters", ylabel="test relative L2 error")
    readable_log_ticks(ax, "x")
    readable_log_ticks(ax, "y")
    # 1-2-5 parameter labels over two decades ("200000", "1e+06") overlap when level
    for label in ax.get_xticklabels():
        label.set(rotation=35, ha="right")
    ax.grid(True, which="major", alpha=0.3)


def plot_compression(rows: dict[str, dict], *, title: str = "", ax=None):
    """Test relative L2 error against parameter count, one point per model.

    **Arguments:** `rows`, each spec's results; `title`, the run's name;
    `ax`, a matplotlib axis (default: a new figure).

    **Returns:** the axis.
    """
    import matplotlib.pyplot as plt

    new = ax is None
    if new:
        _, ax = plt.subplots(figsize=(6, 4))
    plot_errors_against_size(ax, rows)
    ax.set_title(f"{title}: error against size" if title else "error against size")
    ax.legend(fontsize=7, ncol=2)
    if new:
        ax.figure.tight_layout()
    return ax


def train_and_evaluate(config, workdir: Path) -> dict:
    specs = [s.strip() for s in config.models]
    for spec in specs:  # every spec is checked before any work starts
        parse_spec(spec, config.model)
    data = data_from_config(config)
    dense = build_model(
        parse_spec("dense", config.model),
        data.x_train.shape[1],
        data.y_train.shape[1],
        jax.random.key(0),
    )
    dense_params = count_params(dense)
    rows = {}
    for spec in specs:
        model_dir = Path(workdir) / "models" / spec.replace(":", "-")
        rows[spec] = train_model(config, spec, data, model_dir)
    if is_main_process():
        (Path(workdir) / "table.md").write_text(markdown_table(rows, dense_params))
        compression = plot_compression(rows, title=str(config.name))
        save_figure(compression, Path(workdir) / "plots" / "compression.png")
    summary = {"dense_params": dense_params}
    for spec, row in rows.items():
        row = {**row, "compression": dense_params / row["n_params"]}
        summary.update({f"{spec}.{k}": v for k, v in row.items()})
    return summary


def validate_config(config) -> None:
    """Data and model sizes and choices, checked by the runner before anything is written."""
    validate_operator_config(config)
    check_config(config, positive_numbers=("data.dt", "data.t_final", "data.viscosity"))


TASK = Task(train_and_evaluate, validate=validate_config, data_parallel=True)
