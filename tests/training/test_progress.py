"""`fit`'s progress on a terminal and in a log file: honest rates, what it
waits for, the few values a reader needs, each line once."""

import io
import re
from types import SimpleNamespace

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from sciml.online import FIFO, FIRO, Reservoir, SampleStream
from sciml.online._buffered import BufferedSamples
from sciml.training import LineProgress, TrainSettings, _progress, fit


class Clock:
    def __init__(self):
        self.now = 0.0

    def __call__(self):
        return self.now


def test_lines_every_interval_with_rate_after_the_first_step(monkeypatch):
    clock = Clock()
    monkeypatch.setattr(_progress.time, "perf_counter", clock)
    out = io.StringIO()
    bar = LineProgress(1000, desc="train", interval=30.0, file=out)
    clock.now = 100.0  # the first step compiles: 100 s
    bar.update()
    for k in range(1, 600):  # then 8 steps a second (exact in binary): lines at t = 130, 160
        clock.now = 100.0 + 0.125 * k
        bar.update()
    bar.set_postfix(loss="0.5")
    bar.close()
    lines = out.getvalue().splitlines()
    assert "\r" not in out.getvalue()
    assert len(lines) == 2 + 1, lines  # 130 s, 160 s and the closing line
    # at t = 130 s: step 241, (241 - 1) steps in 30 s -> 8 steps/s, (1000 - 241) / 8 = 95 s left
    # (an estimate that counted the compiling step would say 240 / 130 s -> 7 minutes)
    assert lines[0] == "train: step 241/1000 (24%), 8 steps/s, eta 1m35s", lines[0]
    assert lines[1].startswith("train: step 481/1000 (48%), 8 steps/s, eta 1m05s"), lines[1]
    assert lines[2] == "train: step 600/1000 (60%), 8 steps/s, eta 50s, loss=0.5", lines[2]


def test_fit_writes_plain_lines_when_stderr_is_not_a_terminal(capsys):
    def loss_fn(model, batch, key):
        return jnp.sum((model - batch) ** 2), {}

    fit(
        jnp.zeros(3),
        loss_fn,
        lambda step, key: jnp.ones(3),
        optimizer=optax.sgd(0.1),
        key=jax.random.key(0),
        settings=TrainSettings(steps=20, progress=True, description="toy"),
    )
    err = capsys.readouterr().err
    assert "\r" not in err
    assert err.splitlines()[-1].startswith("toy: step 20/20 (100%)")


def test_terminal_bar_rate_and_eta_count_from_the_first_finished_step():
    clock = Clock()
    out = io.StringIO()
    bar = _progress._Bar(total=1000, desc="train", file=out, mininterval=0, ncols=100)
    bar._time, bar.start_t, bar.last_print_t = clock, 0.0, 0.0
    clock.now = 100.0  # the first step compiles: 100 s
    bar.update()
    assert bar.format_dict["rate"] is None  # no rate from one step: "?it/s", no ETA
    for k in range(1, 241):  # then 8 steps a second (exact in binary)
        clock.now = 100.0 + 0.125 * k
        bar.update()
    # 240 steps in 30 s -> 8 steps/s, (1000 - 241) / 8 = 94.9 s left; counting the
    # compiling step (tqdm's average, or its moving average) says about 2 steps/s, 6 min
    assert bar.format_dict["rate"] == 8.0
    assert re.search(r"\[02:10<01:34, +8.00it/s\]", str(bar)), str(bar)
    bar.close()
    assert bar not in _progress._ACTIVE


def test_waiting_for_data_is_shown_until_the_first_step():
    clock = Clock()
    out = io.StringIO()
    bar = LineProgress(100, desc="train", interval=30.0, file=out)
    bar._last_line = clock.now
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(_progress.time, "perf_counter", clock)
        for received, clock.now in ((3, 1.0), (5, 2.0), (9, 31.5)):
            _progress.show_status(
                f"waiting for simulations to fill the buffer ({received} of 16 samples)"
            )
        clock.now = 40.0
        bar.update()
        bar.close()
    assert out.getvalue().splitlines() == [  # at once, then once per interval, then the step
        "train: step 0/100 (0%), waiting for simulations to fill the buffer (3 of 16 samples)",
        "train: step 0/100 (0%), waiting for simulations to fill the buffer (9 of 16 samples)",
        "train: step 1/100 (1%)",
    ]
    _progress.show_status("nobody is shown this")  # no running fit: nothing, no error


