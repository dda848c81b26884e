"""The command line: a config and its task -> a run directory with a summary.

    sciml-run --config FILE[:variant] | MODULE[:variant] \\
        [--config.KEY=VALUE ...] [--workdir DIR] [--resume RUN_DIR] [--processes N]

(`python -m sciml.experiment` and `python -m experiments.run` are the same
command.) Writes `config.json`, `source.json`, `metrics.jsonl`, `checkpoints/`,
`plots/*.png` and `summary.json` under `runs/<name>/<timestamp>/` (or
`--workdir DIR`), and ends with a verdict on stdout: the task's headline
number beside its baseline, the wall time, where the plots and summary are
(`--json` prints the summary instead). A run directory that already holds
checkpoints of the same experiment is resumed from the latest one (a
`train.steps` below the checkpoint's step is refused; one equal to it trains
nothing and evaluates). `--resume RUN_DIR` rebuilds the run's config (see
`_resume.py`). Every check on the config (file, `get_config`, keys, value
types and values, the task's own checks) runs once, before anything is
written. `--processes N` runs the same command as N processes of this machine
under the supervisor of `sciml.distributed`. `--list` prints the checkout's
configs (see `_catalogue.py`).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import sys
import time
import traceback
from pathlib import Path
from typing import NoReturn

import jax
import ml_collections

from ..distributed import (
    ENV_PROCESSES,
    ProcessGroup,
    initialize_processes,
    quiet_stdout,
    run_processes,
)
from ..training import NonFiniteLossError
from ._catalogue import catalogue, installed_from
from ._config import attach_source, load_config, source_of
from ._errors import ConfigError
from ._overrides import split_overrides
from ._resume import resume_command, resume_config
from ._run import apply_task_overrides, check_workdir, default_workdir, run_task, validate
from ._task import Task
from ._verdict import verdict


FLAG = "--processes"
#: The command the user typed (`sciml-run`, `python -m experiments.run`),
#: given to the processes `--processes N` starts, which repeat it in the
#: resume line.
ENV_PROG = "SCIML_RUN_PROG"


def split_processes(argv: list[str]) -> tuple[int, list[str]]:
    """Takes `--processes N` (or `--processes=N`) out of `argv`.

    **Returns:** the number of processes (1 when not given) and the other
    arguments, in their order.

    **Raises:** [`ConfigError`][sciml.experiment.ConfigError] for a value that
    is not a whole number of at least 1.
    """
    count, rest, i = None, [], 0
    while i < len(argv):
        arg = argv[i]
        if arg == FLAG:
            if i + 1 >= len(argv):
                raise ConfigError(f"{FLAG}: missing value (a number of processes, at least 1).")
            count, i = argv[i + 1], i + 2
        elif arg.startswith(FLAG + "="):
            count, i = arg[len(FLAG) + 1 :], i + 1
        else:
            rest.append(arg)
            i += 1
    if count is None:
        return 1, rest
    try:
        number = int(count)
    except ValueError:
        number = 0
    if number < 1:
        raise ConfigError(f"{FLAG} takes a whole number of processes, at least 1; got {count!r}.")
    return number, rest


def child_arguments(argv: list[str], workdir: Path) -> list[str]:
    """The children's arguments: `argv` (without `--processes`) with the run
    directory fixed to `workdir`, unless `--resume` already names it (a
    `--workdir` in `argv` is overridden by the last one, its resolved value)."""
    for arg in argv:  # `--resume` as argparse reads it: any prefix from `--r`
        name = arg.split("=", 1)[0]
        if len(name) >= 3 and "--resume".startswith(name):
            return list(argv)
    return [*argv, "--workdir", str(workdir)]


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


def _shown(configs: list[Path]) -> list[str]:
    """The config files as a user types them: relative to the working directory when inside it."""
    try:
        return [str(p.relative_to(Path.cwd())) for p in configs]
    except ValueError:
        return [str(p) for p in configs]


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
        lines.append(f"configs in this checkout ({prog} --list prints this list alone):")
        lines += catalogue(configs, _shown(configs))
        lines.append("")
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
        "  tensorboard --logdir runs/     (every run's curves, config and figures)",
        "",
        "docs: docs/experiments.md in the source checkout (the runner's guide); `make docs`",
        "  there builds the whole site into site/index.html (opens from disk).",
    ]
    source = installed_from()
    if source is not None:
        lines.append(f"source: {source} (where this copy was installed from)")
    return "\n".join(lines)


class _Help(argparse.Action):
    """`--help`, its epilogue (the catalogue) built only when asked for."""

    def __init__(self, option_strings, dest, **kwargs):
        super().__init__(option_strings, dest, nargs=0, default=argparse.SUPPRESS, **kwargs)

    def __call__(self, parser, namespace, values, option_string=None):
        parser.epilog = _epilog(parser.prog)
        parser.print_help()
        parser.exit()


class _List(_Help):
    """`--list`: the catalogue of the checkout's configs alone."""

    def __call__(self, parser, namespace, values, option_string=None):
        configs = checkout_configs()
        if not configs:
            parser.exit(2, "error: no experiments/configs/ here (run from a source checkout).\n")
        print("\n".join(catalogue(configs, _shown(configs))))
        parser.exit()


