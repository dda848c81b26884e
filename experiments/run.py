"""Runs an experiment config: `python -m experiments.run --config FILE[:variant]`.

```
python -m experiments.run --config experiments/configs/quickstart.py \
    [--config.train.steps=200 ...] [--workdir DIR] [--resume RUN_DIR]
```

Writes `config.json`, `metrics.jsonl`, `checkpoints/`, `plots/*.png` and
`summary.json` under `runs/<name>/<timestamp>/` (or `--workdir DIR`). A run
directory that already holds checkpoints of the same experiment is resumed from
the latest one; `--resume RUN_DIR` does this with the config saved there. Every
check on the config (file, `get_config`, keys, value types) runs before any
work starts, and nothing on disk is overwritten when one fails.
"""

from __future__ import annotations

import argparse
import ast
import datetime
import importlib
import importlib.util
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

import ml_collections


REQUIRED_KEYS = (
    "name",
    "task",
    "seed",
    "train.steps",
    "train.log_every",
    "train.eval_every",
    "train.checkpoint_every",
    "train.keep_checkpoints",
)


class ConfigError(ValueError):
    """A config file or override that cannot be used."""


def load_config(spec: str) -> ml_collections.ConfigDict:
    """Loads `FILE[:variant]`: calls `get_config(variant)` of the Python file."""
    path, _, variant = spec.partition(":")
    file = Path(path)
    if not file.is_file():
        raise ConfigError(f"--config: file {path!r} does not exist.")
    module_spec = importlib.util.spec_from_file_location(f"_sciml_config_{file.stem}", file)
    module = importlib.util.module_from_spec(module_spec)
    module_spec.loader.exec_module(module)
    get_config = getattr(module, "get_config", None)
    if not callable(get_config):
        raise ConfigError(f"--config: {path!r} defines no get_config() function.")
    try:
        config = get_config(variant or None)
    except (KeyError, ValueError) as error:
        raise ConfigError(f"--config: {path!r} has no variant {variant!r}: {error}") from None
    if not isinstance(config, ml_collections.ConfigDict):
        raise ConfigError(f"--config: get_config() of {path!r} must return a ConfigDict.")
    config.lock()
    return config


def _parse_value(raw: str, current: Any) -> Any:
    if isinstance(current, str):
        return raw
    if isinstance(current, bool):
        if raw.lower() in ("true", "1", "yes"):
            return True
        if raw.lower() in ("false", "0", "no"):
            return False
        raise ValueError(f"expected a boolean, got {raw!r}")
    try:
        value = ast.literal_eval(raw)
    except (ValueError, SyntaxError):
        value = raw
    if isinstance(current, float) and isinstance(value, int) and not isinstance(value, bool):
        value = float(value)
    if isinstance(current, tuple) and isinstance(value, list):
        value = tuple(value)
    if current is not None and not isinstance(value, type(current)):
        raise ValueError(f"expected {type(current).__name__}, got {raw!r}")
    return value


def apply_overrides(config: ml_collections.ConfigDict, overrides: list[tuple[str, str]]) -> None:
    """Sets `key=value` pairs (dotted keys); unknown keys and wrong types raise."""
    for key, raw in overrides:
        *parents, leaf = key.split(".")
        node = config
        for i, part in enumerate(parents):
            if not isinstance(node, ml_collections.ConfigDict) or part not in node:
                raise ConfigError(f"--config.{key}: unknown key {'.'.join(parents[: i + 1])!r}.")
            node = node[part]
        if not isinstance(node, ml_collections.ConfigDict) or leaf not in node:
            raise ConfigError(f"--config.{key}: unknown key {key!r}.")
        try:
            value = _parse_value(raw, node[leaf])
            node[leaf] = value
        except (ValueError, TypeError) as error:
            raise ConfigError(f"--config.{key}: wrong type: {error}.") from None


def validate(config: ml_collections.ConfigDict) -> None:
    """Checks the keys every config has and that its task module exists."""
    for key in REQUIRED_KEYS:
        node = config
        for part in key.split("."):
            if not isinstance(node, ml_collections.ConfigDict) or part not in node:
                raise ConfigError(f"config key {key!r} is missing (see docs/experiments.md).")
            node = node[part]
    if int(config.train.steps) < 0:
        raise ConfigError(f"config key 'train.steps' must be >= 0, got {config.train.steps}.")
    task_module(config)


def task_module(config: ml_collections.ConfigDict):
    try:
        module = importlib.import_module(f"experiments.tasks.{config.task}")
    except ModuleNotFoundError as error:
        if error.name != f"experiments.tasks.{config.task}":
            raise
        raise ConfigError(
            f"config key 'task': no task module experiments/tasks/{config.task}.py."
        ) from None
    if not (hasattr(module, "build") or hasattr(module, "run")):
        raise ConfigError(f"task module {module.__name__} defines neither build() nor run().")
    return module


def check_workdir(config: ml_collections.ConfigDict, workdir: Path) -> None:
    """Refuses a run directory that belongs to another experiment."""
    saved = workdir / "config.json"
    if saved.exists():
        other = json.loads(saved.read_text())
        if (other.get("name"), other.get("task")) != (config.name, config.task):
            raise ConfigError(
                f"{workdir} holds a run of experiment {other.get('name')!r} "
                f"(task {other.get('task')!r}), not {config.name!r}; choose another --workdir."
            )
    elif workdir.exists() and any(workdir.iterdir()):
        raise ConfigError(f"{workdir} is not empty and holds no config.json; choose another.")


