"""`sciml.dcdm.DCDM`, the settings of the iteration as a module: checked when
built, the same solve as the keyword form (bit for bit), refused with a clear
error when misspelt or given twice, and still a lineax solver."""

import dataclasses

import jax
import jax.numpy as jnp
import lineax as lx
import numpy as np
import pytest

from sciml.dcdm import DCDM, Jacobi, solve
from tests.dcdm.test_lineax import A, B, N  # a 6×6-grid SPD system and a right-hand side


def apply_A(x):
    return (jnp.asarray(A) @ x.ravel()).reshape(x.shape)


JACOBI = Jacobi.from_diagonal(np.diag(A).reshape(N, N))


@pytest.mark.parametrize(
    ("field", "value", "error", "message"),
    [
        ("rtol", -1e-6, ValueError, "`rtol` and `atol` must be >= 0 .* rtol=-1e-06"),
        ("rtol", float("nan"), ValueError, "`rtol` and `atol` must be >= 0 .* rtol=nan"),
        ("rtol", float("inf"), ValueError, "`rtol` and `atol` must be finite, got rtol=inf"),
        ("atol", -1.0, ValueError, "`rtol` and `atol` must be >= 0 .* atol=-1.0"),
        ("atol", float("inf"), ValueError, "`rtol` and `atol` must be finite, .* atol=inf"),
        ("rtol", "1e-6", TypeError, "`rtol` must be a real number"),
        ("rtol", True, TypeError, "`rtol` must be a real number"),
        ("max_steps", 0, ValueError, "`max_steps` must be a positive integer, got 0"),
        ("max_steps", -3, ValueError, "`max_steps` must be a positive integer, got -3"),
        ("n_orthogonal", -1, ValueError, "`n_orthogonal` must be an integer >= 0, got -1"),
        ("refresh_every", 0, ValueError, "`refresh_every` must be a positive integer or None"),
    ],
)
def test_settings_are_checked_when_built_and_named(field, value, error, message):
    with pytest.raises(error, match=message):
        DCDM(**{field: value})
    # the keyword form builds the same module, so it fails the same way, before any work
    with pytest.raises(error, match=message):
        solve(apply_A, jnp.asarray(B), lambda r: r, **{field: value})


def test_both_tolerances_zero_and_a_non_callable_direction_are_refused():
    with pytest.raises(ValueError, match="not both 0, got rtol=0.0, atol=0.0"):
        DCDM(rtol=0.0)
    with pytest.raises(TypeError, match="`direction_fn` must be a function"):
        DCDM(direction_fn=3.0)


def test_numpy_and_zero_dimensional_tolerances_are_plain_floats():
    solver = DCDM(rtol=np.float32(1e-3), atol=jnp.asarray(1e-9), max_steps=7)
    assert type(solver.rtol) is float and type(solver.atol) is float
    assert solver.rtol == float(np.float32(1e-3)) and solver.atol == 1e-9
    assert solver == DCDM(rtol=float(np.float32(1e-3)), atol=1e-9, max_steps=7)
    hash(solver)  # static fields must hash


@pytest.mark.parametrize("refresh_every", [None, 3])
@pytest.mark.parametrize("n_orthogonal", [0, 1, 2])
def test_module_and_keyword_forms_are_bit_identical(n_orthogonal, refresh_every):
    settings = dict(
        rtol=1e-10, max_steps=60, n_orthogonal=n_orthogonal, refresh_every=refresh_every
    )
    b = jnp.asarray(B)
    by_keywords = solve(apply_A, b, JACOBI, throw=False, **settings)
    by_module = solve(apply_A, b, JACOBI, DCDM(**settings), throw=False)
    by_name = solve(apply_A, b, JACOBI, solver=DCDM(**settings), throw=False)
    for other in (by_module, by_name):
        np.testing.assert_array_equal(other.value, by_keywords.value)
        assert other.result == by_keywords.result
        assert other.stats.keys() == by_keywords.stats.keys()
        for key in by_keywords.stats:
            np.testing.assert_array_equal(other.stats[key], by_keywords.stats[key])
    # and the solve is a real one: PCG (Jacobi) to 1e-10 against a dense solve;
    # n_orthogonal=0 is steepest descent, which needs more than 60 steps here
    if n_orthogonal:
        assert bool(by_module.successful)
        exact = np.linalg.solve(A, B.ravel()).reshape(N, N)
        # relative residual 1e-10, cond(A) ~ 20: error ~1e-10 of |x| ~ 1; 1e-8 leaves headroom
        np.testing.assert_allclose(by_module.value, exact, rtol=0, atol=1e-8)


