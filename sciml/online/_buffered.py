"""A study's samples between the receiver and the training loop.

`BufferedSamples` holds a buffer
module with its [`BufferState`][sciml.online.BufferState], the log of accepted
sample ids and the sample counters (`received`, `trained`, `batches`). It does
not lock: the stream calls it under its lock. A batch is one buffer call
([`draw`][sciml.online.AbstractBuffer.draw]), which draws the batch or says
that none can be drawn now.
"""

from __future__ import annotations

from collections.abc import Mapping

import jax
import numpy as np

from ._buffers import AbstractBuffer


COUNTERS = ("received", "trained", "batches")


class BufferedSamples:
    """A buffer, its state, the accepted-id log and the sample counters.

    **Arguments:** the `buffer` module; `example`, one sample `{name: array}`
    (without a batch axis) that fixes the fields; `batch_size`, samples per
    batch (which the buffer accepts: the stream checked it, once).
    """

    def __init__(self, buffer: AbstractBuffer, example: Mapping[str, np.ndarray], batch_size: int):
        self.buffer = buffer
        self.batch_size = int(batch_size)
        self.state = buffer.init(example)
        self.accepted: list[tuple[int, int]] = []
        self.counters = dict.fromkeys(COUNTERS, 0)

    def can_put(self) -> bool:
        """Whether a sample is accepted now (else the receiver waits)."""
        return self.buffer.can_put(self.state)

    def put(self, sample: Mapping[str, np.ndarray], sample_id: tuple[int, int]) -> None:
        """Stores one sample (`can_put` must hold) and logs its id."""
        self.state = self.buffer.put(self.state, sample, sample_id)
        self.accepted.append(sample_id)
        self.counters["received"] += 1

    def take(self, key: jax.Array, *, ended: bool) -> dict[str, np.ndarray] | None:
        """The next batch `{name: (batch_size, ...)}`, or `None` if none can be
        drawn now (with `ended=True`: none ever will)."""
        drawn = self.buffer.draw(self.state, self.batch_size, key, ended=ended)
        if drawn is None:
            return None
        self.state, batch, _ = drawn
        self.counters["trained"] += self.batch_size
        self.counters["batches"] += 1
        return batch

    def stats(self) -> dict[str, float]:
        """The buffer's monitoring numbers (`AbstractBuffer.stats`)."""
        return self.buffer.stats(self.state)

    def arrays(self) -> dict[str, np.ndarray]:
        """Copies of the buffer's arrays (`buffer/<leaf>`) and the accepted ids
        (`accepted`, `(n, 2)` int64), for a checkpoint."""
        leaves = jax.tree.leaves(self.state)
        arrays = {f"buffer/{i}": np.array(x, copy=True) for i, x in enumerate(leaves)}
        arrays["accepted"] = np.array(self.accepted, np.int64).reshape(-1, 2)
        return arrays

    def restore(self, arrays: Mapping[str, np.ndarray], counters: Mapping[str, int]) -> None:
        """Restores what `arrays` saved, and the counters; the buffer's arrays
        must have this buffer's shapes and dtypes."""
        leaves, treedef = jax.tree.flatten(self.state)
        saved = [arrays[f"buffer/{i}"] for i in range(len(leaves))]
        for new, old in zip(saved, leaves):
            if new.shape != old.shape or new.dtype != old.dtype:
                raise ValueError(
                    "the checkpoint's buffer does not match this study's buffer "
                    f"({new.dtype}{list(new.shape)} vs {old.dtype}{list(old.shape)}); "
                    "use another run directory."
                )
        self.state = jax.tree.unflatten(treedef, saved)
        self.accepted = [tuple(map(int, row)) for row in arrays["accepted"]]
        self.counters.update({name: counters[name] for name in COUNTERS})
