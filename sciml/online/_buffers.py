r"""Training buffers for online learning: the state, the shared logic, FIFO and FIRO.

Solvers stream samples `(run_id, step) -> fields` into a bounded in-memory
buffer while the trainer draws batches from it. A buffer policy answers three
questions: which samples a batch reads, when a read sample leaves the buffer,
and what happens when a sample arrives at a full buffer. Each answer trades
data diversity against reuse and bias (Meyer et al., "Training Deep Surrogate
Models with Large Scale Online Learning", ICML 2023):

- [`FIFO`][sciml.online.FIFO]: the oldest `batch_size` samples, evicted on
  read. Every sample is used exactly once, in arrival order; but with few
  concurrent solvers consecutive batches hold consecutive time steps of the
  same runs, so they are strongly correlated, and the trainer waits whenever
  the solvers are slower than it.
- [`FIRO`][sciml.online.FIRO] (first-in random-out): uniform random reads, a
  sample is evicted after `reads` reads. Random reads decorrelate the batches,
  and the number of batches is known in advance: `S` samples give
  `S * reads // batch_size` batches. Reads wait until `watermark` samples are
  stored, so the first batches are not drawn from the first few time steps.
- [`Reservoir`][sciml.online.Reservoir]: uniform random reads that do not
  evict; training never starves once it has started, and a full buffer
  replaces an already-read sample (or, as Algorithm R, keeps a uniform sample
  of everything received). Its derivation is on its own page.

`min_new_per_batch = m > 0` bounds reuse: a batch is only served when at least
`m` never-read samples are stored, and it holds `m` of them (drawn uniformly
among the never-read ones; the rest of the batch follows the policy). The
limit is lifted once reception has ended, and while the buffer is full and
cannot take a sample (a full FIRO buffer of partly read samples would
otherwise wait for a put that waits for it); such a batch still takes as many
never-read samples as there are, up to `m`.

**End of reception.** When the trainer passes `ended=True` (every solver run
has finished) watermarks and rate limits are lifted, reservoir reads evict,
and the buffers drain until less than a batch is left, which is dropped:
fewer than `batch_size` samples (FIFO, reservoir) or fewer than `batch_size`
remaining reads (FIRO). To serve every one of its `S * reads` reads, FIRO's
last batches may hold a sample more than once (at most its remaining reads)
when fewer than `batch_size` distinct samples are left; all other batches hold
distinct samples. A training loop makes one call per batch,
[`draw`][sciml.online.AbstractBuffer.draw], which draws a batch or says that
none can be drawn now (and, with `ended=True`, that none ever will).

**State.** A buffer (a frozen dataclass) holds hyperparameters only;
everything that changes lives in a [`BufferState`][sciml.online.BufferState]
of numpy arrays (a pytree, checkpointed with the model, as optax separates an
optimiser from its state). `put` and `draw` update the state's arrays in place
(a batch of fields is copied once, nothing else) and return the state: the
state passed in is consumed, keep only the returned one. The arrays live on
the host; the receive thread (`put`) and the training loop (`draw`) share one
buffer under one lock that the caller holds, the buffer itself does not lock.

**Determinism.** `draw` draws from a numpy generator seeded with the key data
of its JAX `key` (and the reservoir's replacement on `put` from its `seed`), so
batches are a pure function of the keys and of the sequence of puts and gets.

The buffer does not de-duplicate sample ids: the transport drops resent
samples before they reach it.
"""

from __future__ import annotations

import abc
import dataclasses
from collections.abc import Mapping
from typing import ClassVar, NamedTuple

import jax
import numpy as np
from jaxtyping import ArrayLike, PRNGKeyArray

from .._checks import check_int, check_positive_int, is_int


# Positions in `BufferState.counters`.
N_PUT = 0  # samples put (offered), inserted or discarded
N_INSERTED = 1  # samples written into a slot; the insertion counter behind `order`
N_DISCARDED = 2  # samples discarded on put (`replacement="uniform"` only)
N_EVICTED = 3  # samples removed: evicted on read or replaced on put
N_BATCHES = 4  # batches drawn
NEW_SINCE_LAST_BATCH = 5  # samples inserted since the last batch
NEW_IN_LAST_BATCH = 6  # never-read samples in the last batch
COUNTER_NAMES = (
    "n_put",
    "n_inserted",
    "n_discarded",
    "n_evicted",
    "n_batches",
    "new_since_last_batch",
    "new_in_last_batch",
)


