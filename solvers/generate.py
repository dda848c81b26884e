"""Writes a data set of one problem to HDF5: `python -m solvers.generate`.

```
python -m solvers.generate <problem> --n 1000 --resolution 64 --out data/ns.h5 \\
    [--seed 0] [--chunk 16] [--precision float32|float64] [--set viscosity=1e-4 ...]
```

`<problem>` is one of `navier_stokes`, `darcy`, `heat`, `burgers`, `poisson`;
`--set key=value` passes a keyword argument of that module's `make_dataset`.

File layout (format 2; `sciml.data` reads it and documents the same contract):

- One dataset per per-sample array of `make_dataset` (`inputs`, `outputs`, and
  e.g. `labels`), sample axis first. Fields carry a channel axis: `(sample,
  channel, x, y)` for a field, `(sample, time, channel, x, y)` for a trajectory
  (`x` along axis 0 of the solver's arrays). Each dataset has the attributes
  `axes` (the axis names, comma separated, e.g. `"sample, time, channel, x, y"`),
  `fields` (the channel names, or the entries of a parameter axis) and `units`.
- Shared arrays without a sample axis, such as `times` (axes `"time"`).
- `done` `(n,)` bool: `True` where the sample is finished; the others hold zeros
  and must be masked out (an interrupted run leaves them).
- File attributes: `problem`, `n`, `resolution`, `seed`, `precision`,
  `format_version`, `params` (JSON of every `make_dataset` keyword, defaults
  included; resuming compares it), then each of those keywords as its own
  attribute (`f.attrs["viscosity"]`; `None` is stored as the string `"None"`),
  `grid` (the grid convention: periodic with the endpoint excluded, nodes with
  the boundary included, or cell-centred), `domain`, `scheme` (the numerical
  method), `package` and `package_version` (of the code that wrote it,
  `source_revision` the git commit when run from a checkout), and `created`
  (ISO 8601, UTC, when the file was created).

Resumable and deterministic: samples are generated in chunks, each written and
flushed before it is marked done; re-running the same command after an
interrupt computes only the samples not marked done, and sample `i` depends only
on `(seed, i)`, so the result equals an uninterrupted run. An existing file
written for another problem or with other settings is refused with a message
naming what differs, and is left untouched.
"""

from __future__ import annotations

import argparse
import ast
import contextlib
import datetime
import importlib
import importlib.metadata
import inspect
import json
import shlex
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

from ._file_format import describe


PROBLEMS = ("navier_stokes", "darcy", "heat", "burgers", "poisson")
FORMAT_VERSION = 2
_RESERVED = ("n", "resolution", "seed", "start")


def _module(problem: str):
    if problem not in PROBLEMS:
        raise ValueError(f"problem must be one of {PROBLEMS}, got {problem!r}.")
    return importlib.import_module(f"solvers.{problem}")


def resolve_params(problem: str, params: dict[str, Any] | None) -> dict[str, Any]:
    """Every keyword of `make_dataset` (defaults filled in), checked by name."""
    signature = inspect.signature(_module(problem).make_dataset)
    accepted = {
        name: p.default
        for name, p in signature.parameters.items()
        if name not in _RESERVED and p.kind is inspect.Parameter.KEYWORD_ONLY
    }
    params = dict(params or {})
    unknown = sorted(set(params) - set(accepted))
    if unknown:
        raise ValueError(
            f"--set: unknown parameter(s) {unknown} for problem {problem!r}; accepted: "
            f"{sorted(accepted)}."
        )
    for key, value in params.items():
        _check_param_type(key, value, accepted[key])
    accepted.update(params)
    return accepted


