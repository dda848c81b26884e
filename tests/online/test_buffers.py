"""Training buffers (`sciml.online`): FIFO, FIRO and reservoir policies.

Each policy is driven through interleaved puts and gets (a seeded schedule)
while the test keeps its own record of what was put and read (sets and
counters), and the batches are checked against that record: arrival order,
read counts, batch counts, watermarks, which samples a full buffer replaces,
inclusion and read frequencies, the rate limit, determinism and checkpoints.
"""

import functools
from collections import Counter
from fractions import Fraction

import jax
import numpy as np
import pytest
import scipy.stats

from sciml.online import LocalLauncher, ParameterSpace, SampleStream, Study
from sciml.online._buffers import FIFO, FIRO, N_INSERTED, N_PUT, AbstractBuffer, BufferState
from sciml.online._reservoir import Reservoir


def _sample(i: int) -> dict[str, np.ndarray]:
    """Sample number `i`: a small field whose values encode `i`."""
    return {"u": np.full((2, 3), i, np.float32), "p": np.array([i, -i], np.int64)}


EXAMPLE = _sample(0)


def _key(i: int):
    return jax.random.key(i)


def _check_batch(batch, ids):
    """The fields of each batch row belong to the id in that row."""
    rows = ids[:, 1]
    np.testing.assert_array_equal(batch["u"][:, 0, 0], rows.astype(np.float32))
    np.testing.assert_array_equal(batch["p"][:, 0], rows)
    assert batch["u"].shape == (len(ids), 2, 3) and ids.shape == (len(ids), 2)


def _put(buffer, state, i):
    """Puts sample `i` with id `(i % 3, i)` (three interleaved runs)."""
    return buffer.put(state, _sample(i), (i % 3, i))


def _can_get(buffer, state, batch_size, *, ended):
    """Whether `draw` would draw a batch now (tried on a copy of `state`)."""
    copy = jax.tree.map(np.copy, state)
    return buffer.draw(copy, batch_size, _key(0), ended=ended) is not None


def _exhausted(buffer, state, batch_size):
    """Whether no batch will come again after reception has ended."""
    return not _can_get(buffer, state, batch_size, ended=True)


def _get(buffer, state, batch_size, key, *, ended):
    """`draw`, which must draw a batch."""
    drawn = buffer.draw(state, batch_size, key, ended=ended)
    assert drawn is not None, "no batch could be drawn"
    return drawn


def _stream(buffer, n_samples, batch_size, *, p_put=0.6, seed=0, after_put=None, after_get=None):
    """Interleaves puts of samples `0..n_samples-1` with draws in a seeded
    random schedule (a put when possible with probability `p_put`), then drains
    with `ended=True` until `draw` says no batch will come again. Fails on a
    deadlock (neither a put nor a draw possible). Calls `after_put(state, i)`
    and `after_get(state, ids, ended)` after each operation. Returns the final
    state and the list of each batch's ids."""
    schedule = np.random.default_rng(seed)
    state = buffer.init(EXAMPLE)
    batches, i = [], 0
    while True:
        ended = i == n_samples
        wants_put = not ended and schedule.random() < p_put
        before = jax.tree.map(np.copy, state)
        drawn = buffer.draw(before, batch_size, _key(len(batches)), ended=ended)
        if drawn is None:
            # a draw that cannot serve leaves the state as it was
            jax.tree.map(np.testing.assert_array_equal, before, state)
        if ended and drawn is None:
            break
        if not ended and buffer.can_put(state) and (wants_put or drawn is None):
            state = _put(buffer, state, i)
            if after_put is not None:
                after_put(state, i)
            i += 1
        elif drawn is not None:
            state, batch, ids = drawn
            _check_batch(batch, ids)
            batches.append(ids)
            if after_get is not None:
                after_get(state, ids, ended)
        else:
            raise AssertionError(f"deadlock after {i} puts and {len(batches)} batches")
    return state, batches


# -- FIFO ----------------------------------------------------------------------


def test_fifo_every_sample_once_in_arrival_order():
    buffer = FIFO(capacity=7)
    state, batches = _stream(buffer, 40, 3)
    read = np.concatenate([ids[:, 1] for ids in batches])
    # 40 = 13 * 3 + 1: thirteen batches in arrival order, the last sample dropped
    np.testing.assert_array_equal(read, np.arange(39))
    np.testing.assert_array_equal(np.concatenate(batches)[:, 0], np.arange(39) % 3)
    stats = buffer.stats(state)
    assert (stats["size"], stats["n_batches"], stats["n_evicted"]) == (1, 13, 39)
    assert _exhausted(buffer, state, 3) and not _exhausted(buffer, state, 1)


