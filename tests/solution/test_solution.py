import equinox as eqx
import jax
import jax.numpy as jnp
import lineax as lx
import numpy as np
import optimistix as optx
import pytest

from sciml._checks import check_choice, check_positive_int, default_float_dtype
from sciml.solution import RESULTS, Solution, make_solution, result_name


def test_repr_shows_concrete_values():
    sol = make_solution(
        jnp.zeros((128, 8)),
        RESULTS.successful,
        {"iterations": jnp.array(3), "residual": jnp.array(6.1e-13), "converged": jnp.array(True)},
        throw=False,
    )
    assert repr(sol) == (
        "Solution(value=float64[128, 8], result=successful, iterations=3, "
        "residual=6.1e-13, converged=True)"
    )
    failed = make_solution(jnp.zeros(2), RESULTS.max_steps_reached, {}, throw=False)
    assert repr(failed) == "Solution(value=float64[2], result=max_steps_reached)"


def test_results_print_and_name_readably():
    assert str(RESULTS.successful) == "sciml.solution.RESULTS<successful>"
    assert str(RESULTS.promote(lx.RESULTS.successful)) == "sciml.solution.RESULTS<successful>"
    assert (
        RESULTS[RESULTS.promote(optx.RESULTS.nonlinear_divergence)] == "Nonlinear solve diverged."
    )
    assert result_name(RESULTS.successful) == "successful"
    assert result_name(RESULTS.promote(lx.RESULTS.singular)) == "singular"
    assert result_name(jax.jit(lambda r: r)(RESULTS.recurrence_nonfinite)) == "recurrence_nonfinite"
    batch = jax.vmap(lambda p: RESULTS.where(p, RESULTS.successful, RESULTS.nonfinite))(
        jnp.array([True, False])
    )
    with pytest.raises(ValueError, match="not a traced or batched one"):
        result_name(batch)


def test_throw_raises_the_message_and_jit_keeps_it():
    @eqx.filter_jit
    def run(flag):
        result = RESULTS.where(flag, RESULTS.successful, RESULTS.recurrence_max_steps_reached)
        return make_solution(jnp.ones(3), result, {}, throw=True).value

    np.testing.assert_array_equal(run(True), np.ones(3))
    with pytest.raises(eqx.EquinoxRuntimeError, match="Fallback"):
        run(False)


def test_promotes_lineax_and_optimistix_results():
    assert isinstance(RESULTS.promote(lx.RESULTS.breakdown), RESULTS)
    assert RESULTS.promote(lx.RESULTS.breakdown) == RESULTS.breakdown
    assert RESULTS.promote(optx.RESULTS.nonlinear_divergence) == RESULTS.nonlinear_divergence
    sol = make_solution(jnp.zeros(1), lx.RESULTS.successful, {}, throw=True)
    assert bool(sol.successful)


def test_vmapped_solution_prints_a_batch():
    def one(flag):
        result = RESULTS.where(flag, RESULTS.successful, RESULTS.nonfinite)
        return make_solution(jnp.zeros(2), result, {"iterations": jnp.array(1)}, throw=False)

    batch = jax.vmap(one)(jnp.array([True, False]))
    assert isinstance(batch, Solution)
    assert "<batch of 2 results>" in repr(batch)
    np.testing.assert_array_equal(batch.successful, [True, False])


def test_checks_name_the_argument():
    assert check_choice("mode", "a", ("a", "b")) == "a"
    with pytest.raises(ValueError, match=r"`mode` must be one of \('a', 'b'\), got 'c'"):
        check_choice("mode", "c", ("a", "b"))
    assert check_positive_int("steps", np.int64(3)) == 3
    assert check_positive_int("window", None, allow_none=True) is None
    for bad in (0, -1, 2.5, 2.0, True, "3", None):
        with pytest.raises(ValueError, match="`steps` must be a positive integer"):
            check_positive_int("steps", bad)
    assert default_float_dtype() == jnp.float64
    with jax.enable_x64(False):
        assert default_float_dtype() == jnp.float32
