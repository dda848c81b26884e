"""The shipped generator loads without pickle and reproduces the iteration
count recorded beside its weights."""

import jax.numpy as jnp
import pytest

from sciml.dcdm import MultilevelDCDMNet, direction_fn, pretrained, pretrained_info, solve
from solvers.poisson import FLUID, PoissonOperator, make_scene, random_rhs


def recorded_solve(net, scene: dict, rhs: dict, rtol: float, n_orthogonal: int = 2) -> int:
    """Iterations of DCDM with `net` on the recorded scene (float64 outer loop)."""
    labels = make_scene(
        scene["resolution"],
        dim=2,
        seed=scene["seed"],
        n_obstacles=scene["n_obstacles"],
        free_surface=scene["free_surface"],
    )
    b = jnp.asarray(random_rhs(labels, seed=rhs["seed"], kind=rhs["kind"]), jnp.float64)
    f = direction_fn(net, jnp.asarray(labels == FLUID, jnp.float32))
    sol = solve(PoissonOperator(labels), b, f, rtol=rtol, max_steps=1000, n_orthogonal=n_orthogonal)
    return int(sol.stats["num_steps"])


def test_pretrained_reproduces_its_recorded_iteration_count():
    net = pretrained("poisson2d")
    assert isinstance(net, MultilevelDCDMNet)
    info = pretrained_info("poisson2d")
    recorded = info["recorded"]
    iterations = recorded_solve(
        net, recorded["scene"], recorded["rhs"], recorded["rtol"], recorded["n_orthogonal"]
    )
    # the same count (floating-point reordering could move it by one step)
    assert abs(iterations - recorded["iterations"]) <= 1, (iterations, recorded)
    assert "experiments.run" in info["training_command"]


def test_unknown_name_is_refused():
    with pytest.raises(ValueError, match="`name` must be one of"):
        pretrained("poisson3d")
