"""The hyperelastic energy density `ψ(F) = a Σ(σ − 1)² + b (det F − 1)²` on
non-diagonal deformation gradients (shear, rotation), against references
independent of the package: numpy's SVD and determinant, rotations (ψ = 0),
frame indifference, and a closed form for 2×2 matrices.

For a 2×2 `F` with `det F > 0`, `σ₁σ₂ = det F` and `σ₁² + σ₂² = ‖F‖²_F`, so
`σ₁ + σ₂ = √(‖F‖² + 2 det F)` and `Σ(σ − 1)² = ‖F‖² − 2√(‖F‖² + 2 det F) + 2`.
"""

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from sciml import insr


A, B = 1.5, 10.0


def rotation(theta):
    return np.array([[math.cos(theta), -math.sin(theta)], [math.sin(theta), math.cos(theta)]])


def reference_density(F, a=A, b=B):
    """`ψ` from numpy's singular values and determinant."""
    sigma = np.linalg.svd(F, compute_uv=False)
    return a * np.sum((sigma - 1) ** 2) + b * (np.linalg.det(F) - 1) ** 2


# sheared, rotated, stretched; the first two have one off-diagonal entry zero (det's
# cross term vanishes), the others both non-zero (a wrong sign of the cross term
# changes det by 17 % to 160 % on them)
SHEARED_AND_ROTATED = [
    np.array([[1.0, 0.7], [0.0, 1.0]]),  # simple shear
    np.array([[1.0, 0.0], [-0.4, 1.0]]),
    rotation(0.6) @ np.array([[1.0, 0.5], [0.0, 1.0]]),
    rotation(-1.1) @ np.diag([1.3, 0.8]),
    np.array([[1.2, 0.3], [-0.5, 0.9]]),
    np.array([[0.7, -0.6], [0.4, 1.4]]),
]


@pytest.mark.parametrize("theta", [0.3, 1.0, 2.5, -2.0])
def test_rotations_store_no_energy(theta):
    # ψ(R) = a Σ(1 − 1)² + b (1 − 1)² = 0; measured ≤ 1e-30. A wrong sign of the
    # determinant's cross term gives det R = cos 2θ, ψ ≥ b (cos 2θ − 1)² ≥ 0.17 b here.
    R = jnp.asarray(rotation(theta))
    assert float(insr.energy_density(R, A, B)) < 1e-24


@pytest.mark.parametrize("F", SHEARED_AND_ROTATED)
def test_determinant_and_density_match_numpy(F):
    residual = np.asarray(insr.elastic_residual(jnp.asarray(F), A, B))
    # the last entry is √b (det F − 1): measured agreement 4e-16
    np.testing.assert_allclose(residual[-1] / math.sqrt(B) + 1, np.linalg.det(F), rtol=1e-13)
    np.testing.assert_allclose(
        float(insr.energy_density(jnp.asarray(F), A, B)), reference_density(F), rtol=1e-12
    )


@pytest.mark.parametrize("F", SHEARED_AND_ROTATED)
@pytest.mark.parametrize("theta", [0.4, -2.2])
def test_density_is_frame_indifferent(F, theta):
    """ψ(QF) = ψ(F) for every rotation Q (measured to 1e-15 relative)."""
    Q = rotation(theta)
    np.testing.assert_allclose(
        float(insr.energy_density(jnp.asarray(Q @ F), A, B)),
        float(insr.energy_density(jnp.asarray(F), A, B)),
        rtol=1e-12,
    )


def test_sheared_and_rotated_body_has_the_closed_form_energy_density():
    """The displacement `u(X) = Q M X − X` of a rotated shear-and-stretch
    `M = [[λ₁, γ], [0, λ₂]]`: `F = Q M`, `det F = λ₁λ₂`, `‖F‖² = λ₁² + γ² + λ₂²`,
    `ψ = a(‖F‖² − 2√(‖F‖² + 2 det F) + 2) + b(λ₁λ₂ − 1)²` at every point."""
    lam1, lam2, gamma, theta = 1.2, 0.9, 0.6, 0.7
    Q = jnp.asarray(rotation(theta))
    M = jnp.array([[lam1, gamma], [0.0, lam2]])

    def displacement(params, x):
        return params["Q"] @ params["M"] @ x - x

    field = insr.FunctionField(displacement, {"Q": Q, "M": M})
    problem = insr.Elasticity2D(a=A, b=B)
    points = jax.random.uniform(jax.random.key(0), (16, 2), minval=-1.0, maxval=1.0)
    density = jax.vmap(lambda x: problem.energy_density(field, x))(points)

    norm2, det = lam1**2 + gamma**2 + lam2**2, lam1 * lam2
    expected = A * (norm2 - 2 * math.sqrt(norm2 + 2 * det) + 2) + B * (det - 1) ** 2
    # measured 1e-15 relative; a wrong sign of det's cross term changes ψ by 12 % here
    np.testing.assert_allclose(np.asarray(density), expected, rtol=1e-12)
    # and the pure shear (λ₁ = λ₂ = 1) is volume preserving: only the ARAP part remains
    shear = insr.FunctionField(displacement, {"Q": Q, "M": jnp.array([[1.0, gamma], [0.0, 1.0]])})
    s = math.sqrt(1 + gamma**2 / 4)  # singular values s ± γ/2
    np.testing.assert_allclose(
        float(problem.energy_density(shear, points[0])),
        A * ((s + gamma / 2 - 1) ** 2 + (s - gamma / 2 - 1) ** 2),
        rtol=1e-12,
    )


def test_contact_penalty_is_half_k_d_squared_and_its_force():
    """A point a depth `d` below the floor `y = −0.8` stores `k_c d²/2`; the
    penalty's gradient is the force `−k_c d e_y` (pushing up), zero above it."""
    kc, floor, d = 1e4, -0.8, 0.013

    def energy(q):
        return jnp.sum(insr.contact_residual(q, floor, kc) ** 2)

    below = jnp.array([0.3, floor - d])
    np.testing.assert_allclose(float(energy(below)), kc * d**2 / 2, rtol=1e-13)
    np.testing.assert_allclose(np.asarray(jax.grad(energy)(below)), [0.0, -kc * d], rtol=1e-13)
    assert float(energy(jnp.array([0.3, floor + d]))) == 0.0
