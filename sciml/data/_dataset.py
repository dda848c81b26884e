r"""Reading the HDF5 files that `python -m solvers.generate` writes (format 2).

**The file format** (the contract between the generator and this reader; the
reader depends on nothing else):

- Per-sample datasets (`inputs`, `outputs`, and e.g. `labels`), sample axis
  first. Fields carry a channel axis: `(sample, channel, x, y)` for a field,
  `(sample, time, channel, x, y)` for a trajectory, `(sample, parameter)` for a
  parameter vector. Each dataset has the attributes `axes` (the axis names,
  comma separated), `fields` (the names of the channels or parameters) and
  `units`.
- Shared datasets without a sample axis, such as `times` (axes `"time"`).
- `done`, `(n,)` bool: `True` where the sample is finished. The generator is
  resumable, so a file may be read while it is incomplete; unfinished samples
  hold zeros and are masked out here.
- File attributes: `problem`, `n`, `resolution`, `seed`, `precision`,
  `format_version` (2), `params` (JSON of every generator keyword), each of
  those keywords as its own attribute (`viscosity`, `dt`, …), `grid` (the grid
  convention: `periodic, x_i = i/s …` with the endpoint excluded, `nodes x_i =
  i/(s-1) …` with the boundary included, or `cell-centred`), `domain`,
  `scheme`, `package`, `package_version`, `source_revision` (when written from
  a git checkout) and `created` (ISO 8601, UTC).

Reading loads the finished samples into memory as numpy arrays (the data sets
of this package are at most a few GB; slice with `samples=` otherwise).
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np


FORMAT_VERSION = 2
# Generator keywords that set how a problem is discretised or batched, not which
# problem it is: `read_resolutions` lets them differ between resolutions.
NUMERICAL_PARAMS = ("dt", "batch_size")


def _plain(value: Any) -> Any:
    if isinstance(value, bytes):
        return value.decode()
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, np.ndarray) and value.dtype == object:
        return tuple(_plain(v) for v in value)
    return value


def _names(value: Any) -> tuple[str, ...]:
    if value is None:
        return ()
    if isinstance(value, str):
        return tuple(v.strip() for v in value.split(","))
    return tuple(str(_plain(v)) for v in np.atleast_1d(value))


@dataclasses.dataclass(frozen=True)
class Dataset:
    """The finished samples of one generated file (or a selection of them).

    **Fields:**

    - `arrays`: per-sample arrays by name, sample axis first (numpy).
    - `shared`: arrays without a sample axis (e.g. `times`).
    - `indices`: `(n_samples,)` the index in the file of each sample held; they
      are what [`train_test_split`][sciml.data.train_test_split] splits on.
    - `axes`: the axis names of each array (`("sample", "channel", "x", "y")`).
    - `fields`, `units`: the names and units of each array's channels.
    - `attrs`: the file attributes (plain Python values; `params` parsed from
      JSON into a dict).
    - `path`: the file read (or `None`).
    """

    arrays: Mapping[str, np.ndarray]
    shared: Mapping[str, np.ndarray]
    indices: np.ndarray
    axes: Mapping[str, tuple[str, ...]]
    fields: Mapping[str, tuple[str, ...]]
    units: Mapping[str, tuple[str, ...]]
    attrs: Mapping[str, Any]
    path: Path | None = None

    def __post_init__(self):
        n = len(self.indices)
        for key, value in self.arrays.items():
            if value.shape[:1] != (n,):
                raise ValueError(
                    f"`arrays[{key!r}]` must have {n} samples (one per index), got shape "
                    f"{value.shape}."
                )

    def __len__(self) -> int:
        return len(self.indices)

    def __getitem__(self, key: str) -> np.ndarray:
        if key in self.arrays:
            return self.arrays[key]
        if key in self.shared:
            return self.shared[key]
        raise KeyError(
            f"{key!r}: this data set holds {sorted(self.arrays)} per sample and "
            f"{sorted(self.shared)} shared."
        )

    @property
    def resolution(self) -> int | None:
        """The `resolution` attribute of the file (grid points per side)."""
        return self.attrs.get("resolution")

    @property
    def params(self) -> dict[str, Any]:
        """The generator's keyword arguments (parsed `params` attribute)."""
        return dict(self.attrs.get("params", {}))

    def channel_axis(self, key: str) -> int:
        """The position of the `channel` (or `parameter`) axis of `key`."""
        axes = self.axes.get(key, ())
        for name in ("channel", "parameter"):
            if name in axes:
                return axes.index(name)
        raise ValueError(f"`{key}` has no channel axis; its axes are {axes}.")

    def select(self, indices: Iterable[int | np.integer] | np.ndarray) -> Dataset:
        """The samples whose index in the file is in `indices` (in the order of
        `indices`); each must be held by this data set."""
        wanted = np.asarray(list(indices), dtype=np.int64).reshape(-1)
        position = {int(i): p for p, i in enumerate(self.indices)}
        missing = [int(i) for i in wanted if int(i) not in position]
        if missing:
            shown = missing[:10]
            raise ValueError(
                f"`indices`: samples {shown}{' ...' if len(missing) > 10 else ''} are not "
                f"in this data set (unfinished in the file, or outside it)."
            )
        take = np.array([position[int(i)] for i in wanted], dtype=np.int64)
        return dataclasses.replace(
            self,
            arrays={k: v[take] for k, v in self.arrays.items()},
            indices=self.indices[take],
        )


