"""A right-hand side outside the range of a singular `A` (a closed tank: no
air, constant null vectors): detected, then projected with a warning or
rejected, as asked; checked against the dense matrix and the indicator
vectors written out here."""

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from sciml.dcdm import DCDM, solve
from sciml.solution import RESULTS
from solvers.poisson import FLUID, PoissonOperator, assemble, make_scene, null_space


IDENTITY = lambda r: r  # noqa: E731  (conjugate directions: CG)


def closed_tank():
    labels = make_scene(12, dim=2, seed=3, n_obstacles=2, free_surface=False)
    b = np.random.default_rng(0).standard_normal(labels.shape) * (labels == FLUID)
    return labels, b


def test_null_space_is_the_indicators_of_the_closed_components():
    labels, _ = closed_tank()
    A = assemble(labels).toarray()
    N = null_space(labels).reshape(-1, labels.size)
    assert N.shape[0] >= 1
    np.testing.assert_allclose(A @ N.T, 0, atol=1e-12)
    np.testing.assert_allclose(N @ N.T, np.eye(N.shape[0]), atol=1e-12)
    fluid = (labels == FLUID).ravel()
    # every fluid cell is in exactly one component; the rank deficiency matches
    assert np.all((np.abs(N) > 0).sum(axis=0) == fluid)
    A_f = A[np.ix_(fluid, fluid)]
    assert np.linalg.matrix_rank(A_f) == fluid.sum() - N.shape[0]


def test_inconsistent_rhs_is_projected_with_a_warning():
    labels, b = closed_tank()
    op, A = PoissonOperator(labels), assemble(labels).toarray()
    fluid = (labels == FLUID).ravel()
    # the part of b on the constants of the (one) tank, written out
    mean = b.ravel()[fluid].mean()
    expected = abs(mean) * np.sqrt(fluid.sum()) / np.linalg.norm(b)
    with pytest.warns(UserWarning, match="not in the range"):
        sol = solve(
            op, jnp.asarray(b), IDENTITY, DCDM(max_steps=400), null_space=null_space(labels)
        )
    assert sol.result == RESULTS.successful
    np.testing.assert_allclose(float(sol.stats["inconsistency"]), expected, rtol=1e-12)
    # it solved the nearest consistent system: A x = b − mean on the fluid
    b_proj = np.where(fluid, b.ravel() - mean, 0)
    residual = np.linalg.norm(A @ np.asarray(sol.value).ravel() - b_proj)
    assert residual <= 1e-6 * np.linalg.norm(b_proj)
    # without the null space the same solve cannot converge
    plain = solve(op, jnp.asarray(b), IDENTITY, DCDM(max_steps=400), throw=False)
    assert plain.result != RESULTS.successful


def test_inconsistent_rhs_is_rejected_when_asked_also_under_jit():
    labels, b = closed_tank()
    op, N = PoissonOperator(labels), jnp.asarray(null_space(labels))
    with pytest.raises(Exception, match="not in the range"):
        solve(op, jnp.asarray(b), IDENTITY, null_space=N, inconsistent="raise")
    run = jax.jit(lambda b: solve(op, b, IDENTITY, null_space=N, inconsistent="raise"))
    with pytest.raises(Exception, match="not in the range"):
        jax.block_until_ready(run(jnp.asarray(b)))


def test_consistent_rhs_passes_silently_and_solves_as_before():
    labels, b = closed_tank()
    fluid = labels == FLUID
    b = np.where(fluid, b - b[fluid].mean(), 0)  # one tank: zero mean is consistent
    op, N = PoissonOperator(labels), null_space(labels)
    # no warning (warnings are errors in this suite); the projection only
    # removes round-off, so the solve matches the plain one (measured: same
    # step count, solutions 1e-10 apart relative to their norm: CG's iterates
    # amplify a round-off change of b)
    sol = solve(
        op, jnp.asarray(b), IDENTITY, DCDM(max_steps=400), null_space=N, inconsistent="raise"
    )
    plain = solve(op, jnp.asarray(b), IDENTITY, DCDM(max_steps=400))
    assert float(sol.stats["inconsistency"]) < 1e-15
    assert int(sol.stats["num_steps"]) == int(plain.stats["num_steps"])
    diff = np.linalg.norm(np.asarray(sol.value) - np.asarray(plain.value))
    assert diff <= 1e-8 * np.linalg.norm(np.asarray(plain.value))


def test_an_empty_null_space_changes_nothing():
    # with air above the fluid A is non-singular: no null vectors, b untouched
    labels = make_scene(12, dim=2, seed=3, n_obstacles=2, free_surface=True)
    b = np.random.default_rng(0).standard_normal(labels.shape) * (labels == FLUID)
    N = null_space(labels)
    assert N.shape == (0, *labels.shape)
    op = PoissonOperator(labels)
    sol = solve(op, jnp.asarray(b), IDENTITY, DCDM(max_steps=400), null_space=N)
    plain = solve(op, jnp.asarray(b), IDENTITY, DCDM(max_steps=400))
    assert float(sol.stats["inconsistency"]) == 0
    np.testing.assert_array_equal(sol.value, plain.value)


def test_bad_null_space_arguments_raise_early():
    labels, b = closed_tank()
    op, N = PoissonOperator(labels), null_space(labels)
    with pytest.raises(ValueError, match="`null_space` must have shape"):
        solve(op, jnp.asarray(b), IDENTITY, null_space=N[:, :-2])
    with pytest.raises(ValueError, match="`inconsistent` must be"):
        solve(op, jnp.asarray(b), IDENTITY, null_space=N, inconsistent="ignore")


def test_not_positive_definite_from_an_inconsistent_rhs_points_to_null_space():
    # Before: the message blamed the operator alone ("not positive definite: a sign
    # error in apply_A ..."), though this A is fine and b is outside its range.
    labels, b = closed_tank()
    op, b = PoissonOperator(labels), jnp.asarray(b)
    settings = DCDM(rtol=1e-8, max_steps=200)
    message = r"not positive definite .* or, if A is singular .* pass null_space= .* to project"
    with pytest.raises(eqx.EquinoxRuntimeError, match=message):
        solve(op, b, IDENTITY, settings).value.block_until_ready()
    # and what it says works
    with pytest.warns(UserWarning, match="not in the range of `A`"):
        fixed = solve(op, b, IDENTITY, settings, null_space=null_space(labels))
    assert fixed.result == RESULTS.successful