def _check_param_type(key: str, value: Any, default: Any) -> None:
    """`value` must have the type of the keyword's default (an int passes for a
    float; a default of `None` accepts anything)."""
    if default is None:
        return
    if isinstance(default, bool):
        ok = isinstance(value, bool)
    elif isinstance(default, int):
        ok = isinstance(value, int) and not isinstance(value, bool)
    elif isinstance(default, float):
        ok = isinstance(value, (int, float)) and not isinstance(value, bool)
    else:
        ok = isinstance(value, type(default))
    if not ok:
        raise ValueError(
            f"--set {key}: expected {type(default).__name__} (default {default!r}), got "
            f"{value!r} ({type(value).__name__})."
        )


def _attr_value(value: Any) -> Any:
    if value is None:
        return "None"
    if isinstance(value, (list, tuple)):
        return np.asarray(value)
    return value


def _package_version() -> dict[str, str]:
    """The version of the distribution holding this package (or of the
    checkout's `pyproject.toml`) and, from a git checkout, its commit."""
    package = (__package__ or __name__).split(".")[0]
    root = Path(__file__).resolve().parent.parent
    version = "unknown"
    names = importlib.metadata.packages_distributions().get(package, [])
    if names:
        version = importlib.metadata.version(names[0])
    elif (root / "pyproject.toml").is_file():
        import tomllib

        with open(root / "pyproject.toml", "rb") as f:
            version = str(tomllib.load(f).get("project", {}).get("version", "unknown"))
    out = {"package": package, "package_version": version}
    if (root / ".git").exists():
        try:
            revision = subprocess.run(
                ["git", "-C", str(root), "rev-parse", "HEAD"],
                capture_output=True,
                text=True,
                timeout=10,
                check=True,
            ).stdout.strip()
            out["source_revision"] = revision
        except (OSError, subprocess.SubprocessError):
            pass
    return out


def _describing_attrs(problem: str, params: dict[str, Any]) -> dict[str, Any]:
    """The attributes written once, at creation, that make the file readable alone."""
    description = describe(problem, params)
    attrs = {key: _attr_value(value) for key, value in params.items()}
    attrs.update(grid=description["grid"], domain=description["domain"])
    attrs["scheme"] = description["scheme"]
    attrs.update(_package_version())
    attrs["created"] = datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")
    return attrs


def _expected_attrs(problem, n, resolution, seed, precision, params) -> dict[str, Any]:
    return {
        "problem": problem,
        "n": int(n),
        "resolution": int(resolution),
        "seed": int(seed),
        "precision": precision,
        "params": json.dumps(params, sort_keys=True),
        "format_version": FORMAT_VERSION,
    }


def _check_out(out: Path) -> None:
    """`out` must be a new path or an existing HDF5 file (not a directory)."""
    import h5py

    if out.is_dir():
        raise ValueError(
            f"--out: {out} is a directory; give a file name such as {out / 'data.h5'}."
        )
    if out.exists() and not h5py.is_hdf5(out):
        raise ValueError(f"--out: {out} exists and is not an HDF5 file; refusing to touch it.")


def _check_existing(f, out: Path, expected: dict[str, Any]) -> None:
    attrs = {k: f.attrs[k] for k in f.attrs}
    if "problem" not in attrs or "format_version" not in attrs:
        raise ValueError(
            f"--out: {out} exists and was not written by solvers.generate; refusing to touch it."
        )
    if str(attrs["problem"]) != expected["problem"]:
        raise ValueError(
            f"--out: {out} holds problem {str(attrs['problem'])!r}, not {expected['problem']!r}; "
            "refusing to touch it (choose another --out)."
        )
    differ = []
    for key, value in expected.items():
        stored = attrs.get(key)
        stored = stored.item() if isinstance(stored, np.generic) else stored
        if stored != value:
            differ.append(f"{key}: file has {stored!r}, asked for {value!r}")
    if differ:
        raise ValueError(
            f"--out: {out} was written with other settings, so it cannot be resumed; "
            + "; ".join(differ)
            + ". Nothing was changed."
        )


