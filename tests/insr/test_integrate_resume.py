"""`integrate` in compiled chunks, with progress, checkpoints and resume.

The chunked `integrate` is checked against a plain Python loop over the
integrator's own `step` (the obviously-correct reference); a run interrupted
after some chunks (in this process, and by SIGTERM in a subprocess) and resumed
from its checkpoint must end bit-identical to an uninterrupted one, and
a checkpoint of another run is refused.
"""

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import optimistix as optx
import pytest

from sciml import insr
from sciml.training import Checkpointer, CheckpointMismatchError, ChunkedRun


DT, CHUNK = 0.1, 2
SCRIPT = Path(__file__).with_name("_integrate_script.py")
ROOT = Path(__file__).parents[2]


def setup():
    problem = insr.Advection1D(0.25, -2.0, 2.0, periodic=True)
    siren = insr.SIREN(2, 1, width=8, hidden_layers=1, omega0=3.0, key=jax.random.key(0))
    field = insr.PeriodicEmbedding(siren, -2.0, 2.0)
    solver = insr.LeastSquaresSolver(
        optx.LevenbergMarquardt(rtol=1e-8, atol=1e-10),
        collocation=insr.Collocation(n_points=64),
        stopping=insr.Stopping(max_steps=4),
    )
    return field, insr.Midpoint(solver), problem


def run(n_steps, key=None, **kwargs):
    field, integrator, problem = setup()
    return insr.integrate(
        field,
        integrator,
        problem,
        0.0,
        n_steps * DT,
        DT,
        key=jax.random.key(1) if key is None else key,
        saveat=insr.SaveAt(steps=True),
        throw=False,
        **kwargs,
    )


def arrays(sol):
    """Every array of a run: the saved fields and the per-step records."""
    stats = {k: sol.stats[k] for k in ("loss", "loss_initial", "iterations", "step_result")}
    return jax.tree_util.tree_leaves((eqx.filter(sol.value, eqx.is_array), stats))


def assert_identical(a, b):
    for x, y in zip(arrays(a), arrays(b), strict=True):
        np.testing.assert_array_equal(np.asarray(x), np.asarray(y))


class StopAfter(ChunkedRun):
    """A `ChunkedRun` interrupted (as by Ctrl-C) when its `chunks`-th chunk is
    due, after the earlier ones have finished."""

    def __init__(self, directory, chunks):
        super().__init__(directory, progress=False)
        self.chunks = chunks

    def run(self, state, key, advance, **kwargs):
        calls = 0

        def interrupted(state, step):
            nonlocal calls
            calls += 1
            if calls > self.chunks:
                raise KeyboardInterrupt
            return advance(state, step)

        return super().run(state, key, interrupted, **kwargs)


@pytest.mark.slow
def test_chunks_match_a_step_by_step_loop():
    n = 5
    field, integrator, problem = setup()
    keys = jax.random.split(jax.random.key(1), n)
    step = eqx.filter_jit(integrator.step)
    fields, losses = [], []
    for i in range(n):
        sol, _ = step(field, problem, i * DT, DT, None, key=keys[i])
        field = sol.value
        fields.append(eqx.filter(field, eqx.is_array))
        losses.append(sol.stats["loss"])
    chunked = run(n, steps_per_chunk=CHUNK)  # 3 chunks, the last one half skipped
    # every step lowers its objective: the steps do something the comparison can see
    assert np.all(chunked.stats["loss"] < 0.1 * chunked.stats["loss_initial"])
    reference = jax.tree_util.tree_map(lambda *a: jnp.stack(a), *fields)
    got = jax.tree_util.tree_map(lambda a: a[1:], eqx.filter(chunked.value, eqx.is_array))
    # the compiled scan and the loop of jitted steps agree to a few ulps
    # (measured: identical here); 1e-12 still catches a step that is skipped,
    # repeated or given another key
    for a, b in zip(jax.tree_util.tree_leaves(got), jax.tree_util.tree_leaves(reference)):
        np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(chunked.stats["loss"], jnp.stack(losses), rtol=1e-10, atol=1e-20)
    np.testing.assert_allclose(chunked.stats["ts"], DT * np.arange(n + 1), rtol=1e-15)
    # one chunk of all steps, the default, gives the same run
    assert_identical(run(n), chunked)


