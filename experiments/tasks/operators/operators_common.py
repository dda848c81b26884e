"""What the neural-operator experiments share: models from configs, data scaling,
losses, batched prediction, metrics, plots and train-step memory.

Fields are stored as `(n, channels, *grid)` arrays. Inputs are standardised with
the training set's mean and standard deviation; outputs are divided by the
training outputs' standard deviation (relative losses do not change under a
scale, so the model's relative errors are the physical ones).
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from experiments.configs._operators import model_config as model_config
from sciml.experiment import Experiment, check_config, save_figure
from sciml.operators import FNO, MGTFNO, h1_loss, relative_lp_loss
from sciml.training import peak_memory_bytes


def build_model(cfg, in_channels: int, out_channels: int, key, tile_sharding=None) -> eqx.Module:
    """An `FNO` (dense or factorised) or `MGTFNO` from a `model_config`
    (`tile_sharding`: the MG-TFNO's, see `sciml.operators.MGTFNO`)."""
    kwargs = dict(
        n_layers=int(cfg.n_layers),
        factorization=None if cfg.factorization == "dense" else cfg.factorization,
        rank=float(cfg.rank),
        joint_factorization=bool(cfg.joint_factorization),
        implementation=cfg.implementation,
        lifting_channel_ratio=float(cfg.lifting_channel_ratio),
        projection_channel_ratio=float(cfg.projection_channel_ratio),
        channel_mlp_skip=cfg.channel_mlp_skip,
        fno_skip=cfg.fno_skip,
        domain_padding=float(cfg.domain_padding) or None,
        key=key,
    )
    args = (tuple(cfg.n_modes), in_channels, out_channels, int(cfg.hidden_channels))
    if cfg.kind == "fno":
        return FNO(*args, **kwargs)
    if cfg.kind == "mgtfno":
        levels = int(cfg.levels)
        tile_in = MGTFNO.tile_channels(in_channels, len(args[0]), levels, "grid")
        return MGTFNO(
            FNO(args[0], tile_in, *args[2:], positional_embedding=None, **kwargs),
            levels=levels,
            padding_fraction=float(cfg.padding_fraction),
            stitching=bool(cfg.stitching),
            tile_sharding=tile_sharding,
        )
    raise ValueError(f"config.model.kind must be 'fno' or 'mgtfno', got {cfg.kind!r}.")


@dataclasses.dataclass
class OperatorData:
    """Scaled train / test fields, `(n, channels, *grid)`, and the scales used."""

    x_train: jax.Array
    y_train: jax.Array
    x_test: jax.Array
    y_test: jax.Array
    x_test_2x: jax.Array | None
    y_test_2x: jax.Array | None
    x_mean: float
    x_std: float
    y_std: float

    @classmethod
    def from_arrays(cls, x_train, y_train, x_test, y_test, x_test_2x=None, y_test_2x=None):
        dtype = jnp.result_type(float)
        x_mean, x_std = float(np.mean(x_train)), float(np.std(x_train))
        y_std = float(np.std(y_train))

        def prep(x, shift, scale):
            return None if x is None else jnp.asarray((np.asarray(x) - shift) / scale, dtype)

        return cls(
            prep(x_train, x_mean, x_std),
            prep(y_train, 0.0, y_std),
            prep(x_test, x_mean, x_std),
            prep(y_test, 0.0, y_std),
            prep(x_test_2x, x_mean, x_std),
            prep(y_test_2x, 0.0, y_std),
            x_mean,
            x_std,
            y_std,
        )


def _last_time(data, key: str) -> np.ndarray:
    """The array `key`, `(n, channel, *grid)`: a trajectory gives its last record."""
    array = np.asarray(data[key])
    axes = data.axes.get(key, ())
    if "time" in axes:
        array = np.take(array, -1, axis=axes.index("time"))
    return array


def _checked_file(d, key: str, *, problem: str):
    """The data set in the file `d[key]`, checked against the config: the
    problem, the resolution and every physical key the config shares with it."""
    from sciml.data import read_dataset

    path = d[key]
    if not Path(path).is_file():
        raise FileNotFoundError(
            f"config.data.{key}: {path} does not exist; write it with "
            f"`python -m solvers.generate {problem} ...` (the config's docstring gives "
            "the command) or point the key at an existing file."
        )
    data = read_dataset(path, ["inputs", "outputs"])
    if data.attrs.get("problem") != problem:
        raise ValueError(
            f"config.data.{key}: {path} holds problem {data.attrs.get('problem')!r}, "
            f"this task needs {problem!r}."
        )
    if data.resolution != int(d.resolution):
        raise ValueError(
            f"config.data.{key}: {path} has resolution {data.resolution}, the config "
            f"{int(d.resolution)}; set --config.data.resolution={data.resolution}."
        )
    differ = [
        f"{name} (file {value!r}, config {d[name]!r})"
        for name, value in data.params.items()
        if name in d and d[name] != value
    ]
    if differ:
        raise ValueError(
            f"config.data.{key}: {path} was generated with other parameters: "
            + ", ".join(differ)
            + "."
        )
    return data


def _first(data, n: int, key: str, path_key: str):
    """The samples of index `< n` of `data`; all of them must be finished."""
    part = data.select([i for i in data.indices if i < n])
    if len(part) != n:
        raise ValueError(
            f"config.data.{path_key}: {data.path} holds {len(part)} finished samples of "
            f"index < {n}; config.data.{key} asks for {n} (lower it, or finish the file "
            "by running its generator command again)."
        )
    return part


def arrays_from_files(d, *, problem: str) -> tuple[np.ndarray, ...]:
    """Train / test (and 2× test) `(inputs, outputs)` arrays, `(n, channel, *grid)`,
    read with `sciml.data` from the files of a `data_config` (see
    `experiments.configs._operators.data_config`).

    Training samples are those of index `< n_train` in `d.path`; the test
    samples follow them in the same file, or are the first `n_test` of
    `d.test_path` when given (a file of another seed, so that one test set
    serves training sets of several sizes). The 2× test set is the test
    samples' indices in `d.path_2x`.

    Raises `ValueError` naming the config key when a file holds another problem,
    another resolution, other physical parameters than the config, too few
    finished samples, or (for `test_path`) the training file's seed.
    """
    from sciml.data import read_resolutions, train_test_split

    n_train, n_test = int(d.n_train), int(d.n_test)
    data = _checked_file(d, "path", problem=problem)
    if d.get("test_path"):
        test_data = _checked_file(d, "test_path", problem=problem)
        if test_data.attrs.get("seed") == data.attrs.get("seed"):
            raise ValueError(
                f"config.data.test_path: {d.test_path} has the seed of config.data.path "
                f"({data.attrs.get('seed')}), so its samples repeat the training samples; "
                "generate the test file with another --seed."
            )
        train = _first(data, n_train, "n_train", "path")
        test = _first(test_data, n_test, "n_test", "test_path")
    else:
        test_data = data
        train, test = train_test_split(data, n_train, n_test)
        if len(train) != n_train or len(test) != n_test:
            raise ValueError(
                f"config.data.path: {d.path} holds {len(train)} finished samples of index < "
                f"{n_train} and {len(test)} in [{n_train}, {n_train + n_test}); the config "
                f"asks for {n_train} and {n_test} (lower config.data.n_train / n_test, or "
                "finish the file by running its generator command again)."
            )
    arrays = [_last_time(part, key) for part in (train, test) for key in ("inputs", "outputs")]
    if d.path_2x:
        fine = read_resolutions([test_data, d.path_2x], ["inputs", "outputs"])
        fine = [v for r, v in fine.items() if r != test_data.resolution][0]
        fine_test = fine.select(test.indices)
        arrays += [_last_time(fine_test, "inputs"), _last_time(fine_test, "outputs")]
    return tuple(arrays)


def predict(model, x, batch_size: int = 16):
    """`model` applied to every sample of `x`, `batch_size` samples at a time."""
    return _predict(model, x, batch_size)


@eqx.filter_jit
def _predict(model, x, batch_size):
    return jax.lax.map(model, x, batch_size=min(batch_size, x.shape[0]))


def relative_errors(pred, true, *, periodic: bool, domain_length) -> dict[str, float]:
    """Mean relative L2 and H1 errors over samples (and channels)."""
    d = true.ndim - 2  # (samples, channels, *grid), this module's layout
    l2 = relative_lp_loss(pred, true, d=d, reduction="mean")
    h1 = h1_loss(pred, true, d=d, periodic=periodic, domain_length=domain_length, reduction="mean")
    return {"rel_l2": float(l2), "rel_h1": float(h1)}


def make_loss_fn(loss: str, *, periodic: bool, domain_length):
    """`loss_fn(model, (x, y), key) -> (loss, {"rel_l2", "rel_h1"})`.

    `loss` is `"h1"` or `"l2"` (relative, mean over samples). For an `MGTFNO`
    with `stitching=False` the loss is taken over tiles as independent samples.
    """
    if loss not in ("h1", "l2"):
        raise ValueError(f"config.train.loss must be 'h1' or 'l2', got {loss!r}.")

    def loss_fn(model, batch, key):
        x, y = batch
        if isinstance(model, MGTFNO):
            pred, target = jax.vmap(model.training_pair)(x, y)
            pred = pred.reshape((-1, *pred.shape[2:]))
            target = target.reshape((-1, *target.shape[2:]))
            tile_periodic = periodic and model.stitching
        else:
            pred, target, tile_periodic = jax.vmap(model)(x), y, periodic
        d = target.ndim - 2  # (samples, channels, *grid), this module's layout
        l2 = relative_lp_loss(pred, target, d=d, reduction="mean")
        h1 = h1_loss(
            pred, target, d=d, periodic=tile_periodic, domain_length=domain_length, reduction="mean"
        )
        return (h1 if loss == "h1" else l2), {"rel_l2": l2, "rel_h1": h1}

    return loss_fn


def make_batch_fn(x, y, batch_size: int):
    """`batch_fn(step, key)`: `batch_size` random training samples (a pure function)."""
    n = x.shape[0]

    @jax.jit
    def batch_fn(step, key):
        index = jax.random.randint(key, (batch_size,), 0, n)
        return x[index], y[index]

    return batch_fn


def make_evaluate(
    data: OperatorData, *, periodic: bool, domain_length, domain_length_2x=None, train=False
):
    """`evaluate(model)`: test errors at the training grid and (if present) at
    2×; with `train`, the errors on the whole training set too (`train_rel_l2`,
    `train_rel_h1`: how far the model fits what it is trained on)."""

    def evaluate(model) -> dict[str, float]:
        out = {}
        if train:
            errors = relative_errors(
                predict(model, data.x_train),
                data.y_train,
                periodic=periodic,
                domain_length=domain_length,
            )
            out.update({f"train_{k}": v for k, v in errors.items()})
        errors = relative_errors(
            predict(model, data.x_test), data.y_test, periodic=periodic, domain_length=domain_length
        )
        out.update({f"test_{k}": v for k, v in errors.items()})
        if data.x_test_2x is not None:
            errors = relative_errors(
                predict(model, data.x_test_2x, batch_size=4),
                data.y_test_2x,
                periodic=periodic,
                domain_length=domain_length_2x or domain_length,
            )
            out.update({f"test_{k}_2x": v for k, v in errors.items()})
        return out

    return evaluate


def plot_predictions(
    model, data: OperatorData, plot_dir: Path, *, labels=("input", "truth"), step=None
):
    """input / truth / prediction / |error| of the first test sample, one row per
    grid (the training grid and, if present, the zero-shot finer grid; the grid
    is named on the row, so the panel titles stay short); the errors of both
    rows on one colour scale, the title naming the model's training `step`."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    s = data.x_test.shape[-1]
    rows = [(f"test sample 0\n{s}×{s} (training grid)", data.x_test, data.y_test)]
    if data.x_test_2x is not None:
        s2 = data.x_test_2x.shape[-1]
        rows.append((f"test sample 0\n{s2}×{s2} (zero-shot)", data.x_test_2x, data.y_test_2x))
    fields = []
    for row_label, x, y in rows:
        x0 = np.asarray(x[0, 0]) * data.x_std + data.x_mean
        y0 = np.asarray(y[0, 0]) * data.y_std
        pred = np.asarray(predict(model, x[:1], batch_size=1)[0, 0]) * data.y_std
        fields.append((row_label, x0, y0, pred))
    error_max = max(float(np.max(np.abs(pred - y0))) for _, _, y0, pred in fields)
    fig, axes = plt.subplots(len(rows), 4, figsize=(13, 3.3 * len(rows) + 0.4), squeeze=False)
    for row, (row_label, x0, y0, pred) in zip(axes, fields):
        panels = [
            (x0, labels[0], "viridis", {}),
            (y0, labels[1], "RdBu_r", None),
            (pred, "prediction", "RdBu_r", None),
            (np.abs(pred - y0), "|error|", "magma", {"vmin": 0.0, "vmax": error_max}),
        ]
        vmax = float(np.max(np.abs(y0)))
        for ax, (field, title, cmap, limits) in zip(row, panels):
            kwargs = {"vmin": -vmax, "vmax": vmax} if limits is None else limits
            image = ax.imshow(field.T, origin="lower", cmap=cmap, **kwargs)
            ax.set(title=title, xticks=[], yticks=[])
            fig.colorbar(image, ax=ax, fraction=0.046)
        row[0].set_ylabel(row_label)
    shown = "the trained model" if step is None else f"the model after training step {step:,}"
    fig.suptitle(f"test predictions of {shown} (one error scale for all rows)")
    fig.tight_layout()
    save_figure(fig, plot_dir / "predictions.png", dpi=110)
    return fig


def train_step_memory(model, loss_fn, batch, optimizer) -> int | None:
    """Peak memory in bytes (XLA memory analysis) of one compiled training step."""
    params, static = eqx.partition(model, eqx.is_inexact_array)
    opt_state = optimizer.init(params)

    def step(params, opt_state, batch):
        def loss(p):
            return loss_fn(eqx.combine(p, static), batch, None)[0]

        grads = jax.grad(loss)(params)
        updates, opt_state = optimizer.update(grads, opt_state, params)
        return eqx.apply_updates(params, updates), opt_state

    return peak_memory_bytes(step, params, opt_state, batch)


def build_experiment(
    config,
    data: OperatorData,
    *,
    periodic: bool,
    domain_length,
    domain_length_2x=None,
    labels=("input", "truth"),
    model_cfg=None,
) -> Experiment:
    """The standard-loop `Experiment` of one operator model on `data`.

    The model is built from `model_cfg` (default `config.model`). With
    `config.eval_on_train`, every evaluation also scores the whole training set.
    """
    key = jax.random.key(int(config.seed))
    in_channels, out_channels = data.x_train.shape[1], data.y_train.shape[1]
    model = build_model(model_cfg or config.model, in_channels, out_channels, key)
    loss_fn = make_loss_fn(config.train.loss, periodic=periodic, domain_length=domain_length)
    return Experiment(
        model=model,
        loss_fn=loss_fn,
        batch_fn=make_batch_fn(data.x_train, data.y_train, int(config.train.batch_size)),
        evaluate=make_evaluate(
            data,
            periodic=periodic,
            domain_length=domain_length,
            domain_length_2x=domain_length_2x,
            train=bool(config.get("eval_on_train", False)),
        ),
        plot=lambda model, plot_dir: plot_predictions(
            model, data, plot_dir, labels=labels, step=int(config.train.steps)
        ),
    )


def validate_operator_config(config, *, data: bool = True) -> None:
    """The `model_config` block of an operator config and, with `data`, its
    data sizes; checked by the runner before anything is written (its tasks'
    `validate_config`)."""
    from sciml.operators._ranks import FACTORIZATIONS

    check_config(
        config,
        positive=("model.n_modes", "model.hidden_channels", "model.n_layers", "model.levels")
        + (("data.n_train", "data.n_test", "data.resolution") if data else ()),
        positive_numbers=("model.rank",),
        choices={"model.kind": ("fno", "mgtfno"), "model.factorization": FACTORIZATIONS},
    )