def generate(
    problem: str,
    n: int,
    resolution: int,
    out: str | Path,
    *,
    seed: int = 0,
    params: dict[str, Any] | None = None,
    chunk: int = 16,
    precision: str = "float32",
    progress: bool = True,
) -> Path:
    """Creates or completes the HDF5 data set `out` (see the module docstring).

    **Returns:** the path of the file. Raises `ValueError` before touching the
    disk for bad arguments or an incompatible existing file.
    """
    import h5py
    from tqdm import tqdm

    module = _module(problem)
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise ValueError(f"--n must be a positive integer, got {n!r}.")
    if isinstance(chunk, bool) or not isinstance(chunk, int) or chunk < 1:
        raise ValueError(f"--chunk must be a positive integer, got {chunk!r}.")
    if precision not in ("float32", "float64"):
        raise ValueError(f"--precision must be 'float32' or 'float64', got {precision!r}.")
    params = resolve_params(problem, params)
    out = Path(out)
    _check_out(out)
    layouts = describe(problem, params)["arrays"]
    expected = _expected_attrs(problem, n, resolution, seed, precision, params)

    import jax

    previous_x64 = jax.config.jax_enable_x64
    jax.config.update("jax_enable_x64", precision == "float64")
    dtype = np.dtype(precision)
    shared_keys = tuple(getattr(module, "SHARED_KEYS", ()))
    try:
        if out.exists():
            with h5py.File(out, "r") as f:
                _check_existing(f, out, expected)
        else:
            # Validates the parameters on a one-sample problem before creating the file.
            module.make_dataset(0, resolution, seed=seed, **params)
            out.parent.mkdir(parents=True, exist_ok=True)
            with h5py.File(out, "w-") as f:
                f.attrs.update(expected)
                f.attrs.update(_describing_attrs(problem, params))
                done = f.create_dataset("done", data=np.zeros(n, bool))
                done.attrs["axes"] = "sample"
                done.attrs["description"] = (
                    "True where the sample is finished; the others hold zeros (unfinished)."
                )
        with h5py.File(out, "r+") as f:
            done = np.asarray(f["done"][...], bool)
            bar = tqdm(total=n, initial=int(done.sum()), disable=not progress, desc=problem)
            with _interrupts() as critical:
                for lo in range(0, n, chunk):
                    hi = min(n, lo + chunk)
                    missing = np.flatnonzero(~done[lo:hi]) + lo
                    for run in np.split(missing, np.flatnonzero(np.diff(missing) > 1) + 1):
                        if run.size == 0:
                            continue
                        start, count = int(run[0]), int(run.size)
                        data = module.make_dataset(
                            count, resolution, seed=seed, start=start, **params
                        )
                        with critical():
                            _write(f, data, start, count, n, shared_keys, dtype, layouts)
                            f.flush()
                            f["done"][start : start + count] = True
                            f.flush()
                        done[start : start + count] = True
                        bar.update(count)
            bar.close()
    finally:
        jax.config.update("jax_enable_x64", previous_x64)
    return out


@contextlib.contextmanager
def _interrupts() -> Iterator[Any]:
    """SIGTERM becomes `KeyboardInterrupt` (as Ctrl-C) inside the block, and both
    wait while a chunk is written: `with critical(): ...` defers them to its end,
    so a chunk is either written and marked done or not marked at all. Only the
    main thread installs handlers; elsewhere the block runs unguarded."""
    state = {"critical": False, "pending": None}

    @contextlib.contextmanager
    def critical() -> Iterator[None]:
        state["critical"] = True
        try:
            yield
        finally:
            state["critical"] = False
        if state["pending"] is not None:
            raise KeyboardInterrupt(state["pending"])

    if threading.current_thread() is not threading.main_thread():
        yield critical
        return

    def handler(signum, frame):
        name = signal.Signals(signum).name
        if state["critical"]:
            state["pending"] = state["pending"] or name
            return
        raise KeyboardInterrupt(name)

    previous = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)}
    for sig in previous:
        signal.signal(sig, handler)
    try:
        yield critical
    finally:
        for sig, handler_before in previous.items():
            signal.signal(sig, signal.SIG_DFL if handler_before is None else handler_before)


