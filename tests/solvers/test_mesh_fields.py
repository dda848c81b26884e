"""The P1/P2 mesh fields: exact for affine / quadratic fields, interpolation
error orders two and three."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from sciml import insr
from solvers.mesh_fields import (
    P1Field,
    P2Field,
    fix_nodes,
    interpolate,
    p1_field,
    p2_field,
    quadrature_points,
)


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


def quadratic(x):
    u, v = x[0], x[1]
    return jnp.stack(
        [0.3 * u * u - 0.2 * u * v + 0.1 * v, 0.4 * v * v + 0.5 * u * v - 0.3 * u + 0.2]
    )


def random_points(n=60):
    return jax.random.uniform(
        jax.random.key(1), (n, 2), minval=jnp.array([-1, -0.5]), maxval=jnp.array([1, 0.5])
    )


def test_p2_field_reproduces_quadratic_displacements_and_p1_does_not():
    box = ((-1.0, -0.5), (1.0, 0.5))
    x = random_points()
    p2 = interpolate(P2Field(jnp.zeros((9, 5, 2)), *box), quadratic)
    np.testing.assert_allclose(jax.vmap(p2)(x), jax.vmap(quadratic)(x), atol=1e-13)
    np.testing.assert_allclose(
        jax.vmap(jax.jacfwd(p2))(x), jax.vmap(jax.jacfwd(quadratic))(x), atol=1e-12
    )
    # the same nodes' P1 interpolant misses the curvature (the test can fail)
    p1 = interpolate(P1Field(jnp.zeros((9, 5, 2)), *box), quadratic)
    assert np.abs(jax.vmap(p1)(x) - jax.vmap(quadratic)(x)).max() > 1e-3


def test_interpolation_error_orders_are_two_and_three():
    # nodal interpolation of a smooth field, max error over random points:
    # O(h²) for P1, O(h³) for P2 (measured rates 1.96 / 1.96 and 2.87 / 2.92
    # per halving at these sizes; 0.3 of slack, so a P2 that fell to second
    # order would fail)
    box = ((-1.0, -0.5), (1.0, 0.5))
    smooth = lambda x: jnp.stack([jnp.sin(2 * x[0] + x[1]), jnp.cos(x[0] - 3 * x[1])])  # noqa: E731
    x = random_points(400)
    for cls, per_cell, order in ((P1Field, 1, 2), (P2Field, 2, 3)):
        errors = []
        for nx in (8, 16, 32):
            shape = (per_cell * nx + 1, per_cell * nx // 2 + 1, 2)
            mesh = interpolate(cls(jnp.zeros(shape), *box), smooth)
            errors.append(float(jnp.abs(jax.vmap(mesh)(x) - jax.vmap(smooth)(x)).max()))
        rates = np.log2(np.array(errors[:-1]) / np.array(errors[1:]))
        assert np.all(np.abs(rates - order) < 0.3), (cls.__name__, errors, rates)


def test_sized_fields_hold_about_the_budget():
    box = type("Box", (), {"lower": (-1.0, -0.5), "upper": (1.0, 0.5)})()
    p1, p2 = p1_field(box, 1000), p2_field(box, 1000)
    # nodes ≈ budget / 2 components, cells near-square (aspect 2:1 box)
    assert p1.values.shape == (31, 16, 2) and p2.values.shape == (33, 15, 2)
    for mesh in (p1, p2):
        assert 0.85 * 1000 <= mesh.values.size <= 1000
        assert np.all(np.asarray(mesh.values) == 0.0)


@pytest.mark.parametrize("make", [p1_field, p2_field])
def test_fixed_nodes_impose_rollers_and_clamps_exactly(make):
    """Rollers on left / bottom and a clamp on top: on those faces the held
    components vanish to round-off at any point, the free ones follow the
    interpolant; only the mesh's floats are weights."""
    problem = insr.Elasticity2D.scene("column")
    mesh = interpolate(make(problem, 800), quadratic)
    fixed = fix_nodes(mesh, (insr.Roller("left"), insr.Roller("bottom"), insr.Clamp("top")))
    t = jnp.linspace(0.0, 1.0, 37)
    lo, hi = problem.lower, problem.upper
    left = jnp.stack([jnp.full_like(t, lo[0]), lo[1] + (hi[1] - lo[1]) * t], -1)
    bottom = jnp.stack([lo[0] + (hi[0] - lo[0]) * t, jnp.full_like(t, lo[1])], -1)
    top = bottom.at[:, 1].set(hi[1])
    u_left, u_bottom, u_top = (jax.vmap(fixed)(x) for x in (left, bottom, top))
    assert np.abs(u_left[:, 0]).max() == 0 and np.abs(u_bottom[:, 1]).max() == 0
    assert np.abs(u_top).max() == 0
    # tangential components are free: the interpolant of `quadratic` there
    # (off the elements at the corners, whose nodes the other faces hold;
    # two node spacings cover a P1 and a P2 element)
    spacing = (hi[1] - lo[1]) / (mesh.values.shape[1] - 1)
    inner = np.abs(left[:, 1]) < hi[1] - 2 * spacing
    assert inner.sum() >= 5
    np.testing.assert_allclose(u_left[inner, 1], jax.vmap(mesh)(left)[inner, 1], rtol=1e-12)
    assert np.abs(u_left[inner, 1]).min() > 1e-3
    leaves = jax.tree_util.tree_leaves(fixed)
    assert len(leaves) == 1 and leaves[0] is fixed.mesh.values


