"""Bad input to the ParaRNN layers and solvers fails loudly, naming the argument (issue 12).

Before: `RNNModel(tokens=True)` clamped out-of-range token ids (id 50 of a
vocabulary of 10 read row 9); `kalman_filter_means(sigma2=-1)` raised
`ZeroDivisionError` and `sigma2=-2` returned values; infinite tolerances were
accepted (and always "converged"); NaN input was caught only by a host
callback compiled into the layer.
"""

import equinox as eqx
import jax
import jax.numpy as jnp
import jaxtyping
import numpy as np
import pytest

from sciml.pararnn import (
    RNN,
    Auto,
    DampedNewton,
    Newton,
    ParaGRU,
    RNNModel,
    Sequential,
    check_structure,
    kalman_filter_means,
    solve_recurrence,
)
from sciml.recurrence import Dense, Diagonal


def _model(rng_key=0):
    return RNNModel(10, 3, 4, 1, tokens=True, solver=Sequential(), key=jax.random.key(rng_key))


@pytest.mark.parametrize("ids", [[0, 3, 10], [-1, 2, 3], [50, 1, 1]])
def test_token_ids_out_of_range_are_an_error(ids):
    model = _model()
    with pytest.raises(ValueError, match=r"`xs` token ids must lie in \[0, 10\)"):
        model(jnp.array(ids))


def test_token_ids_in_range_are_unchanged_and_float_tokens_are_a_type_error():
    model = _model()
    ids = jnp.array([0, 9, 4])
    # reference: the embedding rows read by hand, then the model's own layers
    rows = model.encoder.weight[np.array([0, 9, 4])]
    hs = rows
    for block in model.blocks:
        hs = block(hs)
    expected = jax.vmap(model.head)(jax.vmap(model.norm)(hs))
    np.testing.assert_allclose(model(ids), expected, rtol=1e-12)
    with pytest.raises(TypeError):  # "integer token ids" (or the runtime type checker's error)
        model(jnp.array([0.0, 1.0]))


def test_token_ids_under_jit_are_clamped_as_documented():
    model = _model()
    y_bad = eqx.filter_jit(model)(jnp.array([0, 3, 50]))
    y_clamped = model(jnp.array([0, 3, 9]))
    np.testing.assert_allclose(y_bad, y_clamped, rtol=1e-12)


@pytest.mark.parametrize("sigma2", [-1.0, -2.0, 0.0, np.nan, np.inf])
def test_kalman_sigma2_must_be_positive_and_finite(sigma2):
    a, b, s = np.full((5, 2), 0.5), np.ones((5, 2)), np.zeros((5, 2))
    with pytest.raises(ValueError, match="`sigma2` must be finite and > 0"):
        kalman_filter_means(a, b, s, sigma2)


@pytest.mark.parametrize("name", ["rtol", "atol"])
@pytest.mark.parametrize("value", [np.nan, np.inf, -1e-3])
def test_tolerances_must_be_finite_and_non_negative(name, value):
    for solver in (Newton, DampedNewton):
        with pytest.raises(ValueError, match=f"`{name}` must be >= 0 and finite"):
            solver(**{name: value})


@pytest.mark.parametrize("value", [np.nan, np.inf, 0.0, 2.5])
def test_omega_out_of_range(value):
    with pytest.raises(ValueError, match="`omega` must be in"):
        Newton(omega=value)


@pytest.mark.parametrize("value", [np.nan, np.inf, 0.0, -1.0])
def test_damping_must_be_positive_and_finite(value):
    with pytest.raises(ValueError, match="`damping` must be positive and finite"):
        DampedNewton(damping=value)


def test_check_structure_rtol_must_be_finite():
    cell = ParaGRU(2, 2, key=jax.random.key(0))
    hs, xs = jnp.zeros((3, 2)), cell.project(jnp.zeros((3, 2)))
    for rtol in (np.nan, np.inf, -1.0):
        with pytest.raises(ValueError, match="`rtol` must be finite and >= 0"):
            check_structure(cell.step, hs, xs, Diagonal(), rtol=rtol)


def test_non_finite_input_eager_is_an_error_naming_it():
    cell = ParaGRU(3, 4, key=jax.random.key(0))
    xs = jnp.ones((9, 3)).at[4, 1].set(jnp.nan)
    for solver in (Sequential(), Newton()):
        with pytest.raises(ValueError, match="`xs` must be finite, got 1 NaN"):
            RNN(cell, solver)(xs)
        with pytest.raises(ValueError, match="`h0` must be finite"):
            RNN(cell, solver)(jnp.ones((9, 3)), jnp.full(4, jnp.inf))
    with pytest.raises(ValueError, match="`xs` must be finite"):
        solve_recurrence(cell.step, jnp.zeros(4), cell.project(xs), Newton())
    model = RNNModel(3, 2, 4, 1, solver=Sequential(), key=jax.random.key(1))
    with pytest.raises(ValueError, match="`xs` must be finite"):
        model(xs)


def test_non_finite_input_under_jit_is_not_checked_on_the_host():
    cell = ParaGRU(3, 4, key=jax.random.key(0))
    xs = jnp.ones((9, 3)).at[4, 1].set(jnp.nan)
    layer = RNN(cell, Sequential())
    ys = eqx.filter_jit(layer)(xs)
    assert np.all(np.isfinite(ys[:4])) and not np.any(np.isfinite(ys[4:]))
    assert "callback" not in str(jax.make_jaxpr(layer)(jnp.ones((9, 3))))


@pytest.mark.parametrize(
    "args, match",
    [
        ((-5, 4, Diagonal()), "`length` must be a positive integer, got -5"),
        ((0, 4, Diagonal()), "`length` must be a positive integer, got 0"),
        ((2048.0, 4, Diagonal()), "`length` must be a positive integer, got 2048.0"),
        ((2048, 0, Diagonal()), "`state_size` must be a positive integer, got 0"),
        ((2048, 4, "diagonal"), "structure must be one of Diagonal"),
    ],
)
def test_auto_select_refuses_a_length_that_is_not_a_positive_int(args, match):
    # (run as a user without the suite's runtime type checker, which would reject
    # the float and the string first)
    jaxtyping.config.update("jaxtyping_disable", True)
    try:
        _check_auto_select(args, match)
    finally:
        jaxtyping.config.update("jaxtyping_disable", False)


def _check_auto_select(args, match):
    # Before: Auto().select(-5, ...) returned a solver as if -5 steps were a length.
    for method in (Auto().select, Auto().uses_newton):
        with pytest.raises(ValueError, match=match):
            method(*args)
    # valid calls: the measured CPU table sends 2048 steps of a diagonal state of 4
    # to Newton and a dense one (not in the CPU table) to Sequential
    auto = Auto(backend="cpu")
    assert auto.select(2048, 4, Diagonal()) is auto.newton
    assert isinstance(auto.select(2048, 4, Dense()), Sequential)