class BufferState(NamedTuple):
    """Everything a buffer changes, as numpy arrays (a pytree).

    - `data`: `{name: (capacity, *field_shape)}`, each in its field's dtype;
      the content of an empty slot is meaningless.
    - `ids`: `(capacity, 2)` int64, the `(run_id, step)` of each slot's sample,
      `-1` when the slot is empty.
    - `seen`: `(capacity,)` int64, how many times the slot's sample was read.
    - `order`: `(capacity,)` int64, the insertion counter of the slot's sample
      (arrival order), `-1` when the slot is empty.
    - `counters`: `(len(COUNTER_NAMES),)` int64, indexed by the module
      constants `N_PUT`, `N_INSERTED`, `N_DISCARDED`, `N_EVICTED`, `N_BATCHES`,
      `NEW_SINCE_LAST_BATCH`, `NEW_IN_LAST_BATCH`.
    """

    data: dict[str, np.ndarray]
    ids: np.ndarray
    seen: np.ndarray
    order: np.ndarray
    counters: np.ndarray


def _rng(key) -> np.random.Generator:
    """A numpy generator seeded with the key data of a JAX PRNG key."""
    return np.random.default_rng(np.asarray(jax.random.key_data(key)).ravel().tolist())


def _check_fields(sample: Mapping[str, ArrayLike], data: dict[str, np.ndarray]) -> dict:
    """`sample` as numpy arrays; its names, shapes and dtypes must be `data`'s."""
    if not isinstance(sample, Mapping) or set(sample) != set(data):
        got = sorted(sample) if isinstance(sample, Mapping) else type(sample).__name__
        raise ValueError(f"`sample` must have the fields {sorted(data)}, got {got}.")
    arrays = {name: np.asarray(value) for name, value in sample.items()}
    for name, array in arrays.items():
        shape, dtype = data[name].shape[1:], data[name].dtype
        if array.shape != shape or array.dtype != dtype:
            raise ValueError(
                f"`sample[{name!r}]` must have shape {shape} and dtype {dtype}, "
                f"got shape {array.shape} and dtype {array.dtype}."
            )
    return arrays


def _check_sample_id(sample_id) -> tuple[int, int]:
    ok = (
        isinstance(sample_id, tuple | list)
        and len(sample_id) == 2
        and all(is_int(i) for i in sample_id)
        and min(sample_id) >= 0
    )
    if not ok:
        raise ValueError(
            f"`sample_id` must be a pair of non-negative integers (run_id, step), got {sample_id!r}."
        )
    return int(sample_id[0]), int(sample_id[1])


def _size(state: BufferState) -> int:
    return int(state.counters[N_INSERTED] - state.counters[N_EVICTED])


def _occupied(state: BufferState) -> np.ndarray:
    return state.order >= 0


def _unseen(state: BufferState) -> np.ndarray:
    return (state.order >= 0) & (state.seen == 0)


def _check_state(state: BufferState, capacity: int) -> None:
    if not isinstance(state, BufferState) or state.ids.shape != (capacity, 2):
        raise ValueError(
            f"`state` must be a BufferState from this buffer's `init` (capacity {capacity})."
        )


def check_watermark(watermark: int, capacity: int) -> None:
    """A watermark: an integer in `[0, capacity]` (reads wait for that many samples)."""
    check_int("watermark", watermark, minimum=0)
    if watermark > capacity:
        raise ValueError(
            f"`watermark` ({watermark}) must be at most `capacity` ({capacity}): reads start "
            "once the buffer holds that many samples."
        )


def _check_batch_size(batch_size: int, capacity: int, min_new_per_batch: int) -> None:
    check_positive_int("batch_size", batch_size)
    if batch_size > capacity:
        raise ValueError(f"`batch_size` must be at most the capacity {capacity}, got {batch_size}.")
    if min_new_per_batch > batch_size:
        raise ValueError(
            f"`min_new_per_batch` ({min_new_per_batch}) must be at most `batch_size` "
            f"({batch_size})."
        )


def _first_empty(state: BufferState) -> int:
    """The first empty slot (the buffer is not full)."""
    return int(np.argmax(state.order < 0))