def test_fix_nodes_refuses_prescribed_displacements():
    mesh = p1_field(insr.Elasticity2D.scene("column"), 100)
    with pytest.raises(ValueError, match="constraints"):
        fix_nodes(mesh, (insr.Roller("right", 2.0),))


def column_step_energy_ratio(exact: bool, dt: float) -> float:
    """`E₁/E₀` of one converged step of the column's first mode on a P1 mesh."""
    import equinox as eqx
    import lineax as lx
    import optimistix as optx

    problem = insr.Elasticity2D.scene("column", exact_boundary=exact)
    mesh = interpolate(p1_field(problem, 120), problem.initial_condition)
    if exact:
        mesh = fix_nodes(mesh, problem.constraints)
    optimiser = optx.LevenbergMarquardt(
        rtol=1e-10, atol=1e-12, linear_solver=lx.Normal(lx.Cholesky())
    )
    solver = insr.LeastSquaresSolver(
        optimiser,
        collocation=insr.Collocation(n_points=1, n_grid=800, n_boundary=200),
        stopping=insr.Stopping(max_steps=30, grad_rtol=1e-6),
    )
    integrator = insr.IncrementalPotential(solver)
    step = eqx.filter_jit(lambda f, k: integrator.step(f, problem, 0.0, dt, key=k)[0])
    sol = step(mesh, jax.random.key(2))
    assert bool(sol.successful)
    x = problem.grid_interior(800, jnp.float64)
    e0 = jnp.mean(jax.vmap(lambda y: problem.energy_density(mesh, y))(x))
    return float(sol.stats["energy"] / e0)


@pytest.mark.slow
def test_converged_p1_step_of_the_column_needs_exact_rollers():
    """One implicit-Euler step of the column's first mode on a P1 mesh with the
    rollers held exactly keeps implicit Euler's `1/(1 + ω²Δt²)` of the energy;
    with the penalty rollers (weight 1e3) the converged step contracts the body
    laterally and loses far more."""
    dt = 0.08
    problem = insr.Elasticity2D.scene("column")
    length = problem.upper[0] - problem.lower[0]
    omega = np.pi * np.sqrt((problem.a + problem.b) / problem.mass) / (2 * length)
    implicit_euler = 1 / (1 + omega**2 * dt**2)
    exact, penalty = (column_step_energy_ratio(e, dt) for e in (True, False))
    # measured: 0.948 exact (1.4 % below implicit Euler's 0.962, the mesh's
    # discretisation; 0.03 leaves 2x) and 0.66 with the penalty
    assert abs(exact / implicit_euler - 1) < 0.03
    assert penalty < 0.8


