"""Exact boundary conditions through distance-function factors."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from sciml import insr


def test_exact_boundary_field_meets_the_column_constraints_to_round_off():
    """Rollers on the left (u_x = 0), bottom and top (u_y = 0) of [−1, 1] × [−¼, ¼]."""
    problem = insr.Elasticity2D.scene("column", exact_boundary=True)
    network = insr.SIREN(2, 2, width=16, hidden_layers=2, omega0=30.0, key=jax.random.key(0))
    field = problem.constrain(network)
    assert isinstance(field, insr.ExactBoundaryField)
    s = jnp.linspace(-1.0, 1.0, 101)
    t = jnp.linspace(-0.25, 0.25, 101)
    left = jax.vmap(field)(jnp.stack([jnp.full_like(t, -1.0), t], 1))
    bottom = jax.vmap(field)(jnp.stack([s, jnp.full_like(s, -0.25)], 1))
    top = jax.vmap(field)(jnp.stack([s, jnp.full_like(s, 0.25)], 1))
    np.testing.assert_array_equal(np.asarray(left[:, 0]), 0.0)
    np.testing.assert_array_equal(np.asarray(bottom[:, 1]), 0.0)
    np.testing.assert_array_equal(np.asarray(top[:, 1]), 0.0)
    # the free components are not constrained: the right face moves in x, the sides in y
    right = jax.vmap(field)(jnp.stack([jnp.full_like(t, 1.0), t], 1))
    assert np.abs(np.asarray(right[:, 0])).max() > 1e-3
    assert np.abs(np.asarray(left[1:-1, 1])).max() > 1e-3
    # φ against the closed form: φ_x = (x+1)/2, φ_y = (y+¼)(y−¼)/½²
    x = jnp.array([0.3, 0.1])
    expected = np.array([(0.3 + 1) / 2, (0.1 + 0.25) * (0.1 - 0.25) / 0.25])
    np.testing.assert_allclose(np.asarray(field.factor(x)), expected, rtol=1e-14)
    np.testing.assert_allclose(field(x), expected * network(x), rtol=1e-14)
    # no boundary points, hence no penalty rows
    assert problem.sample_boundary(jax.random.key(0), 100, jnp.float64).shape == (0, 2)


def test_exact_boundary_clamp_and_pin():
    constraints = (insr.Clamp("right"), insr.Pin((-1.0, 0.0)))
    problem = insr.Elasticity2D(constraints=constraints, exact_boundary=True)
    network = insr.SIREN(2, 2, width=8, hidden_layers=1, key=jax.random.key(1))
    field = problem.constrain(network)
    y = jnp.linspace(-1.0, 1.0, 11)
    right = jax.vmap(field)(jnp.stack([jnp.ones_like(y), y], 1))
    np.testing.assert_array_equal(np.asarray(right), 0.0)
    np.testing.assert_array_equal(np.asarray(field(jnp.array([-1.0, 0.0]))), 0.0)


def test_exact_boundary_refuses_prescribed_displacements():
    with pytest.raises(ValueError, match="zero displacements"):
        insr.Elasticity2D.scene("stretch", exact_boundary=True)
    # the penalty form leaves the network as it is
    network = insr.SIREN(2, 2, width=4, hidden_layers=1, key=jax.random.key(0))
    assert insr.Elasticity2D.scene("column").constrain(network) is network
