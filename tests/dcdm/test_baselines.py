"""The classical baselines through the same `solve`: agreement with a sparse
direct solve, IC(0)/MIC(0) against a dense reference factorisation, and the
mesh-independence of AMG-PCG against CG's growth."""

import jax.numpy as jnp
import numpy as np
import pytest
import scipy.sparse as sp

from sciml.dcdm import (
    DCDM,
    AbstractPreconditionerBuilder,
    Identity,
    IncompleteCholesky,
    Jacobi,
    SmoothedAggregationAMG,
    ic0_pivots,
    solve,
)
from solvers.poisson import PoissonOperator, assemble, make_scene, random_rhs, solve as direct_solve


BASELINES = [
    Identity(),
    Jacobi(),
    IncompleteCholesky(),
    IncompleteCholesky(modified=True),
    SmoothedAggregationAMG(),
]


def dense_ic0(A):
    """Textbook IC(0): right-looking Cholesky that drops fill outside A's pattern."""
    A = A.copy()
    n = len(A)
    pattern = A != 0
    L = np.zeros_like(A)
    for k in range(n):
        L[k, k] = np.sqrt(A[k, k])
        for i in range(k + 1, n):
            if pattern[i, k]:
                L[i, k] = A[i, k] / L[k, k]
        for j in range(k + 1, n):
            for i in range(j, n):
                if pattern[i, j] and pattern[i, k] and pattern[j, k]:
                    A[i, j] -= L[i, k] * L[j, k]
    return L


def factor_matrix(A, e):
    E = np.diag(e)
    return (E + np.tril(A, -1)) @ np.linalg.inv(E) @ (E + np.triu(A, 1))


@pytest.mark.parametrize("dim", [2, 3])
def test_ic0_matches_dense_reference(dim):
    labels = make_scene(6 if dim == 3 else 10, dim=dim, seed=1, n_obstacles=1, free_surface=True)
    A = assemble(labels, reduced=True).toarray()
    L = dense_ic0(A)
    e = ic0_pivots(A, tau=0.0, sigma=0.0)
    np.testing.assert_allclose(factor_matrix(A, e), L @ L.T, rtol=1e-12, atol=1e-12)


def test_mic0_preserves_row_sums():
    labels = make_scene(10, seed=2, n_obstacles=2, free_surface=True)
    A = assemble(labels, reduced=True).toarray()
    e = ic0_pivots(A, tau=1.0, sigma=0.0)
    M = factor_matrix(A, e)
    np.testing.assert_allclose(M.sum(axis=1), A.sum(axis=1), atol=1e-12)
    assert not np.allclose(M, factor_matrix(A, ic0_pivots(A, sigma=0.0)))


@pytest.mark.parametrize("free_surface", [True, False])
@pytest.mark.parametrize("method", BASELINES, ids=lambda m: type(m).__name__)
def test_baselines_converge_and_agree_with_direct_solve(method, free_surface):
    labels = make_scene(16, seed=5, n_obstacles=2, free_surface=free_surface)
    b = random_rhs(labels, seed=0)
    precond = method.build(assemble(labels), labels.shape)
    assert precond.setup_seconds >= 0
    op = PoissonOperator(labels)
    sol = solve(op, jnp.asarray(b), precond, DCDM(rtol=1e-8, max_steps=400, n_orthogonal=1))
    x_ref = direct_solve(labels, b)
    x = np.asarray(sol.value)
    if not free_surface:  # closed box: the solution is fixed up to a constant
        fluid = labels == 0
        x = np.where(fluid, x - x[fluid].mean(), 0)
    assert np.linalg.norm(x - x_ref) <= 1e-6 * np.linalg.norm(x_ref)
    residual = np.linalg.norm(
        b - (assemble(labels) @ np.asarray(sol.value).ravel()).reshape(b.shape)
    )
    assert residual <= 1e-8 * np.linalg.norm(b)


def test_amg_iterations_flat_while_cg_grows():
    counts = {"CG": [], "AMG": []}
    for n in (16, 32, 64):
        labels = make_scene(n, seed=7, n_obstacles=2, free_surface=True)
        b = jnp.asarray(random_rhs(labels, seed=1))
        A = assemble(labels)
        op = PoissonOperator(labels)
        for name, method in (("CG", Identity()), ("AMG", SmoothedAggregationAMG())):
            sol = solve(op, b, method.build(A, labels.shape), DCDM(rtol=1e-8, max_steps=1000))
            counts[name].append(int(sol.stats["num_steps"]))
    cg, amg = counts["CG"], counts["AMG"]
    assert cg[2] >= 2.5 * cg[0], counts  # CG grows about like n
    assert amg[2] <= amg[0] + 4 and max(amg) < cg[0], counts  # AMG nearly flat


def test_matrix_of_the_wrong_size_is_rejected():
    with pytest.raises(ValueError, match="one row per cell"):
        Jacobi().build(sp.eye(10, format="csr"), (4, 4))


def test_incomplete_cholesky_checks_its_weights():
    for bad in (-0.1, 1.5, float("nan")):
        with pytest.raises(ValueError, match="`tau` must be in"):
            IncompleteCholesky(modified=True, tau=bad)
    for bad in (-0.1, 1.0, float("nan")):
        with pytest.raises(ValueError, match="`sigma` must be in"):
            IncompleteCholesky(sigma=bad)


def test_one_abstract_base_for_the_classical_preconditioners():
    assert all(isinstance(method, AbstractPreconditionerBuilder) for method in BASELINES)

    class NoBuild(AbstractPreconditionerBuilder):
        pass

    with pytest.raises(TypeError, match="abstract"):
        NoBuild()
    for method in BASELINES[1:]:  # all but Identity need the matrix, and say whose build
        with pytest.raises(ValueError, match=f"{type(method).__name__}.build needs the assembled"):
            method.build(None, (4, 4))


def test_jacobi_from_the_matrix_is_one_over_its_diagonal():
    labels = make_scene(8, seed=3, n_obstacles=1, free_surface=True)
    A = assemble(labels)  # empty rows at solid and air cells
    r = np.random.default_rng(0).standard_normal(labels.shape)
    d = A.diagonal().reshape(labels.shape)
    expected = np.where(d != 0, r / np.where(d != 0, d, 1), 0)
    built = Jacobi().build(A, labels.shape)
    assert built.name == "Jacobi-PCG" and built.setup_seconds >= 0
    np.testing.assert_allclose(built(jnp.asarray(r)), expected, rtol=1e-15, atol=0)
    np.testing.assert_array_equal(built(jnp.asarray(r)), Jacobi.from_diagonal(d)(jnp.asarray(r)))