def _p1_integrals_by_hand(values, lower, upper):
    """`∫|∇u|²` and `∫|u|²` of a P1 field from its nodal values, triangle by
    triangle: the gradient from the vertex differences, and the closed form
    `∫_T u² = |T|/6 (Σ uᵢ² + Σ_{i<j} uᵢuⱼ)` per component."""
    nx, ny = values.shape[0] - 1, values.shape[1] - 1
    hx, hy = (upper[0] - lower[0]) / nx, (upper[1] - lower[1]) / ny
    area = hx * hy / 2
    stiffness = mass = 0.0
    for i in range(nx):
        for j in range(ny):
            v00, v10, v01, v11 = (
                values[i, j],
                values[i + 1, j],
                values[i, j + 1],
                values[i + 1, j + 1],
            )
            for a, b, c, grad in (
                (v00, v10, v01, ((v10 - v00) / hx, (v01 - v00) / hy)),
                (v11, v01, v10, ((v11 - v01) / hx, (v11 - v10) / hy)),
            ):
                stiffness += area * sum(np.sum(g**2) for g in grad)
                mass += area / 6 * np.sum(a * a + b * b + c * c + a * b + a * c + b * c)
    return stiffness, mass


@pytest.mark.parametrize("subdivisions", [1, 2, 3])
def test_quadrature_points_integrate_a_p1_fields_energies_exactly(subdivisions):
    # the mean over the points times the area against the triangle-by-triangle
    # closed forms: agreement to 1e-13 relative (measured <= 5e-16), where a
    # 4,000-point midpoint grid is off by 8e-3 (stiffness) and 2e-4 (mass)
    lower, upper = (0.0, -0.5), (2.0, 0.5)
    values = np.random.default_rng(0).normal(size=(7, 4, 2))
    field = P1Field(jnp.asarray(values), lower, upper)
    x = quadrature_points(fix_nodes(field, []), subdivisions)
    assert x.shape == (2 * 6 * 3 * 3 * subdivisions**2, 2)
    assert np.all((x > jnp.array(lower)) & (x < jnp.array(upper)))
    area = (upper[0] - lower[0]) * (upper[1] - lower[1])
    grads = jax.vmap(jax.jacfwd(field))(x)
    stiffness = area * float(jnp.mean(jnp.sum(grads**2, axis=(1, 2))))
    mass = area * float(jnp.mean(jnp.sum(jax.vmap(field)(x) ** 2, -1)))
    want_stiffness, want_mass = _p1_integrals_by_hand(values, lower, upper)
    np.testing.assert_allclose(stiffness, want_stiffness, rtol=1e-13)
    np.testing.assert_allclose(mass, want_mass, rtol=1e-13)


def test_quadrature_points_integrate_quadratics_over_each_p2_element():
    # a P2 field's |∇u|² is a quadratic on each element: the 3-point rule is
    # exact for it, so the mean agrees with the composite rule on 5² sub-triangles
    # of every element (measured 4e-16), and with a Monte Carlo estimate to
    # within four standard errors
    lower, upper = (-1.0, -0.25), (1.0, 0.25)
    mesh = p2_field(type("Box", (), {"lower": lower, "upper": upper}), 200)
    mesh = P2Field(
        jnp.asarray(np.random.default_rng(1).normal(size=mesh.values.shape)), lower, upper
    )
    energy = lambda x: jnp.mean(jnp.sum(jax.vmap(jax.jacfwd(mesh))(x) ** 2, axis=(1, 2)))  # noqa: E731
    coarse = float(energy(quadrature_points(mesh, 1)))
    np.testing.assert_allclose(coarse, float(energy(quadrature_points(mesh, 5))), rtol=1e-12)
    x = jax.random.uniform(
        jax.random.key(2), (200_000, 2), minval=jnp.array(lower), maxval=jnp.array(upper)
    )
    samples = jnp.sum(jax.vmap(jax.jacfwd(mesh))(x) ** 2, axis=(1, 2))
    stderr = float(jnp.std(samples)) / np.sqrt(x.shape[0])
    assert abs(coarse - float(jnp.mean(samples))) < 4 * stderr


def test_quadrature_points_refuses_bad_input():
    mesh = P1Field(jnp.zeros((3, 3, 2)), (0.0, 0.0), (1.0, 1.0))
    with pytest.raises(ValueError, match="subdivisions"):
        quadrature_points(mesh, 0)
    with pytest.raises(ValueError, match="mesh"):
        quadrature_points(jnp.zeros((3, 3, 2)))
