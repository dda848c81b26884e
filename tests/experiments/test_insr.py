"""The INSR advection config, run end to end in its tiny variant."""

import json
from pathlib import Path

import equinox as eqx
import numpy as np
import pytest

from experiments import run
from experiments.tasks.insr_advection1d import build, spectral_floor
from sciml import insr


CONFIG = str(Path(__file__).parents[2] / "experiments" / "configs" / "insr_advection1d.py")


def test_tiny_config_runs_and_compares(tmp_path):
    config = run.load_config(CONFIG + ":tiny")
    summary = run.main_from_config(config, tmp_path)
    on_disk = json.loads((tmp_path / "summary.json").read_text())
    for key in ("error", "floor", "grid_first_order", "grid_second_order", "seconds_per_step"):
        assert np.isfinite(on_disk[key]) and on_disk[key] >= 0
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


def test_floor_matches_midpoint_closed_form():
    """One Fourier mode on the periodic nodes: the floor is `g^n` exactly."""
    config = run.load_config(CONFIG + ":tiny")
    problem, _, integrator, _ = build(config)
    nodes = np.linspace(-2.0, 2.0, 101)
    floor = spectral_floor(integrator, problem, nodes, 0.05, 3)
    # the floor of the Gaussian keeps its mass (the k = 0 mode has g = 1)
    np.testing.assert_allclose(floor[:, :-1].sum(axis=1), floor[0, :-1].sum(), rtol=1e-12)


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
    config = run.load_config(TG_CONFIG + ":tiny")
    summary = run.main_from_config(config, tmp_path)
    on_disk = json.loads((tmp_path / "summary.json").read_text())
    for key in ("error", "floor", "grid_first_order", "grid_second_order", "seconds_per_step"):
        assert np.isfinite(on_disk[key]) and on_disk[key] >= 0
    # 2 steps of Δt = 0.05: floor (cubic 32²) < cubic 16² < bilinear 16²
    assert summary["floor"] < summary["grid_second_order"] < summary["grid_first_order"]
    assert summary["error"] < 0.05  # an 8-wide SIREN fitted in 10 iterations
    assert summary["n_steps"] == 2 and summary["param_bytes"] == 4 * summary["n_params"]
    np.testing.assert_allclose(np.load(tmp_path / "times.npy"), [0.0, 0.05, 0.1])
    from experiments.tasks.insr_taylor_green import build

    _, field, integrator, _ = build(config)
    like = eqx.filter_vmap(lambda _: field)(np.arange(3))
    restored = eqx.tree_deserialise_leaves(tmp_path / "weights.eqx", like)
    assert insr.field_at(restored, 0).layers[0].weight.shape == (8, 2)
    eqx.tree_deserialise_leaves(tmp_path / "pressure.eqx", integrator.pressure)
    for plot in ("fields.png", "errors.png"):
        assert (tmp_path / "plots" / plot).is_file()
