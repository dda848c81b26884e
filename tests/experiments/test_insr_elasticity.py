"""The INSR elasticity config, run end to end in its tiny variant."""

from pathlib import Path

import equinox as eqx
import numpy as np
import pytest

from experiments import run
from experiments.tasks.insr.insr_elasticity import build, mesh_stepper, validate_config
from sciml import insr
from sciml.experiment import ConfigError
from solvers.mesh_fields import p1_field, quadrature_points
from tests.experiments._insr_run import run_tiny


CONFIG = str(Path(__file__).parents[2] / "experiments" / "configs" / "insr_elasticity.py")


@pytest.mark.slow
def test_tiny_config_runs_and_compares(tmp_path):
    config, summary, on_disk = run_tiny(CONFIG, tmp_path)
    assert "P2" in on_disk["note"]
    # the column's exact one-mode field meets implicit Euler's energy ratio to the
    # sampling error of 400 points (measured 0.020)
    assert summary["floor"] < 0.05
    assert summary["n_steps"] == 3 and summary["param_bytes"] == 4 * summary["n_params"]
    np.testing.assert_allclose(np.load(tmp_path / "times.npy"), [0.0, 0.08, 0.16, 0.24])
    _, field, *_ = build(config)
    like = eqx.filter_vmap(lambda _: field)(np.arange(4))
    restored = eqx.tree_deserialise_leaves(tmp_path / "weights.eqx", like)
    assert insr.field_at(restored, 0).layers[0].weight.shape == (10, 2)
    for plot in ("deformed.png", "energy.png"):
        assert (tmp_path / "plots" / plot).is_file()


@pytest.mark.parametrize(("key", "value"), [("problem.scene", "bounce"), ("solver.name", "bfgs")])
def test_unknown_names(key, value):
    config = run.load_config(CONFIG + ":tiny")
    parent, _, leaf = key.rpartition(".")
    config[parent][leaf] = value
    with pytest.raises(ValueError, match="unknown"):
        build(config)


def test_the_grid_alone_is_accepted_and_no_points_at_all_refused():
    config = run.load_config(CONFIG + ":tiny")
    config.solver.n_points, config.solver.n_grid = 0, 64
    validate_config(config)  # the least-squares solver on its quadrature grid alone
    config.solver.n_grid = 0
    with pytest.raises(ConfigError, match="solver.n_points"):
        validate_config(config)
    config.solver.n_grid, config.solver.name = 64, "adam"  # Adam draws its own points
    with pytest.raises(ConfigError, match="solver.n_points"):
        validate_config(config)


def test_mesh_quadrature_needs_the_least_squares_solver():
    config = run.load_config(CONFIG + ":tiny")
    config.solver.mesh_quadrature = 1
    problem, _, integrator, *_ = build(config)
    mesh = p1_field(problem, 40)
    solver = mesh_stepper(config, integrator, mesh).solver
    np.testing.assert_array_equal(solver.collocation.quadrature, quadrature_points(mesh, 1))
    assert solver.collocation.n_points == 0
    config.solver.name = "adam"
    _, _, integrator, *_ = build(config)
    with pytest.raises(ValueError, match="mesh_quadrature"):
        mesh_stepper(config, integrator, mesh)
