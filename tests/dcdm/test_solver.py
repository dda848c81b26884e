"""`sciml.dcdm.DCDM`, the settings of the iteration as a module: checked when
built, the one way to give `solve` its settings (the old keyword and
generator-inside calls are refused with an error that shows the new call), and
a lineax solver that reads the generator from `options`."""

import dataclasses
import re

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


def test_both_tolerances_zero_run_max_steps_as_lineax_cg():
    """`rtol = atol = 0`: every one of `max_steps` steps, then `successful`
    (refused before); with identity directions the iterate of lineax's CG
    after as many steps (both ran 3, exact arithmetic's CG needs 36)."""
    solver = DCDM(rtol=0.0, atol=0.0, max_steps=3, n_orthogonal=1)
    sol = solve(apply_A, jnp.asarray(B), lambda r: r, solver)
    assert bool(sol.successful) and int(sol.stats["num_steps"]) == 3
    op = lx.FunctionLinearOperator(
        apply_A, jax.ShapeDtypeStruct((N, N), jnp.float64), lx.positive_semidefinite_tag
    )
    cg = lx.linear_solve(op, jnp.asarray(B), lx.CG(rtol=0.0, atol=0.0, max_steps=3))
    assert cg.result == lx.RESULTS.successful and int(cg.stats["num_steps"]) == 3
    # measured 3e-16 apart; the 2-step and 4-step iterates are 0.18 and 0.05 away
    np.testing.assert_allclose(sol.value, cg.value, rtol=0, atol=1e-12)


def test_numpy_and_zero_dimensional_tolerances_are_plain_floats():
    solver = DCDM(rtol=np.float32(1e-3), atol=jnp.asarray(1e-9), max_steps=7)
    assert type(solver.rtol) is float and type(solver.atol) is float
    assert solver.rtol == float(np.float32(1e-3)) and solver.atol == 1e-9
    assert solver == DCDM(rtol=float(np.float32(1e-3)), atol=1e-9, max_steps=7)
    hash(solver)  # static fields must hash


@pytest.mark.parametrize("refresh_every", [None, 3])
@pytest.mark.parametrize("n_orthogonal", [0, 1, 2])
def test_the_module_solves_by_position_and_by_name(n_orthogonal, refresh_every):
    settings = DCDM(
        rtol=1e-10, max_steps=60, n_orthogonal=n_orthogonal, refresh_every=refresh_every
    )
    b = jnp.asarray(B)
    by_module = solve(apply_A, b, JACOBI, settings, throw=False)
    by_name = solve(apply_A, b, JACOBI, solver=settings, throw=False)
    np.testing.assert_array_equal(by_name.value, by_module.value)
    assert by_name.result == by_module.result
    for key in by_module.stats:
        np.testing.assert_array_equal(by_name.stats[key], by_module.stats[key])
    # and the solve is a real one: PCG (Jacobi) to 1e-10 against a dense solve;
    # n_orthogonal=0 is steepest descent, which needs more than 60 steps here
    if n_orthogonal:
        assert bool(by_module.successful)
        exact = np.linalg.solve(A, B.ravel()).reshape(N, N)
        # relative residual 1e-10, cond(A) ~ 20: error ~1e-10 of |x| ~ 1; 1e-8 leaves headroom
        np.testing.assert_allclose(by_module.value, exact, rtol=0, atol=1e-8)


def test_no_solver_is_the_default_module():
    b = jnp.asarray(B)
    plain = solve(apply_A, b, lambda r: r)
    np.testing.assert_array_equal(solve(apply_A, b, lambda r: r, DCDM()).value, plain.value)
    assert DCDM() == DCDM(rtol=1e-6, atol=0.0, max_steps=100, n_orthogonal=2, refresh_every=None)


def test_settings_as_keywords_are_refused_showing_the_call_with_a_module():
    b = jnp.asarray(B)
    new_call = re.escape(
        "not as keywords: call `solve(apply_A, b, direction_fn, DCDM(rtol=1e-08, max_steps=10))`"
    )
    with pytest.raises(TypeError, match=new_call):
        solve(apply_A, b, lambda r: r, rtol=1e-8, max_steps=10, throw=False)
    changed = re.escape("solve(apply_A, b, direction_fn, dataclasses.replace(solver, rtol=1e-08))")
    with pytest.raises(TypeError, match=changed):  # beside a module: that module, changed
        solve(apply_A, b, lambda r: r, DCDM(), rtol=1e-8)
    with pytest.raises(TypeError, match="unexpected keyword argument 'tolerance'"):
        solve(apply_A, b, lambda r: r, tolerance=1e-6)
    with pytest.raises(TypeError, match="`solver` must be a sciml.dcdm.DCDM"):
        solve(apply_A, jnp.asarray(B), lambda r: r, lx.CG(rtol=1e-6, atol=1e-6))
    # the way to change one setting of a module
    changed = dataclasses.replace(DCDM(max_steps=10), rtol=1e-8)
    assert changed == DCDM(rtol=1e-8, max_steps=10)


@pytest.mark.parametrize(
    "old_call",
    [
        lambda: DCDM(JACOBI, rtol=1e-8),  # the generator inside, by position
        lambda: DCDM(JACOBI),
        lambda: DCDM(direction_fn=JACOBI, rtol=1e-8),
    ],
)
def test_a_generator_inside_the_module_is_refused_showing_where_it_goes(old_call):
    shown = re.escape(
        "solve(apply_A, b, direction_fn, DCDM(rtol=...)), or lx.linear_solve(operator, b, "
        "DCDM(rtol=...), options={'direction_fn': direction_fn})"
    )
    with pytest.raises(TypeError, match="DCDM holds settings only; .*" + shown):
        old_call()


def test_the_same_module_serves_lineax_and_solve():
    """One `DCDM` runs `lx.linear_solve` (the generator in `options`) and
    `solve`: both compiled, the same iterates (to round-off) and step count."""
    solver = DCDM(rtol=1e-10, max_steps=100, n_orthogonal=1)
    op = lx.FunctionLinearOperator(
        apply_A, jax.ShapeDtypeStruct((N, N), jnp.float64), lx.positive_semidefinite_tag
    )
    b = jnp.asarray(B)
    via_lineax = lx.linear_solve(op, b, solver, options={"direction_fn": JACOBI})
    direct = jax.jit(lambda b: solve(apply_A, b, JACOBI, solver))(b)
    assert via_lineax.result == lx.RESULTS.successful
    assert int(via_lineax.stats["num_steps"]) == int(direct.stats["num_steps"])
    np.testing.assert_allclose(via_lineax.value, direct.value, rtol=0, atol=1e-13)
    shown = re.escape("options={'direction_fn': f})")
    with pytest.raises(
        ValueError, match="DCDM needs the direction generator in `options`.*" + shown
    ):
        lx.linear_solve(op, b, DCDM(rtol=1e-8))