def _remaining(state: BufferState, reads: int) -> np.ndarray:
    """FIRO's reads left per slot (0 for empty slots)."""
    return np.where(_occupied(state), reads - state.seen, 0)


def _random_slots(
    state: BufferState, batch_size: int, n_new: int, rng: np.random.Generator
) -> np.ndarray:
    """`n_new` never-read slots, then the rest of the batch among all other
    occupied slots, uniformly without replacement, in random order."""
    new = rng.choice(np.flatnonzero(_unseen(state)), n_new, replace=False)
    pool = _occupied(state)
    pool[new] = False
    rest = rng.choice(np.flatnonzero(pool), batch_size - n_new, replace=False)
    return rng.permutation(np.concatenate([new, rest]))


class AbstractBuffer(abc.ABC):
    """A training buffer: hyperparameters only, the contents in a
    [`BufferState`][sciml.online.BufferState].

    The subclasses [`FIFO`][sciml.online.FIFO], [`FIRO`][sciml.online.FIRO]
    and [`Reservoir`][sciml.online.Reservoir] are final frozen dataclasses;
    see the module documentation for their policies. The public methods are
    concrete here and overridden nowhere; a policy is the abstract hooks
    (`_check_policy`, `_started`, `_available`, `_has_room`, `_put_slot`,
    `_select`, `_to_evict`), each implemented by every final buffer. All share:

    - `capacity`: the number of samples the buffer holds (an integer >= 1).
    - `min_new_per_batch`: every batch holds at least this many never-read
      samples (`0`, the default, turns the rate limit off; at most
      `batch_size`).
    - `watermark`: reads wait until this many samples are stored (FIRO,
      reservoir; always `0` for FIFO).
    """

    capacity: int
    min_new_per_batch: int
    watermark: int

    def __post_init__(self):  # the dataclass `__init__` of each final buffer calls it
        check_int("capacity", self.capacity, minimum=1)
        check_int("min_new_per_batch", self.min_new_per_batch, minimum=0, maximum=self.capacity)
        self._check_policy()

    # -- policy hooks: every final buffer implements each of them -----------

    @abc.abstractmethod
    def _check_policy(self) -> None:
        """Checks the buffer's own hyperparameters (after `capacity`)."""

    @abc.abstractmethod
    def _started(self, state: BufferState, ended: bool) -> bool:
        """Whether reads may begin (the watermark)."""

    @abc.abstractmethod
    def _available(self, state: BufferState, ended: bool) -> int:
        """How many reads a batch can draw from now."""

    @abc.abstractmethod
    def _has_room(self, state: BufferState) -> bool:
        """Whether a put is accepted now (`can_put`)."""

    @abc.abstractmethod
    def _put_slot(self, state: BufferState) -> int | None:
        """The slot a new sample goes to (`None`: discard it); `_has_room` holds."""

    @abc.abstractmethod
    def _select(
        self, state: BufferState, batch_size: int, n_new: int, rng: np.random.Generator
    ) -> np.ndarray:
        """The slots a batch reads, holding at least `n_new` never-read ones."""

    @abc.abstractmethod
    def _to_evict(self, state: BufferState, slots: np.ndarray, ended: bool) -> np.ndarray:
        """Which of the slots just read (their `seen` already updated) to evict."""

    # -- public interface ---------------------------------------------------

    def init(self, example: Mapping[str, ArrayLike]) -> BufferState:
        """An empty buffer for samples shaped like `example`.

        **Arguments:** `example`, one sample: `{name: array}` without a batch
        axis (each field's shape and dtype is fixed from it).

        **Returns:** a [`BufferState`][sciml.online.BufferState] with every
        slot empty and every counter zero.
        """
        if not isinstance(example, Mapping) or not example:
            raise ValueError(f"`example` must be a non-empty dict of arrays, got {example!r}.")
        if not all(isinstance(name, str) for name in example):
            raise ValueError(f"`example` field names must be strings, got {list(example)}.")
        example = {name: np.asarray(value) for name, value in example.items()}
        return BufferState(
            data={n: np.zeros((self.capacity, *v.shape), v.dtype) for n, v in example.items()},
            ids=np.full((self.capacity, 2), -1, np.int64),
            seen=np.zeros(self.capacity, np.int64),
            order=np.full(self.capacity, -1, np.int64),
            counters=np.zeros(len(COUNTER_NAMES), np.int64),
        )

    def can_put(self, state: BufferState) -> bool:
        """Whether `put` accepts a sample now; `False` means the receiver must
        wait (backpressure), samples are never dropped."""
        return self._has_room(state)

    def put(
        self, state: BufferState, sample: Mapping[str, ArrayLike], sample_id: tuple[int, int]
    ) -> BufferState:
        """Stores one sample. Consumes `state` (updated in place).

        **Arguments:**

        - `state`: the buffer state.
        - `sample`: `{name: array}`, the fields of `init`'s example with the same
          shapes and dtypes.
        - `sample_id`: `(run_id, step)`, non-negative integers.

        **Returns:** the updated state. Raises `ValueError` when `can_put` is
        `False` or the sample does not match the example.
        """
        _check_state(state, self.capacity)
        arrays = _check_fields(sample, state.data)
        sample_id = _check_sample_id(sample_id)
        if not self._has_room(state):
            raise ValueError(
                f"the buffer cannot take a sample now ({_size(state)}/{self.capacity} "
                "stored); wait until `can_put` is True."
            )
        slot = self._put_slot(state)
        state.counters[N_PUT] += 1
        if slot is None:
            state.counters[N_DISCARDED] += 1
            return state
        if state.order[slot] >= 0:
            state.counters[N_EVICTED] += 1
        for name, array in arrays.items():
            state.data[name][slot] = array
        state.ids[slot] = sample_id
        state.seen[slot] = 0
        state.order[slot] = state.counters[N_INSERTED]
        state.counters[N_INSERTED] += 1
        state.counters[NEW_SINCE_LAST_BATCH] += 1
        return state

    def check_batch_size(self, batch_size: int) -> int:
        """`batch_size` if this buffer can serve batches of it (`1 <= batch_size
        <= capacity`, and `>= min_new_per_batch`); raises `ValueError`
        otherwise. Checked where a buffer meets its batch size (the sample
        stream, when it is built) and by every `draw`: a batch the buffer can
        never serve is an error, not a `None` ("not now") for ever."""
        _check_batch_size(batch_size, self.capacity, self.min_new_per_batch)
        return int(batch_size)

    def draw(
        self, state: BufferState, batch_size: int, key: PRNGKeyArray, *, ended: bool
    ) -> tuple[BufferState, dict[str, np.ndarray], np.ndarray] | None:
        """Draws one batch if one can be drawn now. Consumes `state` (updated in
        place) when it does.

        **Arguments:**

        - `state`: the buffer state.
        - `batch_size`: samples per batch (always exactly this many; one that
          `check_batch_size` accepts, else `ValueError`).
        - `key`: a JAX PRNG key; the draw is a pure function of it and the state.
        - `ended`: reception has ended (lifts watermarks and rate limits, starts
          the drain).

        **Returns:** `(state, batch, ids)`: the updated state, `batch` as
        `{name: (batch_size, *field_shape)}` (copies) and `ids` as
        `(batch_size, 2)` int64 `(run_id, step)` pairs; or `None` when no
        batch can be drawn now (the state untouched). With `ended=True`,
        `None` means that no batch will come again: less than a batch is
        left, and it is dropped.
        """
        _check_state(state, self.capacity)
        _check_batch_size(batch_size, self.capacity, self.min_new_per_batch)
        unseen = _unseen(state)
        if not self._can_draw(state, batch_size, ended, unseen):
            return None
        n_new = 0 if ended else min(self.min_new_per_batch, int(unseen.sum()))
        slots = self._select(state, batch_size, n_new, _rng(key))
        batch = {name: field[slots] for name, field in state.data.items()}
        ids = state.ids[slots]
        new = np.unique(slots[unseen[slots]]).size
        np.add.at(state.seen, slots, 1)
        evict = self._to_evict(state, slots, ended)
        state.ids[evict] = -1
        state.order[evict] = -1
        state.seen[evict] = 0
        state.counters[N_EVICTED] += evict.size
        state.counters[N_BATCHES] += 1
        state.counters[NEW_SINCE_LAST_BATCH] = 0
        state.counters[NEW_IN_LAST_BATCH] = new
        return state, batch, ids

    def stats(self, state: BufferState) -> dict[str, float]:
        """Monitoring numbers: `fill` (size / capacity), `size`, `mean_seen` and
        `max_seen` (over stored samples), `n_unseen`, and the counters
        `n_put`, `n_inserted`, `n_discarded`, `n_evicted`, `n_batches`,
        `new_since_last_batch`, `new_in_last_batch`."""
        seen = state.seen[_occupied(state)]
        size = _size(state)
        out = {
            "fill": size / self.capacity,
            "size": float(size),
            "mean_seen": float(seen.mean()) if seen.size else 0.0,
            "max_seen": float(seen.max()) if seen.size else 0.0,
            "n_unseen": float((seen == 0).sum()),
        }
        out.update({name: float(c) for name, c in zip(COUNTER_NAMES, state.counters)})
        return out

    def _can_draw(
        self, state: BufferState, batch_size: int, ended: bool, unseen: np.ndarray
    ) -> bool:
        """Whether a batch can be drawn now (`unseen`: the never-read slots)."""
        if not self._started(state, ended) or self._available(state, ended) < batch_size:
            return False
        # the rate limit, lifted once reception ended or while a put must wait
        return ended or int(unseen.sum()) >= self.min_new_per_batch or not self._has_room(state)


