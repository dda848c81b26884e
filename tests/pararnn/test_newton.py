"""Newton evaluation against the sequential `lax.scan`: values, gradients, fallbacks, bad input."""

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from sciml.pararnn import (
    GRU,
    LSTM,
    RESULTS,
    ParaGRU,
    ParaLSTM,
    kalman_filter_means,
    newton_solve,
    sequential_solve,
)


class DenseTanh(eqx.Module):
    """A user cell written from scratch: h' = tanh(W h + U x + b), dense Jacobian."""

    W: jax.Array
    U: jax.Array
    b: jax.Array

    def __call__(self, h, x):
        return jnp.tanh(self.W @ h + self.U @ x + self.b)


def dense_tanh(key, n=5, m=3, scale=0.5):
    k1, k2, k3 = jax.random.split(key, 3)
    return DenseTanh(
        scale * jax.random.normal(k1, (n, n)) / np.sqrt(n),
        jax.random.normal(k2, (n, m)),
        0.1 * jax.random.normal(k3, (n,)),
    )


def make_cell(name, key, dtype=jnp.float64):
    """`(fn, structure, state size, input size)`; `fn(h, u)` takes projected inputs."""
    if name == "user-dense":
        cell = jax.tree_util.tree_map(lambda a: a.astype(dtype), dense_tanh(key))
        return cell, "dense", 5, 3
    cls = {"ParaGRU": ParaGRU, "ParaLSTM": ParaLSTM, "GRU": GRU, "LSTM": LSTM}[name]
    kwargs = {"num_heads": 2} if name.startswith("Para") else {}
    cell = cls(4, 6, key=key, dtype=dtype, **kwargs)
    return cell, cell.structure, cell.state_size, 4


def inputs(cell, name, key, length, dtype=jnp.float64):
    x = jax.random.normal(key, (length, 5 if name == "user-dense" else 4), dtype)
    if name == "user-dense":
        return cell, x[:, :3]
    return cell.step, cell.project(x)


NAMES = ["ParaGRU", "ParaLSTM", "GRU", "LSTM", "user-dense"]


@pytest.mark.parametrize("name", NAMES)
def test_newton_equals_sequential_float64_under_vmap(name, getkey):
    cell, structure, n, _ = make_cell(name, getkey())
    fn, us = inputs(cell, name, getkey(), 3 * 97)  # not a power of two
    us = us.reshape(3, 97, *us.shape[1:])
    h0s = 0.5 * jax.random.normal(getkey(), (3, n))

    @jax.jit
    def both(h0s, us):
        newton = jax.vmap(lambda h0, u: newton_solve(fn, h0, u, structure=structure))(h0s, us)
        return newton, jax.vmap(lambda h0, u: sequential_solve(fn, h0, u))(h0s, us)

    (hs, diagnostics), reference = both(h0s, us)
    np.testing.assert_allclose(hs, reference, rtol=1e-11, atol=1e-11)
    assert bool(jnp.all(diagnostics.newton_converged)) and not bool(jnp.any(diagnostics.fallback))
    assert bool(jnp.all(diagnostics.result == RESULTS.successful))
    assert 1 <= int(jnp.max(diagnostics.iterations)) <= 8
    assert float(jnp.max(diagnostics.residual)) <= 1e-12


@pytest.mark.parametrize("name", NAMES)
def test_newton_equals_sequential_float32(name, getkey):
    cell, structure, n, _ = make_cell(name, getkey(), dtype=jnp.float32)
    fn, us = inputs(cell, name, getkey(), 1000, dtype=jnp.float32)
    h0 = jnp.zeros(n, jnp.float32)
    hs, diagnostics = jax.jit(lambda u: newton_solve(fn, h0, u, structure=structure))(us)
    reference = jax.jit(lambda u: sequential_solve(fn, h0, u))(us)
    assert hs.dtype == jnp.float32 and bool(diagnostics.newton_converged)
    np.testing.assert_allclose(hs, reference, rtol=1e-4, atol=2e-5)