def test_fifo_full_pushes_back():
    buffer = FIFO(3)
    state = buffer.init(EXAMPLE)
    for i in range(3):
        assert buffer.can_put(state)
        state = _put(buffer, state, i)
    assert not buffer.can_put(state)
    with pytest.raises(ValueError, match="can_put"):
        _put(buffer, state, 3)
    state, _, ids = _get(buffer, state, 2, _key(0), ended=False)
    np.testing.assert_array_equal(ids[:, 1], [0, 1])
    assert buffer.can_put(state)


# -- FIRO ----------------------------------------------------------------------


@pytest.mark.parametrize(
    "n_samples, reads, batch_size, capacity, watermark",
    [(48, 3, 8, 16, 10), (30, 2, 4, 6, 6), (25, 3, 4, 9, 5), (20, 3, 2, 4, 0)],
)
def test_firo_reads_each_sample_k_times(n_samples, reads, batch_size, capacity, watermark):
    buffer = FIRO(capacity, reads=reads, watermark=watermark)
    sizes = []

    def after_put(state, i):
        size = buffer.stats(state)["size"]
        assert _can_get(buffer, state, batch_size, ended=False) == (
            size >= max(watermark, batch_size)
        )

    def after_get(state, ids, ended):
        sizes.append(len(set(ids[:, 1])))

    state, batches = _stream(
        buffer, n_samples, batch_size, after_put=after_put, after_get=after_get
    )
    counts = Counter(np.concatenate(batches)[:, 1].tolist())
    total = n_samples * reads
    assert len(batches) == total // batch_size
    if total % batch_size == 0:
        assert counts == {i: reads for i in range(n_samples)}
        assert buffer.stats(state)["size"] == 0
    else:  # the dropped remainder: fewer than a batch of reads
        assert max(counts.values()) <= reads
        assert 0 < total - sum(counts.values()) < batch_size
    # batches hold distinct samples, except the last ones of the drain when
    # fewer than `batch_size` distinct samples are left
    n_repeating = sum(n < batch_size for n in sizes)
    assert all(n == batch_size for n in sizes[: len(sizes) - n_repeating])


def _five_below_the_watermark(buffer):
    """Five samples into `buffer` (watermark 6): no batch is served."""
    state = buffer.init(EXAMPLE)
    for i in range(5):
        state = _put(buffer, state, i)
        assert not _can_get(buffer, state, 2, ended=False)
    return state


def test_firo_watermark_blocks_until_reception_ends():
    buffer = FIRO(8, reads=2, watermark=6)
    state = _five_below_the_watermark(buffer)
    # reception ended below the watermark: the five samples drain, two reads each
    drained = jax.tree.map(np.copy, state)
    reads = []
    while not _exhausted(buffer, drained, 2):
        drained, _, ids = _get(buffer, drained, 2, _key(len(reads)), ended=True)
        reads += ids[:, 1].tolist()
    assert Counter(reads) == {i: 2 for i in range(5)}
    state = _put(buffer, state, 5)
    assert _can_get(buffer, state, 2, ended=False)


# -- Reservoir -----------------------------------------------------------------


def test_reservoir_serves_nothing_below_the_watermark():
    buffer = Reservoir(10, watermark=6)
    state = _five_below_the_watermark(buffer)
    assert _can_get(buffer, state, 2, ended=True)  # ended below the watermark: drain
    state = _put(buffer, state, 5)
    assert _can_get(buffer, state, 2, ended=False)