@pytest.mark.parametrize(
    "buffer",
    [
        FIFO(capacity=32),
        FIRO(capacity=32, reads=2, watermark=12),
        Reservoir(capacity=32, watermark=20),
    ],
    ids=["fifo", "firo", "reservoir"],
)
def test_the_waiting_message_names_the_samples_the_first_batch_needs(buffer):
    """The `m` of "n of m samples" against the buffer itself: put samples one by
    one until a batch can be drawn."""
    batch_size = 8
    samples = BufferedSamples(buffer, {"u": np.zeros(2, np.float32)}, batch_size)
    stream = SimpleNamespace(batch_size=batch_size, buffer=buffer, samples=samples)
    key = jax.random.key(0)
    while samples.take(key, ended=False) is None:
        message = SampleStream._filling(stream)
        samples.put({"u": np.ones(2, np.float32)}, (0, samples.counters["received"]))
    needed = samples.counters["received"]
    assert needed == {"fifo": 8, "firo": 12, "reservoir": 20}[type(buffer).__name__.lower()]
    assert (
        message == f"waiting for simulations to fill the buffer ({needed - 1} of {needed} samples)"
    )


def test_progress_shows_loss_last_validation_and_samples_received_once_at_the_end(capsys):
    def loss_fn(model, batch, key):
        return jnp.sum((model - batch) ** 2), {"grad_scale": jnp.float32(1.0)}

    received = iter(range(10, 1000, 10))
    fit(
        jnp.zeros(3),
        loss_fn,
        lambda step, key: jnp.ones(3),
        optimizer=optax.sgd(0.1),
        key=jax.random.key(0),
        settings=TrainSettings(steps=20, progress=True, description="toy", eval_every=10),
        eval_fn=lambda model: {"val_rel_l2": jnp.sum(model), "val_mse": jnp.float32(0.5)},
        monitor=lambda: {"received": next(received), "fill": 0.25, "wait_fraction": 0.5},
    )
    lines = capsys.readouterr().err.splitlines()
    last = lines[-1]
    assert sum(line.startswith("toy: step 20/20") for line in lines) == 1, lines
    # the shown values, in this order and no others (fill and wait_fraction: metrics.jsonl)
    shown = [part.split("=")[0] for part in last.split(", ") if "=" in part]
    assert shown == ["loss", "val_rel_l2", "received"], last
    # the evaluation at step 20, after that step's log: sgd on sum((m - 1)^2) from 0 with
    # rate 0.1 gives m = 1 - 0.8^t, so sum(m) = 3 (1 - 0.8^20) (the step-10 value: 2.678)
    assert f"val_rel_l2={3 * (1 - 0.8**20):.4g}, received=20" in last, last


def test_a_line_due_at_the_last_step_is_written_once_with_the_last_loss(monkeypatch):
    clock = Clock()
    monkeypatch.setattr(_progress.time, "perf_counter", clock)
    out = io.StringIO()
    bar = LineProgress(3, desc="train", interval=30.0, file=out)
    for step, clock.now in ((1, 1.0), (2, 2.0)):
        bar.set_postfix({"loss": f"0.{step}"})
        bar.update()
    clock.now = 100.0  # a line is due when the last step ends, before its loss is logged
    bar.update()
    bar.set_postfix({"loss": "0.3"})
    bar.close()
    bar.close()
    assert out.getvalue().splitlines() == ["train: step 3/3 (100%), 0.0202 steps/s, loss=0.3"]
    # stopped (Ctrl-C) just after a line: closing adds nothing new, so no second line
    out = io.StringIO()
    bar = LineProgress(10, desc="train", interval=30.0, file=out)
    clock.now = 101.0
    bar.update()
    clock.now = 140.0
    bar.update()
    bar.close()
    assert out.getvalue().splitlines() == ["train: step 2/10 (20%), 0.0256 steps/s, eta 5m12s"]


def test_a_note_goes_above_a_bar_drawn_on_a_terminal(monkeypatch):
    # Before: a signal's note was printed after the bar's text, on its line.
    terminal = io.StringIO()
    terminal.isatty = lambda: True
    monkeypatch.setattr("sys.stderr", terminal)
    bar = _progress.progress_bar(10, initial=0, desc="train", disable=False)
    bar.update(3)
    _progress.note("train: SIGINT received; checkpointing when the step in progress has finished")
    bar.close()
    pieces = re.split(r"[\r\n]", terminal.getvalue())
    assert any(p.startswith("train: SIGINT received;") for p in pieces), terminal.getvalue()
    assert "3/10" in terminal.getvalue()  # the bar was drawn
