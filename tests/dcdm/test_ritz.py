"""Lanczos / Ritz pairs against a dense eigendecomposition and the Ritz residual
identity; training right-hand sides and the HDF5 cache."""

import numpy as np
import pytest

from sciml.dcdm import dataset_key, lanczos, low_count, ritz_dataset, ritz_pairs, ritz_rhs
from solvers.poisson import FLUID, assemble, make_scene


def dense_system(n=12, seed=0):
    t = 2 * np.eye(n) - np.eye(n, k=1) - np.eye(n, k=-1)
    A = np.kron(t, np.eye(n)) + np.kron(np.eye(n), t)
    A += np.diag(np.random.default_rng(seed).uniform(0, 1, n * n))
    return A, (n, n)


def matvec(A, shape):
    return lambda x: (A @ np.asarray(x).ravel()).reshape(shape)


def test_extreme_ritz_values_converge_to_eigenvalues():
    A, shape = dense_system()
    eig = np.linalg.eigvalsh(A)
    V, alpha, beta, _ = lanczos(matvec(A, shape), shape, 60, seed=1)
    np.testing.assert_allclose(V @ V.T, np.eye(60), atol=1e-12)  # orthonormal basis
    theta, vectors, _ = ritz_pairs(V, alpha, beta)
    np.testing.assert_allclose(theta[-3:], eig[-3:], rtol=1e-8)
    np.testing.assert_allclose(theta[:2], eig[:2], rtol=1e-6)
    # interlacing: every Ritz value lies inside the spectrum
    assert eig[0] - 1e-10 <= theta[0] and theta[-1] <= eig[-1] + 1e-10


def test_ritz_residual_identity():
    A, shape = dense_system(8)
    V, alpha, beta, beta_m = lanczos(matvec(A, shape), shape, 20, seed=2)
    theta, vectors, last = ritz_pairs(V, alpha, beta)
    direct = np.linalg.norm(vectors @ A - theta[:, None] * vectors, axis=1)
    np.testing.assert_allclose(direct, beta_m * np.abs(last), rtol=1e-6, atol=1e-11)
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1, rtol=1e-12)
    assert direct.max() > 1e-6  # not converged yet: the identity is tested, not trivial


def test_closed_box_stays_in_range_and_rhs_are_unit_and_consistent():
    labels = make_scene(12, seed=3, n_obstacles=2, free_surface=False)
    A = assemble(labels).toarray()
    fluid = (labels == 0).ravel()
    V, alpha, beta, _ = lanczos(matvec(A, labels.shape), labels.shape, 40, seed=0)
    theta, vectors, _ = ritz_pairs(V, alpha, beta)
    assert theta.min() >= 1e-8
    b = ritz_rhs(vectors, 16, seed=0)
    np.testing.assert_allclose(np.linalg.norm(b, axis=1), 1, rtol=1e-12)
    # orthogonal to the null space (the constant on the fluid cells), zero elsewhere
    assert np.abs(b[:, fluid].sum(axis=1)).max() < 1e-10
    assert np.all(b[:, ~fluid] == 0)


def test_low_end_bias():
    assert low_count(10, 0.6) == 6
    assert low_count(3000, None) == 2000 and low_count(600, None) == 600
    with pytest.raises(ValueError, match="low_fraction"):
        low_count(10, 1.5)
    # with orthonormal "Ritz vectors" the coefficients are read back exactly:
    # the low fraction carries factor² = 81 times the variance
    k = 50
    vectors = np.eye(k)
    b = ritz_rhs(vectors, 4000, seed=1, factor=9, low_fraction=0.4)
    var = (b**2).mean(axis=0)
    ratio = var[:20].mean() / var[20:].mean()
    assert 70 < ratio < 92


def test_hdf5_cache_is_reused_and_resumable(tmp_path):
    labels = make_scene(8, seed=0, n_obstacles=1, free_surface=True)
    A = assemble(labels)
    calls = []

    def apply_A(x):
        calls.append(1)
        return (A @ np.asarray(x).ravel()).reshape(labels.shape)

    settings = dict(n_ritz=20, seed=4, chunk=3)
    full = ritz_dataset(tmp_path / "a.h5", apply_A, labels, n_rhs=10, **settings)
    assert full["rhs"].shape == (10, 8, 8)
    n_calls = len(calls)
    again = ritz_dataset(tmp_path / "a.h5", apply_A, labels, n_rhs=10, **settings)
    assert len(calls) == n_calls  # read back, no Lanczos
    np.testing.assert_array_equal(again["rhs"], full["rhs"])
    # a shorter run extended later equals a straight run
    part = ritz_dataset(tmp_path / "b.h5", apply_A, labels, n_rhs=4, **settings)
    more = ritz_dataset(tmp_path / "b.h5", apply_A, labels, n_rhs=10, **settings)
    np.testing.assert_array_equal(part["rhs"], full["rhs"][:4])
    np.testing.assert_array_equal(more["rhs"], full["rhs"])
    # another scene or setting gets another group
    assert dataset_key(labels, n_ritz=20) != dataset_key(labels, n_ritz=21)
    assert dataset_key(labels, n_ritz=20) != dataset_key(labels.T.copy(), n_ritz=20)


def test_exact_solutions_are_stored_and_cached(tmp_path):
    """With `solve_A` the data set holds `A⁻¹ b` beside each right-hand side
    (checked against a dense solve), computed once and read back after."""
    labels = make_scene(8, seed=0, n_obstacles=1, free_surface=True)
    A = assemble(labels)
    apply_A = lambda x: (A @ np.asarray(x).ravel()).reshape(labels.shape)  # noqa: E731
    fluid = np.flatnonzero(labels.ravel() == FLUID)
    dense = A.toarray()[np.ix_(fluid, fluid)]
    solves = []

    def solve_A(b):
        solves.append(1)
        x = np.zeros(b.size)
        x[fluid] = np.linalg.solve(dense, b.ravel()[fluid])
        return x.reshape(b.shape)

    settings = dict(n_ritz=20, seed=4, chunk=3)
    part = ritz_dataset(tmp_path / "a.h5", apply_A, labels, n_rhs=4, solve_A=solve_A, **settings)
    data = ritz_dataset(tmp_path / "a.h5", apply_A, labels, n_rhs=7, solve_A=solve_A, **settings)
    assert len(solves) == 7  # the first four were read back
    np.testing.assert_array_equal(part["solutions"], data["solutions"][:4])
    for b, x in zip(data["rhs"], data["solutions"], strict=True):
        exact = np.linalg.solve(dense, b.ravel()[fluid].astype(float))
        # float32 storage: relative error ~6e-8 (one rounding)
        np.testing.assert_allclose(x.ravel()[fluid], exact, rtol=0, atol=3e-7 * abs(exact).max())
        assert not x.ravel()[np.setdiff1d(np.arange(x.size), fluid)].any()
