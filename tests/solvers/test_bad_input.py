"""Bad input to the solvers and to `python -m solvers.generate`: each fails early
with a message naming the argument (or a one-line error and exit status 2).

Each case here returned a wrong answer or a traceback before these checks: the
solvers returned all-NaN fields from one NaN; Navier–Stokes far above its time
step limit returned NaN with no warning; `taylor_green(15)` returned a field
the solver rejects; the CLI printed tracebacks.
"""

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import h5py
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from solvers import burgers, darcy, generate, heat, navier_stokes as ns
from solvers.stepping import rollout


ROOT = Path(__file__).resolve().parents[2]


def _poisoned(shape, value=np.nan):
    x = np.ones(shape)
    x[(0,) * len(shape)] = value
    return x


def test_non_finite_inputs_are_refused_at_the_entry_points():
    params = ns.NSParams(viscosity=1e-3, dt=1e-3)
    with pytest.raises(ValueError, match=r"`w0` must be finite, got 1 NaN"):
        ns.solve(_poisoned((16, 16)), params, [1e-3])
    with pytest.raises(ValueError, match=r"`w` must be finite, got 0 NaN and 1 infinite"):
        ns.advance(_poisoned((2, 16, 16), np.inf), params, 1)
    with pytest.raises(ValueError, match="`theta` must be finite"):
        heat.solve(_poisoned((2, 5)), 9, heat.HeatParams(), [1e-3])
    with pytest.raises(ValueError, match="`field` must be finite"):
        heat.advance(_poisoned((9, 9)), heat.HeatParams(), 1)
    with pytest.raises(ValueError, match="`u0` must be finite"):
        burgers.solve(_poisoned((16,)), burgers.BurgersParams(), [1e-3])
    # A stepper called eagerly checks its field too.
    with pytest.raises(ValueError, match="`u` must be finite"):
        ns.NavierStokes(16, dtype=jnp.float64)(jnp.asarray(_poisoned((1, 16, 16))))


def test_an_integer_field_is_refused_by_the_poisson_operator(untyped):
    # Before: A x was computed in integer arithmetic (and returned as integers).
    from solvers.poisson import PoissonOperator, apply_poisson

    labels = np.zeros((4, 4), int)  # all FLUID
    x = np.arange(16).reshape(4, 4)
    with pytest.raises(TypeError, match=r"`x` must be a floating-point array .* got dtype int"):
        PoissonOperator(labels)(x)
    with pytest.raises(TypeError, match=r"`x` must be a floating-point array .* got dtype int"):
        apply_poisson(labels, jnp.asarray(x))


def test_darcy_right_hand_side_of_another_grid_names_f():
    # Before: numpy's "operands could not be broadcast together with remapped shapes".
    with pytest.raises(
        ValueError,
        match=r"`f` must be a number or an array of the node grid "
        r"of `a` \(8, 8\), got shape \(6, 6\)",
    ):
        darcy.solve(np.ones((8, 8)), np.ones((6, 6)))


def test_no_check_under_jit():
    # Traced values pass unchecked (no host callback in the compiled loop): the
    # NaN propagates, as documented.
    stepper = heat.Heat(9, dtype=jnp.float64)
    out = jax.jit(lambda u: stepper(u))(jnp.asarray(_poisoned((1, 9, 9))))
    assert np.isnan(np.asarray(out)).any()


def test_advective_cfl_matches_taylor_green_closed_form():
    # For w = A sin(2πkx) sin(2πky): ψ = w/(8π²k²), max|u| = max|v| = A/(4πk)
    # (attained on the grid when 4k divides s), so y = dt·2π·k_max·A/(2πk).
    s, k, amplitude, dt = 32, 2, 3.0, 1e-2
    w = ns.taylor_green(s, k, amplitude, jnp.float64)
    k_max = 10  # largest |k| with 3|k| < 32
    expected = dt * k_max * amplitude / k
    np.testing.assert_allclose(ns.advective_cfl(w, dt), expected, rtol=1e-12)
    np.testing.assert_allclose(ns.advective_cfl(w, dt, dealias=False), dt * 16 * amplitude / k)


def test_time_step_far_above_the_limit_is_refused(smooth_field_64):
    w0 = smooth_field_64
    y_per_dt = ns.advective_cfl(w0, 1.0)
    dt_bad = 3.0 / y_per_dt  # y = 3
    params = ns.NSParams(viscosity=1e-3, dt=dt_bad)
    with pytest.raises(ValueError, match="advective CFL number 3"):
        ns.solve(w0, params, [50 * dt_bad])
    with pytest.raises(ValueError, match="advective CFL number 3"):
        ns.advance(w0, params, 50)
    # The refused case does blow up: run the same steps without the entry-point
    # check (a jitted rollout of the stepper).
    stepper = ns.NavierStokes(64, viscosity=1e-3, dt=dt_bad, dtype=jnp.float64)
    out = jax.jit(rollout(stepper, 150))(jnp.asarray(w0)[None])  # NaN from step 79
    assert not np.isfinite(np.asarray(out)).all()
    # Between the working limit and the refusal: a warning.
    dt_warn = 1.8 / y_per_dt
    with pytest.warns(RuntimeWarning, match="advective CFL number 1.8"):
        ns.solve(w0, ns.NSParams(viscosity=1e-3, dt=dt_warn), [dt_warn])