def _cast(array: np.ndarray, dtype: np.dtype) -> np.ndarray:
    array = np.asarray(array)
    return array.astype(dtype) if np.issubdtype(array.dtype, np.floating) else array


def _layout_attrs(dataset, layout) -> None:
    if layout is not None:
        dataset.attrs["axes"] = layout.axes
        dataset.attrs["fields"] = np.asarray(layout.fields, dtype=object)
        dataset.attrs["units"] = np.asarray(layout.units, dtype=object)


def _write(f, data, start, count, n, shared_keys, dtype, layouts) -> None:
    for key, value in data.items():
        value = _cast(value, dtype)
        layout = layouts.get(key)
        if layout is not None and layout.channel_axis is not None:
            value = np.expand_dims(value, layout.channel_axis)
        if key in shared_keys:
            if key in f:
                if not np.array_equal(f[key][...], value):
                    raise RuntimeError(f"shared array {key!r} differs between chunks.")
            else:
                _layout_attrs(f.create_dataset(key, data=value), layout)
            continue
        if value.shape[0] != count:
            raise RuntimeError(
                f"make_dataset returned {key!r} with {value.shape[0]} != {count} samples."
            )
        if key not in f:
            dataset = f.create_dataset(
                key,
                shape=(n, *value.shape[1:]),
                dtype=value.dtype,
                chunks=(1, *value.shape[1:]),
            )
            _layout_attrs(dataset, layout)
        f[key][start : start + count] = value


def _parse_set(items: list[str]) -> dict[str, Any]:
    params = {}
    for item in items:
        key, sep, text = item.partition("=")
        if not sep or not key:
            raise ValueError(f"--set expects key=value, got {item!r}.")
        try:
            params[key] = ast.literal_eval(text)
        except (ValueError, SyntaxError):
            params[key] = text
    return params


class _Parser(argparse.ArgumentParser):
    """argparse with its errors on one line (`prog: error: ...`, exit status 2)."""

    def error(self, message: str):
        self.exit(2, f"{self.prog}: error: {message} (see --help)\n")


def main(argv: list[str] | None = None) -> int:
    """The command line.

    **Returns:** the exit status: 0 when done, 2 for a bad argument (one line
    `error: ...` on stderr, nothing written), 1 when the solution blew up, 130
    when interrupted by Ctrl-C or SIGTERM (finished samples are kept; the same
    command resumes).
    """
    argv = sys.argv[1:] if argv is None else list(argv)
    prog = "python -m solvers.generate"
    parser = _Parser(prog=prog, description="Write a PDE data set to HDF5.")
    parser.add_argument("problem", choices=PROBLEMS)
    parser.add_argument("--n", type=int, required=True, help="number of samples")
    parser.add_argument("--resolution", type=int, required=True, help="grid points per side")
    parser.add_argument("--out", required=True, help="output .h5 file (created or resumed)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--chunk", type=int, default=16, help="samples per write")
    parser.add_argument("--precision", choices=("float32", "float64"), default="float32")
    parser.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="keyword argument of the problem's make_dataset (repeatable)",
    )
    parser.add_argument("--no-progress", action="store_true")
    args = parser.parse_args(argv)
    try:
        generate(
            args.problem,
            args.n,
            args.resolution,
            args.out,
            seed=args.seed,
            params=_parse_set(args.set),
            chunk=args.chunk,
            precision=args.precision,
            progress=not args.no_progress,
        )
    except KeyboardInterrupt:
        print(
            f"interrupted; finished samples are kept. Resume with:\n  {prog} {shlex.join(argv)}",
            file=sys.stderr,
        )
        return 130
    except (ValueError, TypeError, OSError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    except FloatingPointError as error:
        print(f"error: {error}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