def test_defaults_are_the_defaults_of_the_keyword_form():
    b = jnp.asarray(B)
    plain = solve(apply_A, b, lambda r: r)
    np.testing.assert_array_equal(solve(apply_A, b, lambda r: r, DCDM()).value, plain.value)
    assert DCDM() == DCDM(rtol=1e-6, atol=0.0, max_steps=100, n_orthogonal=2, refresh_every=None)


def test_misspelt_setting_is_named_with_the_closest_one():
    with pytest.raises(TypeError, match="`max_step` is not a setting .* Did you mean `max_steps`"):
        solve(apply_A, jnp.asarray(B), lambda r: r, max_step=10)
    with pytest.raises(TypeError, match="`tolerance` is not a setting .* rtol, atol, max_steps"):
        solve(apply_A, jnp.asarray(B), lambda r: r, tolerance=1e-6)


def test_module_and_keywords_together_are_refused():
    with pytest.raises(TypeError, match="either as `solver` or as keywords, not both: .*`rtol`"):
        solve(apply_A, jnp.asarray(B), lambda r: r, DCDM(max_steps=10), rtol=1e-8)
    with pytest.raises(TypeError, match="`solver` must be a sciml.dcdm.DCDM"):
        solve(apply_A, jnp.asarray(B), lambda r: r, lx.CG(rtol=1e-6, atol=1e-6))
    # the way to change one setting of a module
    changed = dataclasses.replace(DCDM(max_steps=10), rtol=1e-8)
    assert changed == DCDM(rtol=1e-8, max_steps=10)


def test_a_solver_holding_another_direction_is_refused():
    direction = lambda r: r  # noqa: E731
    with pytest.raises(ValueError, match="holds a `direction_fn` other than the one given"):
        solve(apply_A, jnp.asarray(B), lambda r: 2 * r, DCDM(direction, rtol=1e-8))
    # the same generator on both is no conflict
    sol = solve(apply_A, jnp.asarray(B), direction, DCDM(direction, rtol=1e-8))
    assert bool(sol.successful)


def test_the_same_module_serves_lineax_and_solve():
    """One `DCDM` with the generator runs `lx.linear_solve` and `solve`: both
    compiled, the same iterates (to round-off) and step count."""
    solver = DCDM(JACOBI, rtol=1e-10, max_steps=100, n_orthogonal=1)
    op = lx.FunctionLinearOperator(
        apply_A, jax.ShapeDtypeStruct((N, N), jnp.float64), lx.positive_semidefinite_tag
    )
    b = jnp.asarray(B)
    via_lineax = lx.linear_solve(op, b, solver)
    direct = jax.jit(lambda b: solve(apply_A, b, JACOBI, solver))(b)
    assert via_lineax.result == lx.RESULTS.successful
    assert int(via_lineax.stats["num_steps"]) == int(direct.stats["num_steps"])
    np.testing.assert_allclose(via_lineax.value, direct.value, rtol=0, atol=1e-13)
    with pytest.raises(ValueError, match="DCDM needs a `direction_fn` under lx.linear_solve"):
        lx.linear_solve(op, b, DCDM(rtol=1e-8))