def default_workdir(config: ml_collections.ConfigDict, root: Path = Path("runs")) -> Path:
    stamp = datetime.datetime.now().strftime("%Y%m%d-%H%M%S")
    workdir = root / str(config.name) / stamp
    suffix = 1
    while workdir.exists():
        workdir = root / str(config.name) / f"{stamp}-{suffix}"
        suffix += 1
    return workdir


def plot_loss(metrics_path: Path, plot_dir: Path) -> None:
    """Plots the training loss from `metrics.jsonl` to `plot_dir/loss.png`."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from sciml.training import read_metrics

    train = [m for m in read_metrics(metrics_path) if m.get("split") == "train"]
    if not train:
        return
    fig, ax = plt.subplots(figsize=(5, 3.5))
    ax.semilogy([m["step"] for m in train], [float(m["loss"]) for m in train])
    ax.set(xlabel="step", ylabel="training loss")
    fig.tight_layout()
    fig.savefig(plot_dir / "loss.png", dpi=120)
    plt.close(fig)


def _train_standard(module, config: ml_collections.ConfigDict, workdir: Path) -> dict:
    import jax

    from experiments.common import count_params, fingerprint, train_kwargs
    from sciml.training import fit, make_optimizer

    experiment = module.build(config)
    optimizer = make_optimizer(config.get("optimizer"), experiment.label_fn)
    start = time.perf_counter()
    result = fit(
        experiment.model,
        experiment.loss_fn,
        experiment.batch_fn,
        optimizer=optimizer,
        key=jax.random.key(int(config.seed) + 1),
        workdir=workdir,
        eval_fn=experiment.evaluate,
        fingerprint=fingerprint(config),
        description=str(config.name),
        **train_kwargs(config),
    )
    seconds = time.perf_counter() - start
    plot_dir = workdir / "plots"
    if experiment.plot is not None:
        experiment.plot(result.model, plot_dir)
    plot_loss(workdir / "metrics.jsonl", plot_dir)
    summary = {
        "final_loss": result.metrics.get("loss"),
        "steps": result.step,
        "train_seconds": seconds,
        "n_params": count_params(result.model),
    }
    summary.update(
        {k[len("eval_") :]: v for k, v in result.metrics.items() if k.startswith("eval_")}
    )
    return summary


def main_from_config(config: ml_collections.ConfigDict, workdir: str | Path) -> dict:
    """Runs `config` in `workdir` and returns its summary (also `summary.json`)."""
    from sciml.training._metrics import to_python

    validate(config)
    workdir = Path(workdir)
    check_workdir(config, workdir)
    module = task_module(config)
    (workdir / "plots").mkdir(parents=True, exist_ok=True)
    (workdir / "config.json").write_text(config.to_json_best_effort(indent=2, sort_keys=True))
    if hasattr(module, "build"):
        summary = _train_standard(module, config, workdir)
    else:
        summary = module.run(config, workdir)
    summary = to_python(summary)
    (workdir / "summary.json").write_text(json.dumps(summary, indent=2, sort_keys=True) + "\n")
    return summary


def _split_overrides(extra: list[str]) -> list[tuple[str, str]]:
    overrides, i = [], 0
    while i < len(extra):
        arg = extra[i]
        if not arg.startswith("--config."):
            raise ConfigError(f"unrecognised argument {arg!r}; overrides look like --config.KEY=V.")
        key, eq, value = arg[len("--config.") :].partition("=")
        if not eq:
            if i + 1 >= len(extra):
                raise ConfigError(f"{arg}: missing value.")
            value, i = extra[i + 1], i + 1
        overrides.append((key, value))
        i += 1
    return overrides


def parse(argv: list[str]) -> tuple[ml_collections.ConfigDict, Path]:
    """Turns command-line arguments into a checked config and a run directory."""
    parser = argparse.ArgumentParser(prog="python -m experiments.run", description=__doc__)
    parser.add_argument("--config", help="config file, optionally FILE:variant")
    parser.add_argument("--workdir", type=Path, help="run directory (default runs/<name>/<time>)")
    parser.add_argument("--resume", type=Path, help="continue the run in this directory")
    args, extra = parser.parse_known_args(argv)
    overrides = _split_overrides(extra)
    if args.resume is not None:
        if args.config is not None or args.workdir is not None:
            raise ConfigError("--resume takes the config and directory of the run; drop --config.")
        saved = args.resume / "config.json"
        if not saved.is_file():
            raise ConfigError(f"--resume: {args.resume} holds no config.json.")
        config = ml_collections.ConfigDict(json.loads(saved.read_text()))
        config.lock()
        workdir = args.resume
    elif args.config is None:
        raise ConfigError("give --config FILE[:variant] (or --resume RUN_DIR).")
    else:
        config = load_config(args.config)
        workdir = None
    apply_overrides(config, overrides)
    validate(config)
    workdir = workdir or args.workdir or default_workdir(config)
    check_workdir(config, workdir)
    return config, workdir


def main(argv: list[str] | None = None) -> int:
    try:
        config, workdir = parse(sys.argv[1:] if argv is None else argv)
    except ConfigError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    from sciml.training import NonFiniteLossError

    print(f"run directory: {workdir}", file=sys.stderr)
    try:
        summary = main_from_config(config, workdir)
    except KeyboardInterrupt:
        print(
            f"interrupted; finished steps are checkpointed. Resume with:\n"
            f"  python -m experiments.run --resume {workdir}",
            file=sys.stderr,
        )
        return 130
    except NonFiniteLossError as error:
        print(f"error: {error}", file=sys.stderr)
        return 1
    print(json.dumps(summary, indent=2, sort_keys=True))
    return 0


if __name__ == "__main__":
    os.environ.setdefault("MPLBACKEND", "Agg")
    sys.exit(main())