def parse(argv: list[str], *, prog: str = "sciml-run") -> tuple[ml_collections.ConfigDict, Path]:
    """Turns command-line arguments into a checked config and a run directory.

    **Raises:** [`ConfigError`][sciml.experiment.ConfigError] for any bad
    argument, before anything is written.
    """
    config, _, workdir = _parse(argv, prog)
    return config, workdir


def _parse(argv: list[str], prog: str) -> tuple[ml_collections.ConfigDict, Task, Path]:
    """`parse`, with the config's task (resolved once)."""
    parser = argparse.ArgumentParser(
        prog=prog,
        description=_DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        add_help=False,
    )
    parser.add_argument("-h", "--help", action=_Help, help="show this message and exit")
    parser.add_argument(
        "--list",
        action=_List,
        help="list the checkout's configs: what each runs, its minutes, whether it needs a GPU",
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
        config, task = resume_config(args.resume, overrides)
        workdir = args.resume
    elif args.config is None:
        raise ConfigError("give --config FILE[:variant] (or --resume RUN_DIR).")
    else:
        config = load_config(args.config)
        task = apply_task_overrides(config, overrides)
        attach_source(config, source_of(config).with_overrides(overrides))
        workdir = None
    validate(config, task)
    workdir = workdir or args.workdir or default_workdir(config)
    check_workdir(config, workdir)
    return config, task, workdir


def main(argv: list[str] | None = None, *, prog: str = "sciml-run") -> int:
    """The command line: runs a config and ends with its verdict on stdout (the
    headline beside its baseline, the wall time, where the plots and
    `summary.json` are); with `--json`, the summary as JSON instead.

    With `--processes N` (N > 1) it starts N processes that train together
    and waits for them. In a process of several (started so, or by `srun`; see
    `sciml.distributed.initialize_processes`), process 0 writes the files and
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
            config, task, workdir = _parse(argv, prog)
            task.check_processes(config, processes)
    except ConfigError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    if processes > 1:  # each process repeats the command typed in its resume line
        command = [sys.executable, "-m", "sciml._launch", *child_arguments(argv, workdir)]
        return run_processes(command, processes, workdir, env={ENV_PROG: prog})
    initialize_processes()
    group = ProcessGroup.current()
    try:
        config, task, workdir = _parse(argv, prog)
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
    tell = _teller(group.main)
    tell(f"run directory: {workdir}" + ("" if group.single else f" ({group.count} processes)"))
    source = source_of(config)
    if source is not None and source.variant == "tiny":
        tell(
            "note: ':tiny' is a smoke test (seconds of training on tiny data): it checks that "
            "the pipeline runs; its losses, errors and solver statuses (failed or unconverged "
            "steps included) are not results."
        )
    started = time.perf_counter()
    try:
        summary = run_task(config, task, workdir)
    except KeyboardInterrupt:
        if has_checkpoint(workdir):
            tell(f"interrupted; finished steps are checkpointed. Resume with:\n  {hint}")
        else:
            tell(
                "interrupted before the first checkpoint: nothing was trained yet; "
                "run the same command again."
            )
        return 130
    except NonFiniteLossError as error:
        tell(f"error: {error}")
        return 1
    except ConfigError as error:  # a resumed run that could not continue, left as it was
        tell(f"error: {error}")
        return 2
    if not group.main:
        return 0
    if as_json:
        print(json.dumps(summary, indent=2, sort_keys=True))
    else:
        seconds = time.perf_counter() - started
        print(verdict(summary, task.headline, seconds, workdir), flush=True)
    return 0


def has_checkpoint(workdir: Path) -> bool:
    """Whether the run directory holds a finished checkpoint (in a
    `checkpoints/` folder of its own or of a model's folder)."""
    return any(step.is_dir() and step.name.isdigit() for step in workdir.rglob("checkpoints/*"))


def _teller(main: bool):
    """Prints a line on stderr from the main process; the others stay silent."""

    def tell(line: str) -> None:
        if main:
            print(line, file=sys.stderr)

    return tell


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
        if not jax.distributed.is_initialized():
            raise
        traceback.print_exc()
        status, failed = 1, True
    if status == 130 or failed:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(status)
    sys.exit(status)
