"""The runner: a config and its task -> a run directory with a summary.

    sciml-run --config FILE[:variant] | MODULE[:variant] \\
        [--config.KEY=VALUE ...] [--workdir DIR] [--resume RUN_DIR]

(`python -m sciml.experiment` and `python -m experiments.run` are the same
command.) Writes `config.json`, `source.json`, `metrics.jsonl`, `checkpoints/`,
`plots/*.png` and `summary.json` under `runs/<name>/<timestamp>/` (or
`--workdir DIR`), and ends with a verdict on stdout: the task's headline
number beside its baseline, the wall time, where the plots and summary are
(`--json` prints the summary instead). A run directory that already holds
checkpoints of the same experiment is resumed from the latest one (a
`train.steps` below the checkpoint's step is refused; one equal to it trains
nothing and evaluates).
`--resume RUN_DIR` calls the recorded config's `get_config` again with the
recorded overrides plus the new ones, so linked fields (a schedule's
`decay_steps`) follow a raised `train.steps`. Every
check on the config (file, `get_config`, keys, value types and values, the
task's own `validate_config`) runs before anything is written, and a resumed
run that fails before its next checkpoint puts back the `config.json` and
`source.json` it found, so the directory can be resumed again.
"""

from __future__ import annotations

import argparse
import datetime
import importlib.util
import json
import os
import shlex
import shutil
import sys
import time
import traceback
from pathlib import Path
from typing import Any, NoReturn

import ml_collections

from ._config import (
    ConfigSource,
    attach_source,
    config_json,
    load_config,
    load_source,
    source_of,
)
from ._errors import ConfigError, read_json
from ._overrides import apply_overrides, split_overrides
from ._processes import (
    FLAG,
    check_processes,
    child_arguments,
    quiet_stdout,
    run_processes,
    split_processes,
)
from ._task import resolve_task, task_name
from ._validate import check_shared_blocks, config_value
from ._verdict import Headline, verdict


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
CONFIG_FILE = "config.json"
SOURCE_FILE = "source.json"
SUMMARY_FILE = "summary.json"


def _task_directory(config: ml_collections.ConfigDict) -> Path | None:
    source = source_of(config)
    return None if source is None else source.directory


def task_module(config: ml_collections.ConfigDict):
    """The task module of `config` (relative file paths against the config's folder)."""
    return resolve_task(str(config.task), _task_directory(config))


def task_headline(config: ml_collections.ConfigDict) -> Headline | None:
    """The task module's `HEADLINE` (a [`Headline`][sciml.experiment.Headline]),
    or None when it declares none."""
    headline = getattr(task_module(config), "HEADLINE", None)
    if headline is not None and not isinstance(headline, Headline):
        raise ConfigError(
            f"task {config.task}: HEADLINE must be a sciml.experiment.Headline, "
            f"got {type(headline).__name__}."
        )
    return headline


def validate(config: ml_collections.ConfigDict) -> None:
    """Checks the whole config before anything is written.

    The keys every config has, the `train.*` values (as `sciml.training.fit`
    needs them) and the `optimizer.*` block (built once with
    `sciml.training.make_optimizer`), that the task module exists, and then the
    task's own `validate_config(config)` when it defines one (the sizes and
    choices of its data, model and solver; see
    [`check_config`][sciml.experiment.check_config]).

    **Raises:** [`ConfigError`][sciml.experiment.ConfigError] naming the key,
    the value and the accepted values.
    """
    for key in REQUIRED_KEYS:
        config_value(config, key)
    check_shared_blocks(config)
    module = task_module(config)
    task_headline(config)
    check = getattr(module, "validate_config", None)
    if callable(check):
        try:
            check(config)
        except ConfigError:
            raise
        except (ValueError, TypeError, KeyError) as error:
            raise ConfigError(f"task {config.task}: {error}") from None


def check_workdir(config: ml_collections.ConfigDict, workdir: Path) -> None:
    """Refuses a run directory that belongs to another experiment."""
    saved = workdir / CONFIG_FILE
    if saved.exists():
        other = read_json(saved, _UNREADABLE_CONFIG)
        theirs = (other.get("name"), task_name(str(other.get("task"))))
        if theirs != (config.name, task_name(str(config.task))):
            raise ConfigError(
                f"{workdir} holds a run of experiment {other.get('name')!r} "
                f"(task {other.get('task')!r}), not {config.name!r}; choose another --workdir."
            )
    elif workdir.exists() and any(workdir.iterdir()):
        raise ConfigError(f"{workdir} is not empty and holds no {CONFIG_FILE}; choose another.")


