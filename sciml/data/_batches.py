"""Seeded mini-batches over in-memory arrays, deterministic by step."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

import jax.numpy as jnp
import numpy as np

from .._checks import check_positive_int
from ._dataset import Dataset


class Batches:
    """Mini-batches of the samples of `data`, reshuffled each epoch.

    Epoch `e` visits the samples in the order
    `numpy.random.default_rng((seed, e)).permutation(n)` (or in order when
    `shuffle=False`), so the batch at any step is a pure function of
    `(seed, step)`: [`at`][sciml.data.Batches.at] gives it directly, which makes
    a resumed run see the same batches as an uninterrupted one.

    **Arguments:**

    - `data`: a [`Dataset`][sciml.data.Dataset] (its per-sample arrays) or a
      mapping of names to arrays with a common leading sample axis.
    - `batch_size`: samples per batch (a positive integer, at most the number
      of samples when `drop_last`).
    - `shuffle`: reshuffle each epoch (default `True`).
    - `seed`: the integer seed of the shuffling.
    - `drop_last`: drop the last, smaller batch of each epoch (default `False`).
    - `as_jax`: yield `jax.Array`s instead of numpy arrays.
    - `keys`: the arrays to batch (default: all).

    Each batch is a `dict` of arrays of the same names.
    """

    def __init__(
        self,
        data: Dataset | Mapping[str, Any],
        batch_size: int,
        *,
        shuffle: bool = True,
        seed: int = 0,
        drop_last: bool = False,
        as_jax: bool = False,
        keys: tuple[str, ...] | None = None,
    ):
        arrays = dict(data.arrays if isinstance(data, Dataset) else data)
        if keys is not None:
            unknown = sorted(set(keys) - set(arrays))
            if unknown:
                raise ValueError(f"`keys`: {unknown} are not in the data ({sorted(arrays)}).")
            arrays = {k: arrays[k] for k in keys}
        if not arrays:
            raise ValueError("`data` holds no arrays to batch.")
        arrays = {k: np.asarray(v) for k, v in arrays.items()}
        sizes = {k: (v.shape[0] if v.ndim else None) for k, v in arrays.items()}
        n = next(iter(sizes.values()))
        if n is None or any(s != n for s in sizes.values()):
            raise ValueError(f"`data` arrays must share a leading sample axis, got {sizes}.")
        self.batch_size = check_positive_int("batch_size", batch_size)
        if n == 0:
            raise ValueError("`data` holds no samples.")
        if drop_last and batch_size > n:
            raise ValueError(
                f"`batch_size` = {batch_size} exceeds the {n} samples, so drop_last=True "
                "leaves no batch; lower batch_size or set drop_last=False."
            )
        if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)):
            raise ValueError(f"`seed` must be an integer, got {seed!r}.")
        self.arrays, self.n = arrays, n
        self.shuffle, self.seed = bool(shuffle), int(seed)
        self.drop_last, self.as_jax = bool(drop_last), bool(as_jax)

    def __len__(self) -> int:
        """Batches per epoch."""
        return self.n // self.batch_size if self.drop_last else -(-self.n // self.batch_size)

    def order(self, epoch: int) -> np.ndarray:
        """The sample order of epoch `epoch`."""
        if not self.shuffle:
            return np.arange(self.n)
        return np.random.default_rng((self.seed, int(epoch))).permutation(self.n)

    def _take(self, index: np.ndarray) -> dict[str, Any]:
        batch = {k: v[index] for k, v in self.arrays.items()}
        return {k: jnp.asarray(v) for k, v in batch.items()} if self.as_jax else batch

    def epoch(self, epoch: int) -> Iterator[dict[str, Any]]:
        """The batches of one epoch, in order."""
        order = self.order(epoch)
        for b in range(len(self)):
            yield self._take(order[b * self.batch_size : (b + 1) * self.batch_size])

    def at(self, step: int) -> dict[str, Any]:
        """The batch at global step `step` (epoch `step // len(self)`)."""
        if isinstance(step, bool) or not isinstance(step, (int, np.integer)) or step < 0:
            raise ValueError(f"`step` must be a non-negative integer, got {step!r}.")
        epoch, b = divmod(int(step), len(self))
        order = self.order(epoch)
        return self._take(order[b * self.batch_size : (b + 1) * self.batch_size])

    def __iter__(self) -> Iterator[dict[str, Any]]:
        """Every batch of epoch 0, 1, 2, … (endless; stop it yourself)."""
        epoch = 0
        while True:
            yield from self.epoch(epoch)
            epoch += 1
