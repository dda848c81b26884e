"""Matrix-free baselines and the precision rules of `sciml.dcdm.solve`.

- `Identity()` is a direction function itself and, with a matrix-free
  operator, gives the iterates of a textbook CG loop written here in numpy;
  `Jacobi.from_diagonal` gives those of a textbook Jacobi-PCG loop.
- Preconditioners that need `A`'s entries refuse a missing matrix clearly.
- A float32 solve at an `rtol` float32 cannot reach warns at the start (naming
  the dtype and both remedies) and its failure names precision; float64 is quiet.
"""

import warnings

import jax.numpy as jnp
import numpy as np
import pytest

from sciml.dcdm import (
    DCDM,
    Identity,
    IncompleteCholesky,
    Jacobi,
    PrecisionWarning,
    SmoothedAggregationAMG,
    solve,
)


N = 12


WEIGHT = 1.0 + np.linspace(0.0, 3.0, N * N).reshape(N, N)  # a varying diagonal


def stencil(x):
    """A matrix-free operator, as a user without an assembled matrix has it."""
    xp = jnp.pad(x, 1)
    return 4 * x - xp[:-2, 1:-1] - xp[2:, 1:-1] - xp[1:-1, :-2] - xp[1:-1, 2:]


def textbook_pcg(A, b, m_inv, rtol, max_steps):
    """Preconditioned CG in float64 numpy; symmetric positive definite A and M⁻¹."""
    x = np.zeros_like(b)
    r = b.copy()
    z = m_inv(r)
    p = z.copy()
    r0 = np.linalg.norm(r)
    for k in range(1, max_steps + 1):
        Ap = A @ p
        alpha = (r @ z) / (p @ Ap)
        x = x + alpha * p
        r_new = r - alpha * Ap
        if np.linalg.norm(b - A @ x) <= rtol * r0:
            return x, k
        z_new = m_inv(r_new)
        beta = (r_new @ z_new) / (r @ z)
        p = z_new + beta * p
        r, z = r_new, z_new
    raise AssertionError("the reference did not converge")


@pytest.fixture
def system():
    return np.random.default_rng(0).standard_normal((N, N))


def spd_operator():
    """`S = D^½ L D^½` (SPD; `L` the Dirichlet Laplacian, `D = WEIGHT`), matrix-free,
    with its dense matrix and its diagonal `4 D`."""
    root = np.sqrt(WEIGHT)

    def apply(x):
        return root * stencil(root * x)

    eye = np.eye(N * N)
    S = np.stack([np.asarray(apply(jnp.asarray(e.reshape(N, N)))).ravel() for e in eye], 1)
    return apply, S, 4 * WEIGHT


def test_identity_is_a_direction_and_gives_textbook_cg(system):
    apply, S, _ = spd_operator()
    np.testing.assert_allclose(S, S.T, atol=1e-12)
    sol = solve(apply, jnp.asarray(system), Identity(), DCDM(rtol=1e-10, max_steps=400))
    x_ref, steps = textbook_pcg(S, system.ravel(), lambda r: r, 1e-10, 400)
    # CG in exact arithmetic: same iterates; measured agreement ~1e-13 (headroom 1e3)
    np.testing.assert_allclose(np.asarray(sol.value).ravel(), x_ref, rtol=0, atol=1e-10)
    assert abs(int(sol.stats["num_steps"]) - steps) <= 1
    built = Identity().build(None)
    same = solve(apply, jnp.asarray(system), built, DCDM(rtol=1e-10, max_steps=400))
    np.testing.assert_array_equal(np.asarray(same.value), np.asarray(sol.value))


def test_jacobi_from_a_diagonal_gives_textbook_pcg(system):
    apply, S, diagonal = spd_operator()
    np.testing.assert_allclose(np.diag(S).reshape(N, N), diagonal, rtol=1e-14)
    jacobi = Jacobi.from_diagonal(diagonal)
    sol = solve(apply, jnp.asarray(system), jacobi, DCDM(rtol=1e-10, max_steps=400, n_orthogonal=1))
    x_ref, steps = textbook_pcg(S, system.ravel(), lambda r: r / diagonal.ravel(), 1e-10, 400)
    np.testing.assert_allclose(np.asarray(sol.value).ravel(), x_ref, rtol=0, atol=1e-10)
    assert abs(int(sol.stats["num_steps"]) - steps) <= 1
    # the same preconditioner as the one built from the assembled matrix
    built = Jacobi().build(S, (N, N))
    r = jnp.asarray(system)
    np.testing.assert_allclose(np.asarray(jacobi(r)), np.asarray(built(r)), rtol=1e-15)


@pytest.mark.parametrize(
    "preconditioner", [Jacobi(), IncompleteCholesky(), SmoothedAggregationAMG()]
)
@pytest.mark.parametrize("matrix", [None, stencil])
def test_preconditioners_that_need_a_matrix_say_so(preconditioner, matrix):
    with pytest.raises(ValueError, match="needs the assembled matrix.*Jacobi.from_diagonal"):
        preconditioner.build(matrix, (N, N))


def test_jacobi_from_diagonal_rejects_a_bad_diagonal():
    with pytest.raises(ValueError, match="diagonal"):
        Jacobi.from_diagonal(-np.ones((N, N)))


def neumann_scene():
    from solvers.poisson import PoissonOperator, make_scene, random_rhs

    labels = make_scene(16, seed=1, free_surface=True)
    return PoissonOperator(labels), random_rhs(labels, seed=0)


def test_float32_cg_below_reachable_rtol_warns_and_names_precision():
    op, b = neumann_scene()
    b32 = jnp.asarray(b, jnp.float32)
    with pytest.warns(PrecisionWarning, match="below what float32 can reach") as record:
        sol = solve(op, b32, Identity(), DCDM(rtol=1e-6, max_steps=300), throw=False)
    message = str(record[0].message)
    assert "jax_enable_x64" in message and "loosen `rtol`" in message
    # the warning is right: float32 stalls above 1e-6 (measured 2.2e-6 here)
    assert not bool(sol.successful)
    history = np.asarray(sol.stats["residual_history"])
    assert np.nanmin(history) / history[0] > 1e-6
    with pytest.warns(PrecisionWarning), pytest.raises(Exception, match="precision: in float32"):
        solve(op, b32, Identity(), DCDM(rtol=1e-6, max_steps=300)).value.block_until_ready()


def test_float64_cg_at_the_same_rtol_is_quiet_and_converges():
    op, b = neumann_scene()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        sol = solve(op, jnp.asarray(b, jnp.float64), Identity(), DCDM(rtol=1e-6, max_steps=300))
    assert bool(sol.successful) and int(sol.stats["num_steps"]) < 100


def test_float32_at_a_reachable_rtol_is_quiet():
    op, b = neumann_scene()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        sol = solve(op, jnp.asarray(b, jnp.float32), Identity(), DCDM(rtol=1e-4, max_steps=300))
    assert bool(sol.successful)


def test_breakdown_message_names_the_operator_and_the_direction(system):
    apply, _, _ = spd_operator()

    def negative(x):  # -S: not positive definite
        return -apply(x)

    with pytest.raises(Exception, match="not positive definite"):
        solve(negative, jnp.asarray(system), Identity(), DCDM(rtol=1e-8)).value.block_until_ready()