def default_workdir(config: ml_collections.ConfigDict, root: Path = Path("runs")) -> Path:
    """`root/<name>/<timestamp>`, with a suffix if that folder exists."""
    stamp = datetime.datetime.now().strftime("%Y%m%d-%H%M%S")
    workdir = root / str(config.name) / stamp
    suffix = 1
    while workdir.exists():
        workdir = root / str(config.name) / f"{stamp}-{suffix}"
        suffix += 1
    return workdir


def main_from_config(config: ml_collections.ConfigDict, workdir: str | Path) -> dict[str, Any]:
    """Runs `config`'s task in `workdir` and returns its summary (also `summary.json`).

    Writes `config.json` (and `source.json` when the config was loaded from a
    file or module) before the task starts. On several processes (see
    [`ProcessGroup`][sciml.training.ProcessGroup]) every one runs the task and
    process 0 alone writes these files; a task that does not declare
    `DATA_PARALLEL = True` is refused there.
    """
    from sciml.training import ProcessGroup, ResumePastEndError
    from sciml.training._metrics import to_python

    validate(config)
    workdir = Path(workdir)
    module = task_module(config)
    group = ProcessGroup.current()
    check_processes(config, module, group.count)
    if not group.main:  # process 0 checks the directory and writes the run's files
        try:
            return to_python(module.train_and_evaluate(config, workdir))
        except ResumePastEndError as error:
            raise ConfigError(_past_end(config, workdir, error)) from error
    check_workdir(config, workdir)
    before = _RunFiles(workdir)
    (workdir / "plots").mkdir(parents=True, exist_ok=True)
    (workdir / CONFIG_FILE).write_text(json.dumps(config_json(config), indent=2, sort_keys=True))
    source = source_of(config)
    if source is not None:
        (workdir / SOURCE_FILE).write_text(json.dumps(source.to_json(), indent=2) + "\n")
    try:
        summary = to_python(module.train_and_evaluate(config, workdir))
    except ResumePastEndError as error:
        before.put_back_if_no_new_checkpoint()
        raise ConfigError(_past_end(config, workdir, error)) from error
    except Exception as error:
        if before.resumed and before.put_back_if_no_new_checkpoint():
            raise ConfigError(
                f"--resume: the run could not continue with this config "
                f"({type(error).__name__}: {_one_line(error)}); {workdir} is left as it was "
                "(config.json and source.json put back), so it can still be resumed."
            ) from error
        raise
    (workdir / SUMMARY_FILE).write_text(json.dumps(summary, indent=2, sort_keys=True) + "\n")
    return summary


def _past_end(config: ml_collections.ConfigDict, workdir: Path, error: Exception) -> str:
    """What to do about a run resumed with fewer steps than its checkpoint holds."""
    if config.train.steps != error.steps:  # a task's own step count: fit's message names it
        return f"{workdir}: {error}"
    return (
        f"{workdir} holds a checkpoint at step {error.checkpoint_step}, past train.steps = "
        f"{error.steps}: a run cannot train back to fewer steps. To train on, resume with a "
        f"larger train.steps: --resume {workdir} --config.train.steps=<more than "
        f"{error.checkpoint_step}>; the trained model is read as it is with "
        "sciml.experiment.load_run. The directory is left as it was."
    )


def _one_line(error: BaseException, n: int = 300) -> str:
    text = " ".join(str(error).split())
    return text if len(text) <= n else text[: n - 3] + "..."