@pytest.fixture(scope="module")
def smooth_field_64():
    return np.asarray(ns.random_vorticity(jax.random.key(0), 1, 64, dtype=jnp.float64)[0])


@pytest.mark.parametrize(
    "args, match",
    [((15,), "even"), ((16, 8), "k"), ((16, 0), "k"), ((3,), "even")],
)
def test_taylor_green_refuses_what_the_solver_refuses(args, match):
    with pytest.raises(ValueError, match=match):
        ns.taylor_green(*args)


def _cli(*args, timeout=300):
    env = dict(os.environ, PYTHONPATH=str(ROOT), JAX_PLATFORMS="cpu")
    return subprocess.run(
        [sys.executable, "-m", "solvers.generate", *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=timeout,
    )


def _one_line_error(result, *words):
    assert result.returncode == 2, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "error" in lines[0], result.stderr
    assert "Traceback" not in result.stderr
    for word in words:
        assert word in lines[0], (word, lines[0])


def test_cli_bad_arguments_are_one_line_errors(tmp_path):
    base = ["heat", "--n", "2", "--resolution", "9", "--no-progress"]
    out = ["--out", str(tmp_path / "a.h5")]
    _one_line_error(_cli(*base, *out, "--set", "n_steps=abc"), "n_steps", "int")
    _one_line_error(_cli(*base, *out, "--set", "dt=fast"), "dt", "float")
    _one_line_error(_cli(*base, *out, "--set", "n_steps=2.5"), "n_steps")
    _one_line_error(_cli(*base, "--out", str(tmp_path)), "--out", "directory")
    text = tmp_path / "notes.h5"
    text.write_text("not hdf5")
    _one_line_error(_cli(*base, "--out", str(text)), "--out", "not an HDF5 file")
    assert text.read_text() == "not hdf5"
    _one_line_error(_cli(*base, *out, "--n", "many"), "--n")
    _one_line_error(_cli("wave", *base[1:], *out), "problem")
    _one_line_error(_cli(*base, *out, "--set", "noequals"), "key=value")
    _one_line_error(_cli(*base, *out, "--n", "0"), "--n")
    assert not (tmp_path / "a.h5").exists()


def test_set_types_are_checked_in_the_api(tmp_path):
    with pytest.raises(ValueError, match="--set viscosity: expected float"):
        generate.generate("burgers", 1, 8, tmp_path / "b.h5", params={"viscosity": "0.1"})
    with pytest.raises(ValueError, match="--set n_records: expected int"):
        generate.generate("burgers", 1, 8, tmp_path / "b.h5", params={"n_records": True})
    assert not (tmp_path / "b.h5").exists()


def _wait_for_done_samples(path, proc, deadline):
    while time.monotonic() < deadline:
        assert proc.poll() is None, proc.stderr.read()
        if path.exists():
            try:
                with h5py.File(path, "r", locking=False) as f:
                    if "done" in f and f["done"][...].any():
                        return
            except (OSError, KeyError):
                pass
        time.sleep(0.2)
    raise AssertionError("no sample finished in time")


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_cli_interrupt_keeps_finished_samples_and_says_how_to_resume(tmp_path, sig):
    path = tmp_path / "d.h5"
    args = ["darcy", "--n", "100000", "--resolution", "9", "--out", str(path)]
    args += ["--chunk", "1", "--no-progress"]
    env = dict(os.environ, PYTHONPATH=str(ROOT), JAX_PLATFORMS="cpu")
    proc = subprocess.Popen(
        [sys.executable, "-m", "solvers.generate", *args],
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    try:
        _wait_for_done_samples(path, proc, time.monotonic() + 240)
        proc.send_signal(sig)
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, err
    assert "Traceback" not in err
    lines = err.strip().splitlines()
    assert lines[0] == "interrupted; finished samples are kept. Resume with:"
    assert lines[1].strip() == "python -m solvers.generate " + " ".join(args)
    with h5py.File(path, "r") as f:
        done = f["done"][...]
        k = int(done.sum())
        assert 0 < k < 100000 and done[:k].all()  # chunks finish in order
        inputs, outputs = f["inputs"][:k, 0], f["outputs"][:k, 0]
    ref = darcy.make_dataset(k, 9, seed=0)
    np.testing.assert_array_equal(inputs, ref["inputs"].astype(np.float32))
    np.testing.assert_array_equal(outputs, ref["outputs"].astype(np.float32))
