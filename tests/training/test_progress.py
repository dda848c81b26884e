"""`fit`'s progress in a log file: plain lines every N seconds, honest rates."""

import io

import jax
import jax.numpy as jnp
import optax

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
