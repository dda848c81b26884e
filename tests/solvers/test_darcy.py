"""Darcy flow: manufactured solution, series solution, assembly, data."""

import numpy as np
import pytest

from solvers import darcy
from solvers._grf import cosine_grf, cosine_noise


def _manufactured(s):
    x = np.linspace(0, 1, s)
    X, Y = np.meshgrid(x, x, indexing="ij")
    pi = np.pi
    a = 1 + 0.5 * np.sin(2 * pi * X + 1) * np.cos(pi * Y)
    a_x = pi * np.cos(2 * pi * X + 1) * np.cos(pi * Y)
    a_y = -0.5 * pi * np.sin(2 * pi * X + 1) * np.sin(pi * Y)
    u = np.sin(pi * X) * np.sin(2 * pi * Y)
    u_x = pi * np.cos(pi * X) * np.sin(2 * pi * Y)
    u_y = 2 * pi * np.sin(pi * X) * np.cos(2 * pi * Y)
    f = -(a_x * u_x + a_y * u_y - 5 * pi**2 * a * u)
    return a, f, u


def test_manufactured_solution_second_order():
    sizes = np.array([17, 33, 65])
    errors = []
    for s in sizes:
        a, f, u = _manufactured(s)
        errors.append(np.abs(darcy.solve(a, f) - u).max())
    order = np.polyfit(np.log(1.0 / (sizes - 1)), np.log(errors), 1)[0]
    assert 1.9 < order < 2.1, (order, errors)
    assert errors[-1] < 1e-3


def test_unit_coefficient_matches_series():
    # a ≡ 1, f = 1: u(1/2, 1/2) = Σ_{m,n odd} 16 sin(mπ/2) sin(nπ/2) / (π⁴ m n (m² + n²)).
    m = np.arange(1, 400, 2)
    M, N = np.meshgrid(m, m, indexing="ij")
    signs = np.sin(M * np.pi / 2) * np.sin(N * np.pi / 2)
    centre = np.sum(16 * signs / (np.pi**4 * M * N * (M**2 + N**2)))
    assert abs(centre - 0.07367) < 1e-5
    errors = [abs(darcy.solve(np.ones((s, s)))[s // 2, s // 2] - centre) for s in (33, 65)]
    assert 3.5 < errors[0] / errors[1] < 4.5
    assert errors[1] < 2e-5


def test_assembly_matches_slow_reference():
    rng = np.random.default_rng(0)
    s = 7
    a = rng.uniform(1, 5, (s, s))
    h = 1 / (s - 1)
    m = s - 2
    ref = np.zeros((m * m, m * m))

    def hm(p, q):
        return 2 * p * q / (p + q)

    for i in range(1, s - 1):
        for j in range(1, s - 1):
            row = (i - 1) * m + (j - 1)
            for di, dj in ((-1, 0), (1, 0), (0, -1), (0, 1)):
                face = hm(a[i, j], a[i + di, j + dj])
                ref[row, row] += face / h**2
                ii, jj = i + di, j + dj
                if 1 <= ii <= s - 2 and 1 <= jj <= s - 2:
                    ref[row, (ii - 1) * m + (jj - 1)] -= face / h**2
    dense = darcy.assemble(a).toarray()
    np.testing.assert_allclose(dense, ref, rtol=1e-13)
    assert np.linalg.eigvalsh(dense).min() > 0


def test_dataset_values_nesting_and_determinism():
    coarse = darcy.make_dataset(3, 33, seed=4)
    a, u = coarse["inputs"], coarse["outputs"]
    assert a.shape == u.shape == (3, 33, 33)
    assert set(np.unique(a)) == {3.0, 12.0}
    assert 0.2 < (a == 12).mean() < 0.8
    np.testing.assert_array_equal(u[:, 0], 0)
    np.testing.assert_array_equal(u[:, :, -1], 0)
    assert u[:, 1:-1, 1:-1].min() > 0  # maximum principle, f = 1 > 0
    more = darcy.make_dataset(1, 33, seed=4, start=2)
    np.testing.assert_array_equal(more["inputs"][0], a[2])
    np.testing.assert_array_equal(more["outputs"][0], u[2])
    fine = darcy.make_dataset(1, 65, seed=4, start=1)
    np.testing.assert_array_equal(fine["inputs"][0][::2, ::2], a[1])
    rel = np.abs(fine["outputs"][0][::2, ::2] - u[1]).max() / np.abs(u[1]).max()
    assert rel < 0.05
    other = darcy.make_dataset(1, 33, seed=5)
    assert not np.array_equal(other["inputs"][0], a[0])


def test_the_default_coefficient_is_fnos_thresholded_field():
    """The defaults are FNO's: covariance (−Δ + 9 I)^(−2) scaled by τ^(α−1) = 3
    on 64 cosine modes per axis, thresholded to 12 where the field is >= 0 and
    3 elsewhere (the field written out here from the noise)."""
    x, noise = np.linspace(0, 1, 17), cosine_noise((4, 1), 64)
    k = np.arange(64)
    phi = np.where(k == 0, 1.0, np.sqrt(2)) * np.cos(np.pi * np.outer(x, k))
    amp = 3.0 * (np.pi**2 * (k[:, None] ** 2 + k[None, :] ** 2) + 9.0) ** -1.0
    amp[0, 0] = 0.0
    expected = np.where(phi @ (amp * noise) @ phi.T >= 0, 12.0, 3.0)
    # measured equal; alpha 2.5 flips 17 of the 289 nodes, tau 2 flips 10
    np.testing.assert_array_equal(darcy.random_coefficient(4, 1, 17), expected)


def test_cosine_field_nested_noise_and_variance():
    big = cosine_noise((1, 2), 32)
    np.testing.assert_array_equal(cosine_noise((1, 2), 8), big[:8, :8])
    # Pointwise variance of the field against its Karhunen–Loève sum.
    x = np.linspace(0, 1, 9)
    alpha, tau, sigma = 2.0, 3.0, 3.0
    samples = np.stack(
        [
            cosine_grf(x, cosine_noise((7, i), 16), alpha=alpha, tau=tau, sigma=sigma)
            for i in range(3000)
        ]
    )
    k = np.arange(16)
    phi = np.where(k == 0, 1.0, np.sqrt(2)) * np.cos(np.pi * np.outer(x, k))
    lam = sigma**2 * (np.pi**2 * (k[:, None] ** 2 + k[None, :] ** 2) + tau**2) ** -alpha
    lam[0, 0] = 0
    expected = np.einsum("ik,jl,kl->ij", phi**2, phi**2, lam)
    np.testing.assert_allclose(samples.var(axis=0).mean(), expected.mean(), rtol=0.05)


def test_bad_input():
    with pytest.raises(ValueError, match="positive"):
        darcy.assemble(-np.ones((5, 5)))
    with pytest.raises(ValueError, match="resolution"):
        darcy.make_dataset(1, 2, seed=0)
    with pytest.raises(ValueError, match="a_high"):
        darcy.DarcyParams(a_low=0.0)
    with pytest.raises(ValueError, match="square"):
        darcy.solve(np.ones((5, 6)))
