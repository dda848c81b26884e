"""The sparse-Newton hyperelastic FEM against a closed form and its convergence order."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from solvers import hyperelastic_fem as fem
from solvers.mesh_fields import P1Field, P2Field


A, B = 1.0, 1e3  # the paper's stretch: ARAP 1, volume 10³


def density(F):
    """`a Σ(σ − 1)² + b (det F − 1)²` written apart from the package's polar
    rotation: in 2-D, for det F > 0, `σ₁ + σ₂ = ‖(F₀₀ + F₁₁, F₁₀ − F₀₁)‖`, so
    `Σ(σ − 1)² = ‖F‖² − 2(σ₁ + σ₂) + 2`."""
    trace_sum = jnp.hypot(F[0, 0] + F[1, 1], F[1, 0] - F[0, 1])
    det = F[0, 0] * F[1, 1] - F[0, 1] * F[1, 0]
    return A * (jnp.sum(F**2) - 2 * trace_sum + 2) + B * (det - 1) ** 2


def nodes(field):
    mx, my = field.values.shape[:2]
    x = np.linspace(field.lower[0], field.upper[0], mx)
    y = np.linspace(field.lower[1], field.upper[1], my)
    return np.stack(np.meshgrid(x, y, indexing="ij"), -1)


@pytest.mark.parametrize("cls", [P1Field, P2Field])
def test_roller_stretch_is_the_homogeneous_closed_form(cls):
    """Rollers on x = ±1 (u_x = 0 and 1), u_y = 0 at the node (−1, −½): the
    answer F = diag(λ₁, λ₂) lies in both spaces, λ₁ = 1.5 and
    ∂ψ/∂λ₂ = 2a(λ₂ − 1) + 2bλ₁(λ₁λ₂ − 1) = 0 gives λ₂ = (a + bλ₁)/(a + bλ₁²)."""
    shape = (5, 3, 2) if cls is P1Field else (7, 5, 2)
    field = cls(jnp.zeros(shape), (-1.0, -0.5), (1.0, 0.5))
    x = nodes(field)
    held = np.zeros(shape, bool)
    held[0, :, 0] = held[-1, :, 0] = True
    held[0, 0, 1] = True
    lift = np.zeros(shape)
    lift[-1, :, 0] = 1.0  # the right face's u_x; the first guess is 0 elsewhere
    result = fem.solve(field, density, held, lift, load_steps=2)
    assert result.converged
    lam1 = 1.5
    lam2 = (A + B * lam1) / (A + B * lam1**2)
    exact = np.stack([(lam1 - 1) * (x[..., 0] + 1), (lam2 - 1) * (x[..., 1] + 0.5)], -1)
    # measured 1.1e-16 (P1 and P2); with b = 10² instead, u_y is 1.3e-3 off
    np.testing.assert_allclose(np.asarray(result.field.values), exact, atol=1e-13)
    np.testing.assert_allclose(result.energy, density(jnp.diag(jnp.array([lam1, lam2]))) * 2)


def test_newton_converges_quadratically_on_the_clamped_stretch():
    """The clamped stretch on a P2 mesh of 4 × 4 cells in one load step: the
    last Newton steps shrink quadratically, order estimates
    log(sₖ₊₁/sₖ)/log(sₖ/sₖ₋₁) of the step norms ≥ 1.7 (measured 1.85 and
    1.89; half the Hessian gives 1.00 and no convergence in 200 iterations).
    The clamped nodes stay where they are put."""
    field = P2Field(jnp.zeros((9, 9, 2)), (-1.0, -1.0), (1.0, 1.0))
    x = nodes(field)
    held = np.zeros(field.values.shape, bool)
    held[0] = held[-1] = True
    lift = np.zeros(field.values.shape)
    lift[..., 0] = x[..., 0] + 1  # the right face moved by (2, 0)
    result = fem.solve(field, density, held, lift)
    assert result.converged and result.iterations[0] < 50
    steps = np.asarray(result.step_norms)
    tail = steps[-4:]
    assert tail[-1] < 1e-10 < tail[0]
    orders = np.log(tail[2:] / tail[1:-1]) / np.log(tail[1:-1] / tail[:-2])
    assert np.all(orders >= 1.7), orders
    values = np.asarray(result.field.values)
    np.testing.assert_array_equal(values[0], 0.0)
    np.testing.assert_array_equal(values[-1], np.broadcast_to([2.0, 0.0], values[-1].shape))


def test_the_p2_rule_integrates_quartics_exactly():
    """Mean over the triangle of λ₀^i λ₁^j λ₂^k is 2 i! j! k!/(i + j + k + 2)!;
    the degree-4 rule gets every quartic (measured 2e-16), the volume term of
    a P2 field."""
    from math import factorial

    points, weights = fem._rule(2)  # noqa: SLF001
    for i, j, k in [(4, 0, 0), (2, 2, 0), (2, 1, 1), (3, 1, 0), (0, 0, 0)]:
        exact = 2 * factorial(i) * factorial(j) * factorial(k) / factorial(i + j + k + 2)
        rule = np.sum(weights * points[:, 0] ** i * points[:, 1] ** j * points[:, 2] ** k)
        np.testing.assert_allclose(rule, exact, rtol=1e-14)


def test_bad_input_names_the_argument():
    field = P1Field(jnp.zeros((3, 3, 2)), (-1.0, -1.0), (1.0, 1.0))
    held = np.zeros((3, 3, 2), bool)
    with pytest.raises(ValueError, match="`lift` must have the shape"):
        fem.solve(field, density, held, np.zeros((3, 2, 2)))
    with pytest.raises(ValueError, match="`load_steps`"):
        fem.solve(field, density, held, np.zeros((3, 3, 2)), load_steps=0)
    with pytest.raises(ValueError, match="`field`"):
        fem.solve(jax.numpy.zeros(3), density, held, np.zeros((3, 3, 2)))