def read_dataset(
    path: str | Path,
    keys: Sequence[str] | None = None,
    *,
    samples: Iterable[int | np.integer] | np.ndarray | None = None,
    allow_unfinished: bool = True,
) -> Dataset:
    """Reads the finished samples of a generated HDF5 file.

    **Arguments:**

    - `path`: the file.
    - `keys`: the per-sample arrays to read (default: all of them).
    - `samples`: indices in the file to read (default: every finished sample);
      unfinished ones among them are skipped.
    - `allow_unfinished`: if `False`, a file with any unfinished sample is refused.

    **Returns:** a [`Dataset`][sciml.data.Dataset] of the finished samples, in
    file order, with the file's description (axes, fields, units, attributes).

    Raises `ValueError` for a path that is not such a file, naming what is wrong.
    """
    import h5py

    path = Path(path)
    if not path.is_file():
        raise ValueError(f"`path`: {path} is not a file.")
    if not h5py.is_hdf5(path):
        raise ValueError(f"`path`: {path} is not an HDF5 file.")
    with h5py.File(path, "r") as f:
        attrs = {k: _plain(f.attrs[k]) for k in f.attrs}
        version = attrs.get("format_version")
        if "done" not in f or version is None:
            raise ValueError(
                f"`path`: {path} was not written by the data generator (no `done` "
                "dataset or `format_version` attribute)."
            )
        if version != FORMAT_VERSION:
            raise ValueError(
                f"`path`: {path} has file format {version}; this reader reads format "
                f"{FORMAT_VERSION} (fields with a channel axis). Write the file again with "
                "the current generator."
            )
        attrs["params"] = json.loads(attrs.get("params", "{}"))
        done = np.asarray(f["done"][...], bool)
        if not allow_unfinished and not done.all():
            raise ValueError(
                f"`path`: {path} has {int((~done).sum())} unfinished samples of {done.size}; "
                "finish it by running the same generator command again, or pass "
                "allow_unfinished=True."
            )
        per_sample = [k for k in f if k != "done" and f[k].shape[:1] == (done.size,)]
        per_sample = [k for k in per_sample if "sample" in _names(f[k].attrs.get("axes"))]
        shared_keys = [k for k in f if k != "done" and k not in per_sample]
        if keys is not None:
            unknown = sorted(set(keys) - set(per_sample))
            if unknown:
                raise ValueError(
                    f"`keys`: {unknown} are not per-sample arrays of {path}; it holds "
                    f"{sorted(per_sample)}."
                )
            per_sample = list(keys)
        index = np.flatnonzero(done)
        if samples is not None:
            wanted = np.unique(np.asarray(list(samples), dtype=np.int64))
            if wanted.size and (wanted.min() < 0 or wanted.max() >= done.size):
                raise ValueError(
                    f"`samples` must lie in [0, {done.size}), got {wanted.min()}..{wanted.max()}."
                )
            index = wanted[done[wanted]]
        arrays = {k: f[k][index] if index.size else f[k][:0] for k in per_sample}
        shared = {k: f[k][...] for k in shared_keys}
        described = per_sample + shared_keys
        axes = {k: _names(f[k].attrs.get("axes")) for k in described}
        fields = {k: _names(f[k].attrs.get("fields")) for k in described}
        units = {k: _names(f[k].attrs.get("units")) for k in described}
    return Dataset(arrays, shared, index, axes, fields, units, attrs, path)


def read_resolutions(
    sources: Iterable[str | Path | Dataset], keys: Sequence[str] | None = None
) -> dict[int, Dataset]:
    """Several data sets of one problem at different resolutions, for testing a
    model on grids it was not trained on.

    **Arguments:**

    - `sources`: file paths or [`Dataset`][sciml.data.Dataset]s.
    - `keys`: the per-sample arrays to read from files.

    **Returns:** `{resolution: Dataset}`, sorted by resolution.

    Raises `ValueError` when the sources differ in anything but the resolution
    and the discretisation keywords `NUMERICAL_PARAMS` (problem, seed, the other
    generator parameters) or repeat a resolution. The time step may differ
    because an explicit scheme's stable step shrinks with the grid spacing: a
    2× finer test set often needs half the step.
    """
    out: dict[int, Dataset] = {}
    reference = None
    for source in sources:
        data = source if isinstance(source, Dataset) else read_dataset(source, keys)
        identity = {k: data.attrs.get(k) for k in ("problem", "seed")}
        identity["params"] = {k: v for k, v in data.params.items() if k not in NUMERICAL_PARAMS}
        if reference is None:
            reference = (identity, data.path)
        elif identity != reference[0]:
            differ = [k for k in identity if identity[k] != reference[0][k]]
            raise ValueError(
                f"`sources`: {data.path} differs from {reference[1]} in {differ}, not only in "
                "resolution."
            )
        resolution = data.resolution
        if resolution in out:
            raise ValueError(f"`sources`: resolution {resolution} is given twice.")
        out[resolution] = data
    if not out:
        raise ValueError("`sources` must name at least one data set.")
    return dict(sorted(out.items()))