class _RunFiles:
    """What a run directory held before a (resumed) run started.

    When the run then fails before it writes a checkpoint, the run's saved
    state is still the one it started from, and so should be its config:
    `put_back_if_no_new_checkpoint` restores the `config.json` and
    `source.json` it found and removes the `plots/` folder when it created it.
    """

    def __init__(self, workdir: Path):
        self.workdir = workdir
        self.resumed = (workdir / CONFIG_FILE).is_file()
        self.saved = {
            name: (workdir / name).read_bytes()
            for name in (CONFIG_FILE, SOURCE_FILE)
            if (workdir / name).is_file()
        }
        self.had_plots = (workdir / "plots").exists()
        self.checkpoints = self._checkpoints()

    def _checkpoints(self) -> set[tuple[str, int]]:
        """Every file under a `checkpoints/` folder, with its size."""
        found = set()
        for folder in self.workdir.rglob("checkpoints"):
            for path in folder.rglob("*"):
                if path.is_file():
                    found.add((str(path.relative_to(self.workdir)), path.stat().st_size))
        return found

    def put_back_if_no_new_checkpoint(self) -> bool:
        if self._checkpoints() != self.checkpoints:
            return False
        for name in (CONFIG_FILE, SOURCE_FILE):
            if name in self.saved:
                (self.workdir / name).write_bytes(self.saved[name])
            else:
                (self.workdir / name).unlink(missing_ok=True)
        plots = self.workdir / "plots"
        if not self.had_plots and plots.is_dir() and not any(plots.iterdir()):
            plots.rmdir()
        return True


def _flat(tree: Any, prefix: str = "") -> dict[str, Any]:
    if not isinstance(tree, dict):
        return {prefix: tree}
    out = {}
    for key, value in tree.items():
        out.update(_flat(value, f"{prefix}.{key}" if prefix else str(key)))
    return out


_UNREADABLE_CONFIG = (
    "restore it (the checkpoints' metadata holds the run's config: "
    "sciml.experiment.load_run_config(RUN_DIR)), or choose another directory."
)


def _resume_config(run_dir: Path, overrides: list[tuple[str, str]]) -> ml_collections.ConfigDict:
    saved = run_dir / CONFIG_FILE
    if not saved.is_file():
        raise ConfigError(f"--resume: {run_dir} holds no {CONFIG_FILE}.")
    saved_config = read_json(saved, _UNREADABLE_CONFIG)
    recorded = run_dir / SOURCE_FILE
    if not recorded.is_file():  # a run written before sources were recorded
        config = ml_collections.ConfigDict(saved_config)
        config.lock()
        apply_overrides(config, overrides)
        attach_source(config, None)
        return config
    fix = (
        "it records the config file, variant and overrides of the run: restore it, or "
        "delete it to resume from config.json as saved."
    )
    data = read_json(recorded, fix)
    try:
        source = ConfigSource.from_json(data)
    except (KeyError, TypeError, ValueError) as error:
        raise ConfigError(f"{recorded} is not a config source ({error!r}); {fix}") from None
    try:
        config = load_source(source)
    except ConfigError as error:
        raise ConfigError(
            f"--resume: the run's config {source.spec!r} cannot be loaded again ({error})"
        ) from None
    rebuilt, old = _flat(config_json(config)), _flat(saved_config)
    changed = sorted(k for k in set(rebuilt) | set(old) if rebuilt.get(k) != old.get(k))
    if changed:
        raise ConfigError(
            f"--resume: {source.spec} with the recorded overrides no longer gives the config "
            f"saved in {saved} (keys {changed[:5]} differ); restore the config or start a new run."
        )
    apply_overrides(config, overrides)
    attach_source(config, source.with_overrides(overrides))
    return config


_DESCRIPTION = """\
Runs an experiment config: trains, evaluates and writes config.json,
metrics.jsonl, checkpoints/, plots/ and summary.json into a run directory
(runs/<name>/<timestamp>/ unless --workdir is given). The whole config is
checked before anything is written. Ctrl-C checkpoints the finished steps;
--resume RUN_DIR continues from the latest checkpoint. --processes N trains
on N processes of this machine (JAX's multi-process runtime), each on its
share of every batch."""


def checkout_configs(root: Path | None = None) -> list[Path]:
    """The config files of a checkout: `experiments/configs/*.py` under `root`
    (default: the current directory, else where the `experiments` package is)."""
    folder = Path(root or Path.cwd()) / "experiments" / "configs"
    if not folder.is_dir() and root is None:
        spec = importlib.util.find_spec("experiments.configs") if _importable() else None
        if spec is not None and spec.submodule_search_locations:
            folder = Path(next(iter(spec.submodule_search_locations)))
    if not folder.is_dir():
        return []
    return sorted(p for p in folder.glob("*.py") if not p.name.startswith("_"))


