"""The INSR advection config, run end to end in its tiny variant."""

import math
import types
from pathlib import Path

import equinox as eqx
import jax.numpy as jnp
import numpy as np
import pytest

from experiments import run
from experiments.tasks.insr.insr_advection1d import build, spectral_floor
from sciml import insr
from tests.experiments._insr_run import run_tiny


CONFIG = str(Path(__file__).parents[2] / "experiments" / "configs" / "insr_advection1d.py")


def test_tiny_config_runs_and_compares(tmp_path):
    config, summary, on_disk = run_tiny(CONFIG, tmp_path)
    # 3 steps of Δt = 0.05: the grids and the floor are accurate references
    assert summary["floor"] < summary["grid_second_order"] < summary["grid_first_order"]
    assert summary["error"] < 0.05  # a 141-weight field fitted in 10 iterations
    assert summary["n_steps"] == 3 and summary["param_bytes"] == 4 * summary["n_params"]
    times = np.load(tmp_path / "times.npy")
    np.testing.assert_allclose(times, [0.0, 0.05, 0.1, 0.15])
    problem, field, integrator, _ = build(config)
    like = eqx.filter_vmap(lambda _: field)(np.arange(4))
    restored = eqx.tree_deserialise_leaves(tmp_path / "weights.eqx", like)
    assert insr.field_at(restored, 0).layers[0].weight.shape == (10, 1)
    for plot in ("fields.png", "errors.png"):
        assert (tmp_path / "plots" / plot).is_file()


def one_mode_floor(integrator_name, m, dt, n_steps):
    """The floor of `u₀ = cos(k(x − lo))`, `k = 2πm/L`, on the tiny config's
    velocity and periodic nodes, with the integrator `integrator_name`; returns
    the floor `(n_steps + 1, n_nodes)`, the nodes, `k` and `z = a k Δt`."""
    config = run.load_config(CONFIG + ":tiny")
    config.integrator = integrator_name
    problem, _, integrator, _ = build(config)
    lo, hi = problem.lower, problem.upper
    k = 2 * math.pi * m / (hi - lo)
    mode = types.SimpleNamespace(
        velocity=problem.velocity, initial_condition=lambda x: jnp.cos(k * (x - lo))
    )
    nodes = np.linspace(lo, hi, 101)
    floor = spectral_floor(integrator, mode, nodes, dt, n_steps)
    return floor, nodes, k, problem.velocity * k * dt


def amplitude_and_phase(values, nodes, k):
    """`(R, φ)` with `values = R cos(k(x − lo) − φ)` on the periodic nodes (projection)."""
    xi = k * (nodes[:-1] - nodes[0])
    c = 2 * np.mean(values[:-1] * np.cos(xi))
    s = 2 * np.mean(values[:-1] * np.sin(xi))
    return math.hypot(c, s), math.atan2(s, c)


def test_floor_matches_midpoint_closed_form():
    """One Fourier mode on the periodic nodes: the floor is `Re(gⁿ e^{ik(x−lo)})`
    with `g = (1 − iz/2)/(1 + iz/2)` (`u_t = −a u_x`, `z = akΔt`): amplitude 1,
    phase lag `2n·atan(z/2)`, i.e. the mode moves right (a > 0)."""
    dt, n_steps = 0.5, 3
    floor, nodes, k, z = one_mode_floor("midpoint", 3, dt, n_steps)
    xi = k * (nodes - nodes[0])
    for n in range(n_steps + 1):
        lag = 2 * n * math.atan(z / 2)
        # measured 1e-15; a wavenumber of the wrong sign shifts the mode left (phase
        # +lag): error 1.08 already at n = 1
        np.testing.assert_allclose(floor[n], np.cos(xi - lag), atol=1e-12)
        amplitude, phase = amplitude_and_phase(floor[n], nodes, k)
        np.testing.assert_allclose(amplitude, 1.0, rtol=1e-12)
        np.testing.assert_allclose(phase, math.remainder(lag, 2 * math.pi), atol=1e-12)


def test_floor_matches_implicit_euler_closed_form():
    """Implicit Euler, `g = 1/(1 + iz)`: amplitude `(1 + z²)^(−n/2)`, phase lag `n·atan z`."""
    dt, n_steps = 0.5, 3
    floor, nodes, k, z = one_mode_floor("implicit_euler", 2, dt, n_steps)
    for n in range(n_steps + 1):
        amplitude, phase = amplitude_and_phase(floor[n], nodes, k)
        # measured 1e-16; bounds 1e-12
        np.testing.assert_allclose(amplitude, (1 + z**2) ** (-n / 2), rtol=1e-12)
        np.testing.assert_allclose(phase, math.remainder(n * math.atan(z), 2 * math.pi), atol=1e-12)
    # the floor of a Gaussian keeps its mass (the k = 0 mode has g = 1)
    config = run.load_config(CONFIG + ":tiny")
    problem, _, integrator, _ = build(config)
    gaussian = spectral_floor(integrator, problem, nodes, 0.05, 3)
    np.testing.assert_allclose(gaussian[:, :-1].sum(axis=1), gaussian[0, :-1].sum(), rtol=1e-12)


@pytest.mark.parametrize(("key", "value"), [("integrator", "rk4"), ("solver.name", "bfgs")])
def test_unknown_names(key, value):
    config = run.load_config(CONFIG + ":tiny")
    parent, _, leaf = key.rpartition(".")
    (config[parent] if parent else config)[leaf] = value
    with pytest.raises(ValueError, match="unknown"):
        build(config)


TG_CONFIG = str(Path(__file__).parents[2] / "experiments" / "configs" / "insr_taylor_green.py")


@pytest.mark.slow  # ~45 s on 2 CPU cores (compiling three sub-solves per step)
def test_taylor_green_tiny_config_runs_and_compares(tmp_path):
    config, summary, on_disk = run_tiny(TG_CONFIG, tmp_path)
    # 2 steps of Δt = 0.05: floor (cubic 32²) < cubic 16² < bilinear 16²
    assert summary["floor"] < summary["grid_second_order"] < summary["grid_first_order"]
    assert summary["error"] < 0.05  # an 8-wide SIREN fitted in 10 iterations
    assert summary["n_steps"] == 2 and summary["param_bytes"] == 4 * summary["n_params"]
    np.testing.assert_allclose(np.load(tmp_path / "times.npy"), [0.0, 0.05, 0.1])
    from experiments.tasks.insr.insr_taylor_green import build

    _, field, integrator, _ = build(config)
    like = eqx.filter_vmap(lambda _: field)(np.arange(3))
    restored = eqx.tree_deserialise_leaves(tmp_path / "weights.eqx", like)
    assert insr.field_at(restored, 0).layers[0].weight.shape == (8, 2)
    eqx.tree_deserialise_leaves(tmp_path / "pressure.eqx", integrator.pressure)
    for plot in ("fields.png", "errors.png"):
        assert (tmp_path / "plots" / plot).is_file()