@pytest.mark.parametrize("name", NAMES)
def test_gradients_equal_autodiff_through_scan(name, getkey):
    cell, structure, n, _ = make_cell(name, getkey())
    x = jax.random.normal(getkey(), (61, 5 if name == "user-dense" else 4))
    h0 = 0.5 * jax.random.normal(getkey(), (n,))
    weights = jax.random.normal(getkey(), (61, n))

    def loss(cell, x, h0, solver):
        if name == "user-dense":
            fn, us = cell, x[:, :3]
        else:
            fn, us = cell.step, cell.project(x)
        return jnp.sum(weights * jnp.sin(solver(fn, h0, us)))

    def newton(fn, h0, us):
        return newton_solve(fn, h0, us, structure=structure)[0]

    got = eqx.filter_jit(jax.grad(lambda c, x, h0: loss(c, x, h0, newton), argnums=(0, 1, 2)))(
        cell, x, h0
    )
    expected = eqx.filter_jit(
        jax.grad(lambda c, x, h0: loss(c, x, h0, sequential_solve), argnums=(0, 1, 2))
    )(cell, x, h0)
    for a, b in zip(jax.tree_util.tree_leaves(got), jax.tree_util.tree_leaves(expected)):
        assert float(jnp.max(jnp.abs(a - b)) / jnp.max(jnp.abs(b))) <= 1e-5


def test_every_linear_method_inside_newton_and_its_backward(getkey):
    # the accelerator default is "scan"; on CPU "auto" means "sequential"
    cell, structure, n, _ = make_cell("ParaLSTM", getkey())
    fn, us = inputs(cell, "ParaLSTM", getkey(), 70)
    h0 = jax.random.normal(getkey(), (n,))

    def loss(us, method):
        hs = newton_solve(fn, h0, us, structure=structure, method=method, chunk_size=8)[0]
        return jnp.sum(jnp.sin(hs))

    @jax.jit
    def all_methods(us):
        return {m: jax.value_and_grad(loss)(us, m) for m in ("scan", "chunked", "sequential")}

    expected = jax.value_and_grad(lambda us: jnp.sum(jnp.sin(sequential_solve(fn, h0, us))))(us)
    for method, (value, grad) in all_methods(us).items():
        np.testing.assert_allclose(value, expected[0], rtol=1e-12, err_msg=method)
        np.testing.assert_allclose(grad, expected[1], rtol=1e-9, atol=1e-12, err_msg=method)


def test_gradients_through_closures_and_jit_vmap_grad_consistency(getkey):
    a = jax.random.uniform(getkey(), (4,), minval=-1, maxval=1)
    W = jax.random.normal(getkey(), (4, 2))
    xs = jax.random.normal(getkey(), (2, 30, 2))

    def loss(a, xs, solver):
        def cell(h, x):  # parameters enter through the closure
            return jnp.tanh(a * h + W @ x)

        hs = jax.vmap(lambda x: solver(cell, jnp.zeros(4), x))(xs)
        return jnp.sum(hs**2)

    def newton(fn, h0, xs):
        return newton_solve(fn, h0, xs, structure="diagonal")[0]

    eager = jax.grad(loss)(a, xs, newton)
    jitted = jax.jit(jax.grad(loss), static_argnums=2)(a, xs, newton)
    expected = jax.jit(jax.grad(loss), static_argnums=2)(a, xs, sequential_solve)
    np.testing.assert_allclose(eager, expected, rtol=1e-10)
    np.testing.assert_allclose(jitted, expected, rtol=1e-10)


def test_linear_cell_converges_in_one_iteration(getkey):
    a = jax.random.uniform(getkey(), (200, 3), minval=-1.5, maxval=1.5)  # |a| > 1 included
    b = jax.random.normal(getkey(), (200, 3))
    hs, d = newton_solve(lambda h, ab: ab[0] * h + ab[1], jnp.ones(3), (a, b), structure="diagonal")
    assert int(d.iterations) == 1 and bool(d.newton_converged)
    np.testing.assert_allclose(
        hs, sequential_solve(lambda h, ab: ab[0] * h + ab[1], jnp.ones(3), (a, b))
    )