@pytest.mark.parametrize("min_new", [0, 2])
def test_reservoir_keeps_unread_samples_and_never_starves(min_new):
    capacity, watermark, batch_size = 12, 6, 4
    buffer = Reservoir(capacity, watermark=watermark, min_new_per_batch=min_new)
    stored, unread, drained = set(), set(), []
    n_put = n_replaced = n_pushbacks = 0

    def reference_can_put():
        # a full buffer of unread samples pushes back; otherwise puts go on
        return len(stored) < capacity or unread != stored

    def check_can_get(state):
        # after the watermark a batch is always available, unless the rate limit
        # waits for new samples (and a put is possible)
        if n_put >= watermark and len(stored) >= batch_size:
            waits = len(unread) < min_new and reference_can_put()
            assert _can_get(buffer, state, batch_size, ended=False) == (not waits)

    def after_put(state, i):
        nonlocal n_put, n_replaced, n_pushbacks
        n_put += 1
        now = {int(j) for j in state.ids[state.order >= 0, 1]}
        replaced = (stored | {i}) - now
        assert i in now and len(replaced) == (len(stored) == capacity)
        assert not replaced & unread, "an unread sample was replaced"
        n_replaced += len(replaced)
        stored.clear(), stored.update(now)
        unread.add(i)
        assert buffer.can_put(state) == reference_can_put()
        n_pushbacks += not reference_can_put()
        check_can_get(state)

    def after_get(state, ids, ended):
        read = set(ids[:, 1].tolist())
        assert len(read) == batch_size and read <= stored
        if not ended:
            assert len(read & unread) >= min_new
        unread.difference_update(read)
        if ended:  # the drain evicts what it reads
            stored.difference_update(read)
            drained.append(read)
        check_can_get(state)

    state, batches = _stream(
        buffer, 150, batch_size, p_put=0.8, after_put=after_put, after_get=after_get
    )
    assert len(batches) > 150 // batch_size  # samples are reused
    assert n_replaced > 50 and n_pushbacks > 0  # both regimes of a full buffer were met
    remainder = {int(j) for j in state.ids[state.order >= 0, 1]}
    assert remainder == stored and len(remainder) < batch_size
    assert sum(map(len, drained)) + len(remainder) == capacity  # drained from a full buffer
    assert not set().union(*drained) & remainder


def test_reservoir_uniform_replacement_includes_each_sample_with_probability_k_over_n():
    # Algorithm R: after n puts each sample is stored with probability k / n.
    k, n, repetitions = 4, 12, 1000
    included = np.zeros(n)
    for seed in range(repetitions):
        buffer = Reservoir(k, replacement="uniform", seed=seed)
        state = buffer.init(EXAMPLE)
        for i in range(n):
            assert buffer.can_put(state)
            state = _put(buffer, state, i)
        included[state.ids[:, 1]] += 1
        stats = buffer.stats(state)
        assert (stats["size"], stats["n_put"], stats["n_discarded"]) == (
            k,
            n,
            stats["n_put"] - stats["n_inserted"],
        )
    p = k / n
    sigma = np.sqrt(p * (1 - p) / repetitions)
    # measured: max deviation 0.038 = 2.5 sigma over the 12 ids (sigma = 0.0149); bound 5 sigma
    assert np.max(np.abs(included / repetitions - p)) < 5 * sigma


class _ScriptedGenerator:
    """Stands in for `numpy.random.default_rng(...)`: `integers(high)` records
    how many outcomes were asked for and returns a preset one."""

    def __init__(self, value):
        self.value, self.n_outcomes = value, None

    def integers(self, low, high=None):
        low, high = (0, low) if high is None else (low, high)
        self.n_outcomes = high - low
        return low + self.value


def test_reservoir_uniform_replacement_inclusion_is_exactly_k_over_n(monkeypatch):
    """Exact inclusion probabilities by enumeration: every outcome of every
    replacement draw is followed, each weighted by `1 / (number of outcomes the
    buffer asked for)`, so after `n` puts each sample must be stored with
    probability exactly `k / n` (fractions, no sampling error). An off-by-one in
    the draw fails by far: with `integers(n + 1)` sample 0 is stored with
    probability 1/2 instead of 3/7, with `integers(n − 1)` (or counting the put
    from 0) 1/3."""
    k, n = 3, 7
    generator = _ScriptedGenerator(0)
    monkeypatch.setattr(np.random, "default_rng", lambda seed=None: generator)
    buffer = Reservoir(k, replacement="uniform")
    included = [Fraction(0)] * n

    def put(state, i, value):
        generator.value, generator.n_outcomes = value, None
        return _put(buffer, jax.tree.map(np.copy, state), i), generator.n_outcomes

    def follow(state, i, probability):
        if i == n:
            for j in state.ids[state.order >= 0, 1]:
                included[j] += probability
            return
        after, n_outcomes = put(state, i, 0)
        if n_outcomes is None:  # no draw: the buffer was not full
            follow(after, i + 1, probability)
            return
        for value in range(n_outcomes):
            follow(put(state, i, value)[0], i + 1, probability / n_outcomes)

    follow(buffer.init(EXAMPLE), 0, Fraction(1))
    assert included == [Fraction(k, n)] * n