def _importable() -> bool:
    try:
        return importlib.util.find_spec("experiments") is not None
    except (ImportError, ValueError):
        return False


def _epilog(prog: str) -> str:
    configs = checkout_configs()
    lines = [
        "overrides:",
        "  --config.KEY=VALUE    set any config key, e.g. --config.train.steps=200",
        "                        or --config.optimizer.learning_rate=1e-3 (dotted keys;",
        "                        the value is parsed as the key's type)",
        "",
        "variants:",
        "  FILE:tiny             every config has a seconds-long smoke-test variant",
        "",
        "processes:",
        f"  {FLAG} N         train on N processes of this machine (default 1)",
        "",
    ]
    if configs:
        try:
            shown = [p.relative_to(Path.cwd()) for p in configs]
        except ValueError:
            shown = configs
        lines.append("configs in this checkout:")
        lines += [f"  {path}" for path in shown]
        lines.append("")
    if configs:
        lines += [
            "examples:",
            f"  {prog} --config experiments/configs/quickstart.py",
            f"  {prog} --config experiments/configs/quickstart.py:tiny --config.train.steps=50",
        ]
    else:
        lines += [
            "examples (from the root of a source checkout, which holds experiments/configs/):",
            f"  {prog} --config path/to/config.py",
            f"  {prog} --config path/to/config.py:tiny --config.train.steps=50",
        ]
    lines += [
        f"  {prog} --resume runs/quickstart/<timestamp> --config.train.steps=6000",
        "",
        "Configs, tasks and the guide (docs/experiments.md) are in the source checkout.",
    ]
    return "\n".join(lines)


def parse(argv: list[str], *, prog: str = "sciml-run") -> tuple[ml_collections.ConfigDict, Path]:
    """Turns command-line arguments into a checked config and a run directory.

    **Raises:** [`ConfigError`][sciml.experiment.ConfigError] for any bad
    argument, before anything is written.
    """
    parser = argparse.ArgumentParser(
        prog=prog,
        description=_DESCRIPTION,
        epilog=_epilog(prog),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--config", metavar="FILE[:variant]", help="config file or module, optionally with :variant"
    )
    parser.add_argument("--workdir", type=Path, help="run directory (default runs/<name>/<time>)")
    parser.add_argument(
        "--resume", type=Path, metavar="RUN_DIR", help="continue the run in this directory"
    )
    parser.add_argument(
        "--json", action="store_true", help="print the summary as JSON on stdout at the end"
    )
    args, extra = parser.parse_known_args(argv)
    overrides = split_overrides(extra)
    if args.resume is not None:
        if args.config is not None or args.workdir is not None:
            raise ConfigError("--resume takes the config and directory of the run; drop --config.")
        config = _resume_config(args.resume, overrides)
        workdir = args.resume
    elif args.config is None:
        raise ConfigError("give --config FILE[:variant] (or --resume RUN_DIR).")
    else:
        config = load_config(args.config)
        apply_overrides(config, overrides)
        attach_source(config, source_of(config).with_overrides(overrides))
        workdir = None
    validate(config)
    workdir = workdir or args.workdir or default_workdir(config)
    check_workdir(config, workdir)
    return config, workdir


def resume_command(prog: str, workdir: str | Path) -> str:
    """The command that resumes `workdir`, ready to paste into the shell the run
    was started from.

    A `python -m ...` program names the interpreter that is running unless it
    is the `python` on `PATH`: `make run` runs the checkout's virtual
    environment without activating it, so a bare `python` would be another one
    (one without the package's dependencies). Inside the working directory the
    interpreter is given relative to it (`.venv/bin/python`).
    """
    if prog.startswith("python "):
        prog = _interpreter() + prog[len("python") :]
    return f"{prog} --resume {shlex.quote(str(workdir))}"


def _interpreter() -> str:
    executable = sys.executable
    on_path = shutil.which("python")
    if on_path is not None and os.path.abspath(on_path) == os.path.abspath(executable):
        return "python"
    path = Path(executable)
    if path.is_relative_to(Path.cwd()):
        path = path.relative_to(Path.cwd())
    return shlex.quote(str(path))


