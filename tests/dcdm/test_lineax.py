"""`sciml.dcdm.DCDM` as a lineax solver, against a dense solve, lineax's own CG
and the exact inverse."""

import jax
import jax.numpy as jnp
import lineax as lx
import numpy as np
import pytest

from sciml.dcdm import DCDM


def laplacian_2d(n: int) -> np.ndarray:
    """Dense Dirichlet 5-point Laplacian on an n×n grid (SPD)."""
    t = 2 * np.eye(n) - np.eye(n, k=1) - np.eye(n, k=-1)
    return np.kron(t, np.eye(n)) + np.kron(np.eye(n), t)


N = 6
A = laplacian_2d(N) + np.diag(np.random.default_rng(0).uniform(0, 1, N * N))
B = np.random.default_rng(1).standard_normal((N, N))


def grid_operator(matrix=A, tags=lx.positive_semidefinite_tag):
    def mv(x):
        return (jnp.asarray(matrix) @ x.ravel()).reshape(x.shape)

    return lx.FunctionLinearOperator(mv, jax.ShapeDtypeStruct((N, N), jnp.float64), tags)


def test_identity_directions_solve_like_a_dense_solve_and_lineax_cg():
    op, b = grid_operator(), jnp.asarray(B)
    solver = DCDM(rtol=1e-12, max_steps=200, n_orthogonal=1)
    sol = lx.linear_solve(op, b, solver, options={"direction_fn": lambda r: r})
    exact = np.linalg.solve(A, B.ravel()).reshape(N, N)
    # conjugate directions with the identity = CG: converged to 1e-12 relative
    # residual, the error is ~1e-13 (cond(A) ~ 20); 1e-10 leaves headroom.
    np.testing.assert_allclose(sol.value, exact, rtol=0, atol=1e-10)
    assert sol.result == lx.RESULTS.successful
    cg = lx.linear_solve(op, b, lx.CG(rtol=1e-12, atol=1e-12, max_steps=200))
    np.testing.assert_allclose(sol.value, cg.value, rtol=0, atol=1e-10)
    # CG in exact arithmetic ends in at most n steps; here fewer (distinct eigenvalues)
    assert 1 <= int(sol.stats["num_steps"]) <= N * N


def test_exact_inverse_takes_one_step_and_y0_is_used():
    op, b = grid_operator(), jnp.asarray(B)
    A_inv = jnp.asarray(np.linalg.inv(A))
    exact_inverse = {"direction_fn": lambda r: 3.0 * (A_inv @ r.ravel()).reshape(r.shape)}
    sol = lx.linear_solve(op, b, DCDM(rtol=1e-12, max_steps=5), options=exact_inverse)
    assert int(sol.stats["num_steps"]) == 1
    exact = np.linalg.solve(A, B.ravel()).reshape(N, N)
    np.testing.assert_allclose(sol.value, exact, rtol=0, atol=1e-12)
    # from the exact solution (as y0) the residual is ~1e-15, below `atol`: no
    # step (`rtol` is relative to the initial residual, so it alone would not stop)
    at_exact = DCDM(rtol=1e-12, atol=1e-9, max_steps=5)
    options = {"direction_fn": lambda r: r, "y0": jnp.asarray(exact)}
    started = lx.linear_solve(op, b, at_exact, options=options, throw=False)
    assert int(started.stats["num_steps"]) == 0


def test_not_converged_is_reported_or_raised():
    op, b = grid_operator(), jnp.asarray(B)
    solver, options = DCDM(rtol=1e-12, max_steps=2), {"direction_fn": lambda r: r}
    sol = lx.linear_solve(op, b, solver, options=options, throw=False)
    assert sol.result == lx.RESULTS.max_steps_reached
    assert int(sol.stats["num_steps"]) == 2
    with pytest.raises(Exception, match="maximum number of solver steps"):
        lx.linear_solve(op, b, solver, options=options)


def test_gradient_through_the_solve_is_the_adjoint_solve():
    # d/db Σ x(b) = A⁻ᵀ 1 = A⁻¹ 1 for symmetric A.
    op = grid_operator()
    solver, options = DCDM(rtol=1e-13, max_steps=200, n_orthogonal=1), {"direction_fn": lambda r: r}
    grad = jax.grad(lambda b: lx.linear_solve(op, b, solver, options=options).value.sum())(
        jnp.asarray(B)
    )
    expected = np.linalg.solve(A, np.ones(N * N)).reshape(N, N)
    np.testing.assert_allclose(grad, expected, rtol=0, atol=1e-10)


def test_a_pytree_operator_is_solved_as_its_flat_system():
    """A grid and a vector coupled by one SPD matrix, as a tuple: the solution
    of the dense 39×39 system (before: refused as not one array)."""
    C = 0.1 * np.random.default_rng(2).standard_normal((N * N, 3))
    M = jnp.asarray(np.block([[A, C], [C.T, 3 * np.eye(3)]]))  # SPD: least eigenvalue 0.84

    def mv(x):
        y = M @ jnp.concatenate([x[0].ravel(), x[1]])
        return y[: N * N].reshape(N, N), y[N * N :]

    structure = (jax.ShapeDtypeStruct((N, N), jnp.float64), jax.ShapeDtypeStruct((3,), jnp.float64))
    op = lx.FunctionLinearOperator(mv, structure, lx.positive_semidefinite_tag)
    b = (jnp.asarray(B), jnp.arange(3.0))
    solver = DCDM(rtol=1e-12, max_steps=200, n_orthogonal=1)
    sol = lx.linear_solve(op, b, solver, options={"direction_fn": lambda r: r})
    exact = np.linalg.solve(M, np.concatenate([B.ravel(), np.arange(3.0)]))
    # CG to 1e-12 relative residual, cond(M) = 9.7: measured error 3.8e-13
    np.testing.assert_allclose(sol.value[0], exact[: N * N].reshape(N, N), rtol=0, atol=1e-10)
    np.testing.assert_allclose(sol.value[1], exact[N * N :], rtol=0, atol=1e-10)
    assert sol.result == lx.RESULTS.successful


def test_an_operator_that_is_not_positive_definite_is_named():
    """Tagged negative semidefinite: refused before the solve, naming the
    negated system; tagged positive semidefinite but indefinite (-A): lineax's
    `singular`, whose message names positive definiteness (before: `breakdown`,
    "increase `restart` if using GMRES")."""
    options = {"direction_fn": lambda r: r}
    negative = grid_operator(-A, lx.negative_semidefinite_tag)
    with pytest.raises(ValueError, match="tagged negative semidefinite: solve the negated system"):
        lx.linear_solve(negative, jnp.asarray(B), DCDM(), options=options)
    mislabelled = grid_operator(-A)
    sol = lx.linear_solve(mislabelled, jnp.asarray(B), DCDM(), options=options, throw=False)
    assert sol.result == lx.RESULTS.singular
    with pytest.raises(Exception, match="positive definiteness"):
        lx.linear_solve(mislabelled, jnp.asarray(B), DCDM(), options=options)


def test_operator_that_is_not_tagged_symmetric_is_rejected():
    op = grid_operator(tags=())
    with pytest.raises(ValueError, match="symmetric positive"):
        lx.linear_solve(op, jnp.asarray(B), DCDM(), options={"direction_fn": lambda r: r})