def test_k_iterations_make_the_first_k_states_exact(getkey):
    # (the best iterate is returned; on this cell each iteration lowers the residual)
    cell = dense_tanh(getkey(), scale=1.5)
    xs = jax.random.normal(getkey(), (40, 3))
    h0 = jnp.zeros(5)
    reference = sequential_solve(cell, h0, xs)
    for k in (1, 2, 3):
        hs, d = newton_solve(
            cell, h0, xs, max_iter=k, fallback="none", throw=False, guess="zeros", rtol=0, atol=0
        )
        assert int(d.iterations) == k
        np.testing.assert_allclose(hs[:k], reference[:k], rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("guess", ["cell", "zeros", "h0", "array"])
def test_initial_guesses_and_windows_reach_the_same_solution(guess, getkey):
    cell, structure, n, _ = make_cell("ParaLSTM", getkey())
    fn, us = inputs(cell, "ParaLSTM", getkey(), 150)
    h0 = 0.3 * jax.random.normal(getkey(), (n,))
    if guess == "array":
        guess = sequential_solve(fn, h0, us) + 1e-3
    reference = sequential_solve(fn, h0, us)

    @jax.jit
    def solve(h0, us):
        full = newton_solve(fn, h0, us, structure=structure, guess=guess)
        windowed = newton_solve(fn, h0, us, structure=structure, guess=guess, window=64)
        return full, windowed

    (full, d_full), (windowed, d_windowed) = solve(h0, us)
    np.testing.assert_allclose(full, reference, rtol=1e-11, atol=1e-11)
    np.testing.assert_allclose(windowed, reference, rtol=1e-11, atol=1e-11)
    assert bool(d_windowed.newton_converged) and int(d_windowed.iterations) >= 1


def test_quasi_newton_reaches_the_newton_solution_with_more_iterations(getkey):
    cell = dense_tanh(getkey(), scale=0.3)
    xs, h0 = jax.random.normal(getkey(), (120, 3)), jnp.zeros(5)
    exact, d_exact = newton_solve(cell, h0, xs)
    quasi, d_quasi = newton_solve(cell, h0, xs, quasi=True, max_iter=100)
    np.testing.assert_allclose(quasi, exact, rtol=1e-11, atol=1e-11)
    assert bool(d_quasi.newton_converged) and int(d_quasi.iterations) > int(d_exact.iterations)


def non_contractive(key):
    """A diagonal GRU-like cell with recurrent weights scaled ×8."""
    k1, k2 = jax.random.split(key)
    a = 8 * jax.random.uniform(k1, (6,), minval=-1, maxval=1)
    W = jax.random.normal(k2, (6, 2))
    return lambda h, x: jnp.tanh(a * h + W @ x)


def test_non_contractive_cell_is_caught_and_each_fallback_handles_it(getkey):
    cell = non_contractive(getkey())
    xs, h0 = jax.random.normal(getkey(), (300, 2)), jnp.zeros(6)
    reference = sequential_solve(cell, h0, xs)
    options = dict(structure="diagonal", max_iter=5)

    @jax.jit
    def run(xs):
        return {
            fallback: newton_solve(cell, h0, xs, fallback=fallback, throw=False, **options)
            for fallback in ("sequential", "damped", "none")
        }

    results = run(xs)
    hs, d = results["sequential"]
    assert not bool(d.newton_converged) and bool(d.fallback) and bool(d.converged)
    assert d.result == RESULTS.successful
    np.testing.assert_array_equal(hs, reference)

    hs, d = results["damped"]
    assert not bool(d.newton_converged) and bool(d.fallback)
    assert int(d.fallback_iterations) == 100  # the default cap: flagged, not returned silently
    assert not bool(d.converged) and d.result == RESULTS.max_iterations_reached

    hs, d = results["none"]
    assert not bool(d.converged) and not bool(d.fallback) and float(d.residual) > 1e-3
    assert d.result == RESULTS.max_iterations_reached
    with pytest.raises(RuntimeError, match="did not reach the tolerance"):
        newton_solve(cell, h0, xs, fallback="none", **options)


def test_damped_fallback_converges_where_newton_stalls(getkey):
    a = 3 * jax.random.uniform(getkey(), (6,), minval=-1, maxval=1)
    W = jax.random.normal(getkey(), (6, 2))
    cell = lambda h, x: jnp.tanh(a * h + W @ x)  # noqa: E731
    xs, h0 = jax.random.normal(getkey(), (300, 2)), jnp.zeros(6)
    hs, d = newton_solve(
        cell, h0, xs, structure="diagonal", max_iter=3, fallback="damped", fallback_max_iter=400
    )
    assert not bool(d.newton_converged) and bool(d.converged)
    assert 0 < int(d.fallback_iterations) < 400
    np.testing.assert_allclose(hs, sequential_solve(cell, h0, xs), atol=1e-10)


def test_nonfinite_iterates_trigger_the_fallback(getkey):
    def cell(h, x):  # finite along the true trajectory (h > 0), NaN for h < -2
        return jnp.log(h + 2) + x

    xs, h0 = jax.random.uniform(getkey(), (50, 3)), jnp.ones(3)
    hs, d = newton_solve(cell, h0, xs, structure="diagonal", guess=-5 * jnp.ones((50, 3)))
    assert bool(d.nonfinite) and bool(d.fallback) and bool(d.converged)
    np.testing.assert_allclose(hs, sequential_solve(cell, h0, xs))
    _, d = newton_solve(
        cell,
        h0,
        xs,
        structure="diagonal",
        guess=-5 * jnp.ones((50, 3)),
        fallback="none",
        throw=False,
    )
    assert bool(d.nonfinite) and d.result == RESULTS.nonfinite


def test_kalman_filter_matches_a_sequential_filter_and_its_limits():
    rng = np.random.default_rng(0)
    a, b, y = rng.uniform(-3, 3, (60, 2)), rng.normal(size=(60, 2)), rng.normal(size=(60, 2))
    sigma2 = 0.7
    m, P, expected = np.zeros(2), np.zeros(2), []
    for t in range(60):  # predict, update; z_0 = 0 exactly
        m_pred = (a[t] * m if t else 0) + b[t]
        P_pred = (a[t] ** 2 * P if t else 0) + 1
        gain = P_pred / (P_pred + sigma2)
        m, P = m_pred + gain * (y[t] - m_pred), (1 - gain) * P_pred
        expected.append(m)
    np.testing.assert_allclose(kalman_filter_means(a, b, y, sigma2), expected, rtol=1e-12)
    # σ² → ∞: the undamped step (the linear recurrence itself); σ² → 0: no step
    a = a / 3  # contractive, so that the undamped recurrence stays of size one
    undamped = sequential_solve(lambda z, ab: ab[0] * z + ab[1], jnp.zeros(2), (a, b))
    np.testing.assert_allclose(kalman_filter_means(a, b, y, 1e12), undamped, rtol=1e-8, atol=1e-8)
    np.testing.assert_allclose(kalman_filter_means(a, b, y, 1e-12), y, rtol=1e-8, atol=1e-8)


def test_structure_check_switch_catches_a_lying_cell(getkey):
    cell = dense_tanh(getkey())
    xs = jax.random.normal(getkey(), (20, 3))
    with pytest.raises(RuntimeError, match="Jacobian is not diagonal"):
        newton_solve(cell, jnp.zeros(5), xs, structure="diagonal", check_structure=True)
    hs, _ = newton_solve(cell, jnp.zeros(5), xs, structure="dense", check_structure=True)
    np.testing.assert_allclose(hs, sequential_solve(cell, jnp.zeros(5), xs), atol=1e-12)


def test_nonfinite_input_is_an_error(getkey):
    cell = dense_tanh(getkey())
    xs = jax.random.normal(getkey(), (20, 3)).at[7, 1].set(jnp.nan)
    with pytest.raises(RuntimeError, match="NaN or Inf"):
        newton_solve(cell, jnp.zeros(5), xs)


@pytest.mark.parametrize(
    "h0, kwargs, match",
    [
        (jnp.zeros((5, 1)), {}, r"h0 must be a floating-point state vector of shape \(n,\)"),
        (jnp.zeros(4), {}, r"shape \(4,\) and one step of xs failed"),
        (jnp.zeros(5), {"structure": "block(2)"}, "divisible by 2"),
        (jnp.zeros(5), {"fallback": "retry"}, "fallback must be one of"),
        (jnp.zeros(5), {"guess": "ones"}, "guess must be one of"),
        (jnp.zeros(5), {"guess": jnp.zeros((3, 5))}, r"guess must have shape \(T, n\)"),
        (jnp.zeros(5), {"max_iter": 0}, "max_iter must be a positive integer"),
        (jnp.zeros(5), {"window": 2.5}, "window must be a positive integer or None"),
        (jnp.zeros(5), {"omega": 3.0}, "omega must be in"),
        (jnp.zeros(5), {"method": "magic"}, "method must be one of"),
        (jnp.zeros(5, jnp.float32), {}, "returned dtype float64 for a state of dtype float32"),
    ],
)
def test_bad_input_is_a_value_error(h0, kwargs, match, getkey):
    cell = dense_tanh(getkey())
    with pytest.raises(ValueError, match=match):
        newton_solve(cell, h0, jnp.ones((10, 3)), **kwargs)


def test_cell_output_shape_must_equal_state_shape():
    with pytest.raises(ValueError, match=r"same shape as h0 \(3,\); it returned \(2,\)"):
        newton_solve(lambda h, x: h[:2] + x, jnp.zeros(3), jnp.ones((10, 2)))
    with pytest.raises(ValueError, match="same leading"):
        newton_solve(lambda h, x: h + x[0], jnp.zeros(3), (jnp.ones((10, 3)), jnp.ones((9, 3))))
