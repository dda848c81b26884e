"""Writes a data set of one problem to HDF5: `python -m solvers.generate`.

```
python -m solvers.generate <problem> --n 1000 --resolution 64 --out data/ns.h5 \\
    [--seed 0] [--chunk 16] [--precision float32|float64] [--set viscosity=1e-4 ...]
```

`<problem>` is one of `navier_stokes`, `darcy`, `heat`, `burgers`, `poisson`;
`--set key=value` passes a keyword argument of that module's `make_dataset`.

File layout: one dataset per per-sample array of `make_dataset` (`inputs`,
`outputs`, and e.g. `labels`), sample axis first; shared arrays such as `times`;
a boolean `done` (n,) marking finished samples; attributes `problem`, `n`,
`resolution`, `seed`, `precision`, `params` (JSON of every `make_dataset`
keyword, defaults included) and `format_version`.

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
import importlib
import inspect
import json
import sys
from pathlib import Path
from typing import Any

import numpy as np


PROBLEMS = ("navier_stokes", "darcy", "heat", "burgers", "poisson")
FORMAT_VERSION = 1
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
    accepted.update(params)
    return accepted


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
    if not isinstance(n, int) or n < 1:
        raise ValueError(f"--n must be a positive integer, got {n!r}.")
    if not isinstance(chunk, int) or chunk < 1:
        raise ValueError(f"--chunk must be a positive integer, got {chunk!r}.")
    if precision not in ("float32", "float64"):
        raise ValueError(f"--precision must be 'float32' or 'float64', got {precision!r}.")
    params = resolve_params(problem, params)
    out = Path(out)
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
                f.create_dataset("done", data=np.zeros(n, bool))
        with h5py.File(out, "r+") as f:
            done = np.asarray(f["done"][...], bool)
            bar = tqdm(total=n, initial=int(done.sum()), disable=not progress, desc=problem)
            for lo in range(0, n, chunk):
                hi = min(n, lo + chunk)
                missing = np.flatnonzero(~done[lo:hi]) + lo
                for run in np.split(missing, np.flatnonzero(np.diff(missing) > 1) + 1):
                    if run.size == 0:
                        continue
                    start, count = int(run[0]), int(run.size)
                    data = module.make_dataset(count, resolution, seed=seed, start=start, **params)
                    _write(f, data, start, count, n, shared_keys, dtype)
                    f.flush()
                    f["done"][start : start + count] = True
                    f.flush()
                    done[start : start + count] = True
                    bar.update(count)
            bar.close()
    finally:
        jax.config.update("jax_enable_x64", previous_x64)
    return out


def _cast(array: np.ndarray, dtype: np.dtype) -> np.ndarray:
    array = np.asarray(array)
    return array.astype(dtype) if np.issubdtype(array.dtype, np.floating) else array


def _write(f, data, start, count, n, shared_keys, dtype) -> None:
    for key, value in data.items():
        value = _cast(value, dtype)
        if key in shared_keys:
            if key in f:
                if not np.array_equal(f[key][...], value):
                    raise RuntimeError(f"shared array {key!r} differs between chunks.")
            else:
                f.create_dataset(key, data=value)
            continue
        if value.shape[0] != count:
            raise RuntimeError(
                f"make_dataset returned {key!r} with {value.shape[0]} != {count} samples."
            )
        if key not in f:
            f.create_dataset(
                key,
                shape=(n, *value.shape[1:]),
                dtype=value.dtype,
                chunks=(1, *value.shape[1:]),
            )
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


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m solvers.generate", description="Write a PDE data set to HDF5."
    )
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
    except ValueError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