def main(argv: list[str] | None = None, *, prog: str = "sciml-run") -> int:
    """The command line: runs a config and ends with its verdict on stdout (the
    headline beside its baseline, the wall time, where the plots and
    `summary.json` are); with `--json`, the summary as JSON instead.

    With `--processes N` (N > 1) it starts N processes that train together
    and waits for them. In a process of several (started so, or by `srun`; see
    `sciml.training.initialize_processes`), process 0 writes the files and
    prints; the others train silently.

    **Returns:** the exit status: 0 when done, 2 for a bad command line (one
    line `error: ...` on stderr), 1 for a non-finite loss, 130 when interrupted
    (Ctrl-C or SIGTERM; finished steps are checkpointed).
    """
    os.environ.setdefault("MPLBACKEND", "Agg")
    argv = list(sys.argv[1:] if argv is None else argv)
    as_json = "--json" in argv
    try:
        processes, argv = split_processes(argv)
        if processes > 1:
            config, workdir = parse(argv, prog=prog)
            check_processes(config, task_module(config), processes)
    except ConfigError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    if processes > 1:
        return run_processes(child_arguments(argv, workdir), processes, workdir)
    from sciml.training import NonFiniteLossError, ProcessGroup, initialize_processes
    from sciml.training._processes import ENV_PROCESSES

    initialize_processes()
    group = ProcessGroup.current()
    try:
        config, workdir = parse(argv, prog=prog)
        failure = None
    except ConfigError as error:
        print(f"error: {error}", file=sys.stderr)
        failure = error
    if not group.single:  # every process parsed: the run directory is process 0's
        with quiet_stdout():  # the first collective
            workdirs = group.gather(None if failure else str(workdir))
        if None in workdirs:
            return 2
        workdir = Path(workdirs[0])
    elif failure is not None:
        return 2
    hint = resume_command(prog, workdir)
    if os.environ.get(ENV_PROCESSES):
        hint += f" {FLAG} {group.count}"
    if group.main:
        print(f"run directory: {workdir}", file=sys.stderr)
    source = source_of(config)
    if group.main and source is not None and source.variant == "tiny":
        print(
            "note: ':tiny' is a smoke test (seconds of training on tiny data): it checks that "
            "the pipeline runs; its losses, errors and solver statuses (failed or unconverged "
            "steps included) are not results.",
            file=sys.stderr,
        )
    started = time.perf_counter()
    try:
        summary = main_from_config(config, workdir)
    except KeyboardInterrupt:
        if group.main:
            print(
                f"interrupted; finished steps are checkpointed. Resume with:\n  {hint}",
                file=sys.stderr,
            )
        return 130
    except NonFiniteLossError as error:
        if group.main:
            print(f"error: {error}", file=sys.stderr)
        return 1
    except ConfigError as error:  # a resumed run that could not continue, left as it was
        if group.main:
            print(f"error: {error}", file=sys.stderr)
        return 2
    if not group.main:
        return 0
    if as_json:
        print(json.dumps(summary, indent=2, sort_keys=True))
    else:
        seconds = time.perf_counter() - started
        print(verdict(summary, task_headline(config), seconds, workdir), flush=True)
    return 0


def cli(argv: list[str] | None = None, *, prog: str = "sciml-run") -> NoReturn:
    """`main` as a program: exits the process with its status.

    An interrupted run exits at once (after flushing its output): a chunk given
    up on a second Ctrl-C or SIGTERM is still running on XLA's threads, and a
    normal interpreter exit would wait for it to finish. Every finished step
    is checkpointed, and every file closed, before `main` returns. A process of
    several that fails with an error exits at once too (status 1, after its
    traceback): a normal exit would wait for the other processes, of which
    one may be dead.
    """
    if "" not in sys.path and os.getcwd() not in sys.path:
        # as `python -m` does: a checkout's `experiments` package (the tasks
        # its configs name) imports from its root under the installed command too
        sys.path.insert(0, os.getcwd())
    failed = False
    try:
        status = main(argv, prog=prog)
    except Exception:
        if not _several_processes():
            raise
        traceback.print_exc()
        status, failed = 1, True
    if status == 130 or failed:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(status)
    sys.exit(status)


def _several_processes() -> bool:
    jax = sys.modules.get("jax")
    return jax is not None and jax.distributed.is_initialized()