def test_reservoir_reads_are_uniform_over_stored_samples():
    buffer = Reservoir(10)
    state = buffer.init(EXAMPLE)
    for i in range(10):
        state = _put(buffer, state, i)
    counts = np.zeros(10)
    for j in range(1500):
        state, _, ids = _get(buffer, state, 3, _key(j), ended=False)
        assert len(set(ids[:, 1])) == 3
        counts[ids[:, 1]] += 1
    np.testing.assert_array_equal(state.seen[np.argsort(state.ids[:, 1])], counts)
    expected = counts.sum() / 10
    chi2 = np.sum((counts - expected) ** 2 / expected)
    # measured: chi2 = 14.8 against the 0.999 quantile 27.9 (9 degrees of freedom)
    assert chi2 < scipy.stats.chi2.ppf(0.999, df=9)


# -- rate limit ----------------------------------------------------------------


@pytest.mark.parametrize(
    "buffer",
    [
        FIFO(10, min_new_per_batch=3),
        FIRO(64, reads=3, watermark=4, min_new_per_batch=2),
        Reservoir(16, watermark=4, min_new_per_batch=2),
        Reservoir(16, watermark=4, min_new_per_batch=3, replacement="uniform"),
    ],
    ids=["fifo", "firo", "reservoir", "reservoir-uniform"],
)
def test_rate_limit_every_batch_brings_new_samples(buffer):
    m, batch_size = buffer.min_new_per_batch, 4
    read, n_waits = set(), 0

    def after_put(state, i):
        nonlocal n_waits
        stats = buffer.stats(state)
        if stats["size"] >= batch_size and stats["n_unseen"] < m:
            n_waits += not _can_get(buffer, state, batch_size, ended=False)

    def after_get(state, ids, ended):
        new = set(ids[:, 1].tolist()) - read
        assert buffer.stats(state)["new_in_last_batch"] == len(new)
        if not ended:
            assert len(new) >= m
        read.update(new)

    _stream(buffer, 60, batch_size, after_put=after_put, after_get=after_get)
    # the limit held batches back at times (FIFO stores unread samples only)
    assert (n_waits > 0) != isinstance(buffer, FIFO)


def test_rate_limit_is_waived_when_a_full_buffer_cannot_take_a_sample():
    # FIRO full of partly read samples: waiting for new ones would deadlock.
    buffer = FIRO(4, reads=3, min_new_per_batch=2)
    state = buffer.init(EXAMPLE)
    for i in range(4):
        state = _put(buffer, state, i)
    for j in range(2):
        state, _, _ = _get(buffer, state, 2, _key(j), ended=False)
    assert buffer.stats(state)["n_unseen"] == 0 and not buffer.can_put(state)
    assert _can_get(buffer, state, 2, ended=False)
    state, batches = _stream(buffer, 20, 2)  # no deadlock, every read served
    assert Counter(np.concatenate(batches)[:, 1].tolist()) == {i: 3 for i in range(20)}


# -- determinism, state, statistics ----------------------------------------------

BUFFERS = [
    FIFO(6),
    FIRO(8, reads=2, watermark=4),
    Reservoir(8, watermark=3, min_new_per_batch=1),
    Reservoir(5, replacement="uniform", seed=7),
]
BUFFER_IDS = ["fifo", "firo", "reservoir", "reservoir-uniform"]


def _run(buffer, state, first, steps):
    """A fixed schedule of `steps` operations from sample and key `first`: put
    on even steps when possible, else get a batch of 3."""
    out = []
    for t in range(first, first + steps):
        if t % 2 == 0 and buffer.can_put(state):
            state = _put(buffer, state, t)
        elif _can_get(buffer, state, 3, ended=False):
            state, batch, ids = _get(buffer, state, 3, _key(t), ended=False)
            out.append((batch, ids))
    return state, out


@pytest.mark.parametrize("buffer", BUFFERS, ids=BUFFER_IDS)
def test_same_keys_same_batches_and_checkpoint_round_trip(buffer):
    state, first = _run(buffer, buffer.init(EXAMPLE), 0, 40)
    _, again = _run(buffer, buffer.init(EXAMPLE), 0, 40)
    assert len(first) > 5
    for (b1, i1), (b2, i2) in zip(first, again, strict=True):
        np.testing.assert_array_equal(i1, i2)
        jax.tree.map(np.testing.assert_array_equal, b1, b2)

    assert isinstance(state, BufferState)
    leaves = jax.tree.leaves(state)
    assert len(leaves) == 6 and all(isinstance(x, np.ndarray) for x in leaves)
    restored = jax.tree.map(np.copy, state)  # what a checkpoint round trip gives
    state, cont = _run(buffer, state, 40, 40)
    restored, cont_restored = _run(buffer, restored, 40, 40)
    assert len(cont) > 5
    for (b1, i1), (b2, i2) in zip(cont, cont_restored, strict=True):
        np.testing.assert_array_equal(i1, i2)
        jax.tree.map(np.testing.assert_array_equal, b1, b2)
    jax.tree.map(np.testing.assert_array_equal, state, restored)