@dataclasses.dataclass(frozen=True)
class FIFO(AbstractBuffer):
    """First in, first out: a batch is the `batch_size` oldest samples, in
    arrival order, evicted on read, so every sample is used exactly once.
    `can_put` is `False` when the buffer is full.

    **Arguments:** `capacity`, `min_new_per_batch` (see
    [`AbstractBuffer`][sciml.online.AbstractBuffer]; every stored FIFO sample
    is unread, so the rate limit holds whenever `min_new_per_batch <= batch_size`).
    """

    capacity: int
    min_new_per_batch: int = 0
    watermark: ClassVar[int] = 0  # reads never wait for more samples than a batch

    def _check_policy(self):
        pass

    def _started(self, state, ended):
        return True

    def _available(self, state, ended):
        return _size(state)

    def _has_room(self, state):
        return _size(state) < self.capacity

    def _put_slot(self, state):
        return _first_empty(state)

    def _select(self, state, batch_size, n_new, rng):
        stored = np.flatnonzero(_occupied(state))
        return stored[np.argsort(state.order[stored], kind="stable")[:batch_size]]

    def _to_evict(self, state, slots, ended):
        return slots


@dataclasses.dataclass(frozen=True)
class FIRO(AbstractBuffer):
    """First in, random out: uniform random reads (distinct samples within a
    batch), each sample evicted after `reads` reads; `S` samples give
    `S * reads // batch_size` batches (see the module documentation for the
    last batches of the drain).

    **Arguments:**

    - `capacity`, `min_new_per_batch`: see
      [`AbstractBuffer`][sciml.online.AbstractBuffer].
    - `reads`: reads per sample before it is evicted (an integer >= 1; Melissa's
      `pseudo_epochs`).
    - `watermark`: reads wait until this many samples are stored, or reception
      has ended (an integer in `[0, capacity]`, default 0).
    """

    capacity: int
    reads: int = 1
    watermark: int = 0
    min_new_per_batch: int = 0

    def _check_policy(self):
        check_int("reads", self.reads, minimum=1)
        check_watermark(self.watermark, self.capacity)

    def _started(self, state, ended):
        return ended or _size(state) >= self.watermark

    def _available(self, state, ended):
        # after reception ends the last batches may repeat a sample (up to its
        # remaining reads), so every one of the S * reads reads is served
        return int(_remaining(state, self.reads).sum()) if ended else _size(state)

    def _has_room(self, state):
        return _size(state) < self.capacity

    def _put_slot(self, state):
        return _first_empty(state)

    def _select(self, state, batch_size, n_new, rng):
        if _size(state) >= batch_size:
            return _random_slots(state, batch_size, n_new, rng)
        remaining = _remaining(state, self.reads)
        reads = np.repeat(np.arange(self.capacity), remaining)
        return rng.choice(reads, batch_size, replace=False)

    def _to_evict(self, state, slots, ended):
        slots = np.unique(slots)
        return slots[state.seen[slots] >= self.reads]
