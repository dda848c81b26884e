r"""The reservoir buffer: random reads that do not evict.

FIFO and FIRO make the trainer wait whenever the solvers are slower than it.
A reservoir keeps every sample until it has to make room: reads are uniform
over the stored samples and do not evict, so once training has started (at
`watermark` samples put) a batch is available whenever `batch_size` samples
are stored. Slow solvers mean more reuse, not an idle trainer; the rate limit
`min_new_per_batch` bounds that reuse.

**Which sample makes room.** With `replacement="seen"` (Melissa's reservoir) a
put into a full buffer replaces a uniformly chosen *already-read* sample: no
sample leaves unread, and a buffer full of unread samples refuses puts
(`can_put` is `False`, the receiver waits) until the trainer has read one.
The buffer's content then depends on the trainer's pace.

`replacement="uniform"` is Vitter's Algorithm R: the `n`-th sample put
(`n > capacity`) replaces a uniformly random slot with probability
`capacity / n` and is discarded otherwise. By induction every sample is in the
buffer with probability `capacity / n` after `n` puts: a new sample enters
with `capacity / n`; a stored one survives the `n`-th put with probability
`1 - (capacity / n)(1 / capacity) = (n - 1) / n`, so
`capacity / (n - 1) * (n - 1) / n = capacity / n`. The buffer is a uniform
sample of everything received, whatever the trainer does, at the price of
discarding samples (some never read) and never pushing back.

The replacement draws of the `n`-th put come from
`numpy.random.default_rng((seed, n))`: deterministic given `seed` and the
sequence of puts, and independent of the trainer's keys.

After reception has ended, reads evict, and the buffer drains until fewer than
`batch_size` samples are left (dropped).
"""

from __future__ import annotations

import dataclasses

import numpy as np

from .._checks import check_choice, check_int
from ._buffers import N_PUT, AbstractBuffer, _first_empty, _random_slots, _size, check_watermark


@dataclasses.dataclass(frozen=True)
class Reservoir(AbstractBuffer):
    """Uniform random reads that do not evict; training starts once `watermark`
    samples have been put and never starves the trainer afterwards. After
    reception has ended, reads evict (the drain).

    **Arguments:**

    - `capacity`, `min_new_per_batch`: see
      [`AbstractBuffer`][sciml.online.AbstractBuffer].
    - `watermark`: reads wait until this many samples have been put, or
      reception has ended (an integer in `[0, capacity]`, default 0).
    - `replacement`: what a put does to a full buffer. `"seen"` (default):
      replace a uniformly chosen already-read sample; when every stored sample
      is unread, `can_put` is `False`. `"uniform"`: Algorithm R, the `n`-th
      sample replaces a uniformly random slot with probability `capacity / n`
      and is discarded otherwise (counted in `n_discarded`); `can_put` is
      always `True`.
    - `seed`: the seed (an integer >= 0) of the replacement draws: the `n`-th
      put draws from `numpy.random.default_rng((seed, n))` (both modes).
    """

    capacity: int
    watermark: int = 0
    min_new_per_batch: int = 0
    replacement: str = "seen"
    seed: int = 0

    def _check_policy(self):
        check_watermark(self.watermark, self.capacity)
        check_choice("replacement", self.replacement, ("seen", "uniform"))
        check_int("seed", self.seed, minimum=0)

    def _started(self, state, ended):
        return ended or bool(state.counters[N_PUT] >= self.watermark)

    def _available(self, state, ended):
        return _size(state)

    def _has_room(self, state):
        if _size(state) < self.capacity or self.replacement == "uniform":
            return True
        return bool(state.seen.any())

    def _put_slot(self, state):
        if _size(state) < self.capacity:
            return _first_empty(state)
        n = int(state.counters[N_PUT]) + 1  # this sample is the n-th one put
        rng = np.random.default_rng((self.seed, n))
        if self.replacement == "uniform":
            slot = int(rng.integers(n))
            return slot if slot < self.capacity else None
        return int(rng.choice(np.flatnonzero(state.seen > 0)))

    def _select(self, state, batch_size, n_new, rng):
        return _random_slots(state, batch_size, n_new, rng)

    def _to_evict(self, state, slots, ended):
        return slots if ended else slots[:0]