def test_final_buffers_override_no_concrete_method():
    """Abstract or final: a buffer policy is the abstract hooks, nothing else."""
    concrete = {
        name
        for name, value in vars(AbstractBuffer).items()
        if callable(value) and not getattr(value, "__isabstractmethod__", False)
    } - {"__init__", "__post_init__"}
    assert {"init", "can_put", "put", "check_batch_size", "draw", "stats"} <= concrete
    for policy in (FIFO, FIRO, Reservoir):
        assert not concrete & set(vars(policy)), policy


def test_reads_depend_on_the_key():
    buffer = Reservoir(20)
    state = buffer.init(EXAMPLE)
    for i in range(20):
        state = _put(buffer, state, i)
    draws = {
        tuple(_get(buffer, jax.tree.map(np.copy, state), 5, _key(j), ended=False)[2][:, 1])
        for j in range(5)
    }
    assert len(draws) == 5


def test_stats_against_recorded_reads():
    buffer = Reservoir(10)
    state = buffer.init(EXAMPLE)
    for i in range(6):
        state = _put(buffer, state, i)
    reads = Counter()
    for j in range(7):
        state, _, ids = _get(buffer, state, 4, _key(j), ended=False)
        reads.update(ids[:, 1].tolist())
    stats = buffer.stats(state)
    seen = np.array([reads[i] for i in range(6)])  # over the 6 stored samples, not 10 slots
    assert stats["mean_seen"] == seen.mean() == 28 / 6
    assert stats["max_seen"] == seen.max()
    assert stats["n_unseen"] == np.sum(seen == 0)
    assert (stats["fill"], stats["size"], stats["n_put"], stats["n_batches"]) == (0.6, 6, 6, 7)
    assert (stats["n_evicted"], stats["new_since_last_batch"]) == (0, 0)
    assert state.counters[N_PUT] == state.counters[N_INSERTED] == 6


# -- bad input -----------------------------------------------------------------


@pytest.mark.parametrize(
    "make, name",
    [
        (lambda: FIFO(0), "capacity"),
        (lambda: FIFO(-3), "capacity"),
        (lambda: FIFO(4, min_new_per_batch=-1), "min_new_per_batch"),
        (lambda: FIFO(4, min_new_per_batch=5), "min_new_per_batch"),
        (lambda: FIRO(4, reads=0), "reads"),
        (lambda: FIRO(4, watermark=5), "watermark"),
        (lambda: Reservoir(4, watermark=-1), "watermark"),
        (lambda: Reservoir(4, replacement="lifo"), "replacement"),
        (lambda: Reservoir(4, seed=-1), "seed"),
    ],
)
def test_bad_hyperparameters(make, name):
    with pytest.raises(ValueError, match=f"`{name}`"):
        make()


@pytest.mark.parametrize(
    "make, name",
    [
        (lambda: FIFO(2.5), "capacity"),
        (lambda: FIFO(True), "capacity"),
        (lambda: FIRO(4, reads=1.0), "reads"),
        (lambda: FIRO(4, watermark="3"), "watermark"),
        (lambda: Reservoir(4, seed=0.5), "seed"),
    ],
)
def test_wrongly_typed_hyperparameters(untyped, make, name):
    with pytest.raises(ValueError, match=f"`{name}`"):
        make()


def test_bad_put():
    buffer = FIFO(2)
    state = buffer.init(EXAMPLE)
    with pytest.raises(ValueError, match="`sample`.*'p', 'u'"):
        buffer.put(state, {"u": EXAMPLE["u"]}, (0, 0))
    with pytest.raises(ValueError, match=r"`sample\['u'\]`.*shape \(2, 3\)"):
        buffer.put(state, {**EXAMPLE, "u": np.zeros((3, 2), np.float32)}, (0, 0))
    with pytest.raises(ValueError, match=r"`sample\['p'\]`.*dtype int64"):
        buffer.put(state, {**EXAMPLE, "p": np.zeros(2, np.int32)}, (0, 0))
    with pytest.raises(ValueError, match="`sample_id`"):
        buffer.put(state, EXAMPLE, (-1, 0))
    with pytest.raises(ValueError, match="`state`"):
        buffer.put(FIFO(3).init(EXAMPLE), EXAMPLE, (0, 0))
    with pytest.raises(ValueError, match="`example`"):
        buffer.init({})
    assert buffer.stats(state)["n_put"] == 0  # nothing half-written


