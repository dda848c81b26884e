"""The INSR elasticity config, run end to end in its tiny variant."""

import json
from pathlib import Path

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from experiments import run
from experiments.tasks.insr_elasticity import P1Field, build
from sciml import insr


CONFIG = str(Path(__file__).parents[2] / "experiments" / "configs" / "insr_elasticity.py")


@pytest.mark.slow
def test_tiny_config_runs_and_compares(tmp_path):
    config = run.load_config(CONFIG + ":tiny")
    summary = run.main_from_config(config, tmp_path)
    on_disk = json.loads((tmp_path / "summary.json").read_text())
    for key in ("error", "floor", "grid_first_order", "seconds_per_step"):
        assert np.isfinite(on_disk[key]) and on_disk[key] >= 0
    assert on_disk["grid_second_order"] is None and "P2" in on_disk["note"]
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


def test_p1_field_reproduces_affine_displacements():
    # P1 interpolation is exact for affine fields
    nodes = np.stack(
        np.meshgrid(np.linspace(-1, 1, 5), np.linspace(-0.5, 0.5, 3), indexing="ij"), -1
    )
    A, c = np.array([[0.3, -0.2], [0.1, 0.4]]), np.array([0.05, -0.1])
    field = P1Field(jnp.asarray(nodes @ A.T + c), (-1.0, -0.5), (1.0, 0.5))
    x = jax.random.uniform(
        jax.random.key(0), (50, 2), minval=jnp.array([-1, -0.5]), maxval=jnp.array([1, 0.5])
    )
    np.testing.assert_allclose(jax.vmap(field)(x), x @ A.T + c, atol=1e-13)
    np.testing.assert_allclose(
        jax.vmap(jax.jacfwd(field))(x), np.broadcast_to(A, (50, 2, 2)), atol=1e-12
    )


@pytest.mark.parametrize(("key", "value"), [("problem.scene", "bounce"), ("solver.name", "bfgs")])
def test_unknown_names(key, value):
    config = run.load_config(CONFIG + ":tiny")
    parent, _, leaf = key.rpartition(".")
    config[parent][leaf] = value
    with pytest.raises(ValueError, match="unknown"):
        build(config)