def test_resumed_run_is_bit_identical(tmp_path, capsys):
    n = 6
    straight = run(n, steps_per_chunk=CHUNK, monitor=ChunkedRun(tmp_path / "straight"))
    progress = capsys.readouterr().err
    assert f"integrate: step {n}/{n}" in progress
    for shown in ("t=0.6", "loss=", "s_per_step="):
        assert shown in progress

    with pytest.raises(KeyboardInterrupt):
        run(n, steps_per_chunk=CHUNK, monitor=StopAfter(tmp_path / "cut", chunks=2))
    assert Checkpointer(tmp_path / "cut").latest_step() == 2 * CHUNK
    assert "resuming" not in capsys.readouterr().err
    resumed = run(n, steps_per_chunk=CHUNK, monitor=ChunkedRun(tmp_path / "cut"))
    assert f"resuming from step {2 * CHUNK} of {n}" in capsys.readouterr().err
    assert resumed.stats["resumed_from"] == 2 * CHUNK
    assert_identical(resumed, straight)
    assert_identical(run(n, steps_per_chunk=CHUNK), straight)  # the monitor changes nothing

    # a finished run called again resumes at its end and gives the same run
    assert_identical(run(n, steps_per_chunk=CHUNK, monitor=ChunkedRun(tmp_path / "cut")), straight)
    # another key is another run: its checkpoints are refused
    with pytest.raises(CheckpointMismatchError):
        run(n, jax.random.key(2), steps_per_chunk=CHUNK, monitor=ChunkedRun(tmp_path / "cut"))


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_a_signal_during_a_chunk_keeps_that_chunk(tmp_path, capsys, signum):
    """Ctrl-C or SIGTERM while the second chunk runs: that chunk still
    finishes and is checkpointed, then the run stops."""

    class SignalledRun(ChunkedRun):
        def run(self, state, key, advance, **kwargs):
            def signalled(state, step):
                if step == CHUNK:
                    os.kill(os.getpid(), signum)  # arrives before the chunk is computed
                return advance(state, step)

            return super().run(state, key, signalled, **kwargs)

    previous = signal.getsignal(signum)
    with pytest.raises(KeyboardInterrupt, match=signal.Signals(signum).name):
        run(6, steps_per_chunk=CHUNK, monitor=SignalledRun(tmp_path))
    assert Checkpointer(tmp_path).latest_step() == 2 * CHUNK  # the second chunk kept
    assert signal.getsignal(signum) is previous
    assert "received; checkpointing when the chunk in progress" in capsys.readouterr().err


@pytest.mark.slow
def test_sigterm_leaves_a_checkpoint_that_resumes(tmp_path):
    n = 400  # long enough to be mid-run when the signal comes
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    folder = tmp_path / "checkpoints"
    proc = subprocess.Popen(
        [sys.executable, str(SCRIPT), str(folder), str(n)], env=env, stderr=subprocess.PIPE
    )
    deadline = time.time() + 240
    while not (folder.is_dir() and Checkpointer(folder).latest_step()):
        assert proc.poll() is None, proc.stderr.read().decode()[-2000:]
        assert time.time() < deadline, "the subprocess wrote no checkpoint"
        time.sleep(0.2)
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode != 0 and "KeyboardInterrupt: signal SIGTERM" in err.decode()
    last = Checkpointer(folder).latest_step()
    assert 0 < last < n and last % CHUNK == 0

    resumed = run(n, steps_per_chunk=CHUNK, monitor=ChunkedRun(folder, progress=False))
    assert resumed.stats["resumed_from"] == last
    assert_identical(resumed, run(n, steps_per_chunk=CHUNK))


def test_bad_chunking_is_refused(tmp_path):
    with pytest.raises(ValueError, match="steps_per_chunk"):
        run(2, steps_per_chunk=0)
    with pytest.raises(ValueError, match="monitor"):
        run(2, monitor=str(tmp_path))
    field, integrator, problem = setup()

    @eqx.filter_jit
    def traced(field):
        return insr.integrate(
            field, integrator, problem, 0.0, DT, DT, key=jax.random.key(0),
            monitor=ChunkedRun(tmp_path),
        )  # fmt: skip

    with pytest.raises(ValueError, match="outside `jit`"):
        traced(field)


@pytest.mark.slow  # compiles a splitting step (three sub-solves)
def test_resume_restores_the_integrators_state(tmp_path):
    """Taylor–Green by splitting carries the pressure field from step to step:
    a run resumed after its first step ends bit-identical, pressure included."""
    from tests.insr.test_taylor_green import DT as TG_DT, pressure_field, solver, tg_field

    def splitting(monitor=None):
        return insr.integrate(
            tg_field(),
            insr.Splitting(pressure_field(), solver()),
            insr.TaylorGreen2D(0.0),
            0.0,
            2 * TG_DT,
            TG_DT,
            key=jax.random.key(1),
            saveat=insr.SaveAt(steps=True),
            throw=False,
            steps_per_chunk=1,
            monitor=monitor,
        )

    with pytest.raises(KeyboardInterrupt):
        splitting(StopAfter(tmp_path, chunks=1))
    assert Checkpointer(tmp_path).latest_step() == 1
    resumed, straight = splitting(ChunkedRun(tmp_path, progress=False)), splitting()
    assert resumed.stats["resumed_from"] == 1
    assert_identical(resumed, straight)
    pressures = [eqx.filter(s.stats["state"], eqx.is_array) for s in (resumed, straight)]
    for a, b in zip(*map(jax.tree_util.tree_leaves, pressures), strict=True):
        np.testing.assert_array_equal(a, b)
    # the pressure moved from its initial (zero) coefficients: the check has teeth
    assert float(jnp.max(jnp.abs(jax.tree_util.tree_leaves(pressures[0])[0]))) > 1e-6