def test_firo_defaults_read_each_sample_once_without_waiting():
    """FIRO's documented defaults: `reads=1` (a sample leaves after one read)
    and `watermark=0` (reads start with the first batch's worth stored); the
    reservoir's `replacement="seen"`."""
    buffer = FIRO(4)
    assert (buffer.reads, buffer.watermark, Reservoir(4).replacement) == (1, 0, "seen")
    state = _put(buffer, buffer.init(EXAMPLE), 0)
    state, _, ids = _get(buffer, state, 1, _key(0), ended=False)  # one stored is enough
    assert ids.tolist() == [[0, 0]]
    assert buffer.stats(state)["size"] == 0  # read once: gone (reads=2 keeps it)


def test_badly_typed_sample_id(untyped):
    buffer = FIFO(2)
    with pytest.raises(ValueError, match="`sample_id`"):
        buffer.put(buffer.init(EXAMPLE), EXAMPLE, ("run", 1))


def test_bad_batch_size_and_a_draw_that_cannot_serve():
    buffer = Reservoir(4, min_new_per_batch=2)
    with pytest.raises(ValueError, match="`batch_size` must be a positive integer, got 0"):
        buffer.check_batch_size(0)
    with pytest.raises(ValueError, match="`batch_size` must be at most the capacity 4, got 5"):
        buffer.check_batch_size(5)
    with pytest.raises(
        ValueError, match="`min_new_per_batch` \\(2\\) must be at most `batch_size`"
    ):
        buffer.check_batch_size(1)
    assert buffer.check_batch_size(3) == 3
    state = buffer.init(EXAMPLE)
    for i in range(4):
        state = _put(buffer, state, i)
    state, _, _ = _get(buffer, state, 3, _key(0), ended=False)  # leaves 1 unread < 2
    before = jax.tree.map(np.copy, state)
    assert buffer.draw(state, 3, _key(1), ended=False) is None
    jax.tree.map(np.testing.assert_array_equal, before, state)  # untouched
    with pytest.raises(ValueError, match="`state` must be a BufferState"):
        buffer.draw(FIFO(2).init(EXAMPLE), 1, _key(0), ended=False)


@pytest.mark.parametrize(
    "buffer", [FIFO(4), FIRO(4, reads=3), Reservoir(4)], ids=["FIFO", "FIRO", "Reservoir"]
)
def test_a_draw_larger_than_the_capacity_is_refused(buffer):
    """Before, `draw` of 5 from a buffer of 4 returned `None` ("not now") for
    ever, and a caller waited for ever (FIRO's drain, whose reads outnumber
    its slots, even served batches of repeats)."""
    state = buffer.init(EXAMPLE)
    for i in range(4):
        state = _put(buffer, state, i)
    for ended in (False, True):
        with pytest.raises(ValueError, match="`batch_size` must be at most the capacity 4, got 5"):
            buffer.draw(state, 5, _key(0), ended=ended)
    assert buffer.stats(state)["n_batches"] == 0


def test_the_stream_checks_the_batch_size_against_its_buffer_once(tmp_path, monkeypatch):
    """Where a buffer meets its batch size (the sample stream) the size is
    checked, once, with the public `check_batch_size` (`draw` checks its own
    argument too)."""
    study = Study(
        simulation="pkg.mod.solver", space=ParameterSpace({"a": (0.0, 1.0)}), n_runs=2, n_steps=2
    )
    make = functools.partial(
        SampleStream, study, example=EXAMPLE, launcher=LocalLauncher(), workdir=tmp_path
    )
    with pytest.raises(ValueError, match="`batch_size` must be at most the capacity 4, got 5"):
        make(FIFO(4), batch_size=5)
    calls = []
    check = AbstractBuffer.check_batch_size
    monkeypatch.setattr(
        AbstractBuffer, "check_batch_size", lambda self, n: calls.append(n) or check(self, n)
    )
    stream = make(FIFO(4), batch_size=2)
    for i in range(4):
        stream.samples.put({**_sample(i), "params": np.zeros(1, np.float32)}, (0, i))
    assert stream.samples.take(_key(0), ended=False) is not None
    assert stream.samples.take(_key(1), ended=False) is not None
    assert calls == [2]
