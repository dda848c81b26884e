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


def test_exact_boundary_field_refuses_prescribed_displacements():
    network = insr.SIREN(2, 2, width=4, hidden_layers=1, key=jax.random.key(0))
    with pytest.raises(ValueError, match="zero displacements only"):
        insr.ExactBoundaryField(
            network, (insr.Clamp("right", (2.0, 0.0)),), (-1.0, -1.0), (1.0, 1.0)
        )
    # the penalty form leaves the network as it is
    assert insr.Elasticity2D.scene("column").constrain(network) is network


def test_lifted_field_meets_the_clamped_stretch_to_round_off():
    """The paper's clamped stretch with `exact_boundary`: u = s·g + φ ⊙ N meets
    u = 0 on x = −1 and u = s·(2, 0) on x = 1 for any network, at every load
    scale s that `prescribe` sets from the ramp; the lift between two clamped
    faces is the linear interpolation g = (x + 1, 0)."""
    problem = insr.Elasticity2D.scene("clamped_stretch", exact_boundary=True, ramp_time=1.0)
    network = insr.SIREN(2, 2, width=8, hidden_layers=1, omega0=30.0, key=jax.random.key(0))
    field = problem.constrain(network)
    assert isinstance(field, insr.LiftedField)
    assert float(field.load) == 0.0  # the ramp starts at rest
    y = jnp.linspace(-1.0, 1.0, 101)
    faces = jax.jit(
        lambda f: (
            jax.vmap(f)(jnp.stack([-jnp.ones_like(y), y], 1)),
            jax.vmap(f)(jnp.stack([jnp.ones_like(y), y], 1)),
        )
    )
    for t in (0.25, 0.6, 1.0, 3.0):
        left, right = faces(problem.prescribe(field, t))
        np.testing.assert_array_equal(np.asarray(left), 0.0)
        # measured: exact (0 ulp); one ulp of 2 is 4.4e-16
        np.testing.assert_allclose(right[:, 0], 2 * min(t, 1.0), rtol=0, atol=1e-15)
        np.testing.assert_array_equal(np.asarray(right[:, 1]), 0.0)
    x = jax.random.uniform(jax.random.key(1), (50, 2), jnp.float64, -1.0, 1.0)
    lift = jax.vmap(field.lift)(x)
    np.testing.assert_allclose(lift, np.stack([x[:, 0] + 1, 0 * x[:, 0]], 1), rtol=1e-14)
    # the load is held outside the gradient: a step solver leaves it as it is
    grad = jax.grad(lambda f: jnp.sum(f(jnp.array([0.3, 0.1]))))(problem.prescribe(field, 0.5))
    assert float(grad.load) == 0.0


def test_lift_blends_a_clamp_a_roller_and_a_pin():
    """Transfinite blending against values worked by hand: on each constraint its
    own value; at (0.5, 0) between the left clamp (distance ¾), the bottom
    roller (distance ½) and the pin at (0, 0.5) (squared scaled distance ⅛),
    u_y = Σ dᵢ Π_{j≠i} φⱼ / Σ_k Π_{j≠k} φⱼ."""
    constraints = (
        insr.Clamp("left", (0.0, 1.0)),
        insr.Roller("bottom", 0.5),
        insr.Pin((0.0, 0.5), (1.0, 2.0)),
    )
    lower, upper = (-1.0, -1.0), (1.0, 1.0)

    def g(*x):
        return np.asarray(insr.boundary_lift(constraints, lower, upper, jnp.array(x)))

    np.testing.assert_allclose(g(-1.0, 0.3), [0.0, 1.0], rtol=1e-15)
    np.testing.assert_allclose(g(0.4, -1.0)[1], 0.5, rtol=1e-15)
    np.testing.assert_allclose(g(0.0, 0.5), [1.0, 2.0], rtol=1e-15)
    phi = {"clamp": 0.75, "roller": 0.5, "pin": 0.125}
    w = {"clamp": 0.5 * 0.125, "roller": 0.75 * 0.125, "pin": 0.75 * 0.5}
    # u_x: the left clamp (0) and the pin (1) alone fix it
    ux = (0.0 * phi["pin"] + 1.0 * phi["clamp"]) / (phi["pin"] + phi["clamp"])
    uy = (1.0 * w["clamp"] + 0.5 * w["roller"] + 2.0 * w["pin"]) / sum(w.values())
    np.testing.assert_allclose(g(0.5, 0.0), [ux, uy], rtol=1e-14)
