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
    AssociativeScan,
    Block,
    ChunkedScan,
    DampedNewton,
    Dense,
    Diagonal,
    Fallback,
    Newton,
    ParaGRU,
    ParaLSTM,
    Sequential,
    kalman_filter_means,
    sequential_solve,
    solve_recurrence,
)


def newton_solve(
    fn, h0, xs, *, structure=None, fallback="sequential", throw=True, guess=None, **kw
):
    """`solve_recurrence` with a Newton solver: `(states, solution)`."""
    if isinstance(guess, str):  # "cell", "zeros", "h0" belong to the solver
        kw["guess"], guess = guess, None
    structure = Dense() if structure is None else structure
    fallback = Sequential() if fallback == "sequential" else fallback
    solver = Newton(**kw) if fallback is None else Fallback(Newton(**kw), fallback)
    solution = solve_recurrence(fn, h0, xs, solver, structure=structure, guess=guess, throw=throw)
    return solution.value, solution


class DenseTanh(eqx.Module):
    """A user cell written from scratch: h' = tanh(W h + U x + b), dense Jacobian."""

    W: jax.Array
    U: jax.Array
    b: jax.Array

    def __call__(self, h, x):
        return jnp.tanh(self.W @ h + self.U @ x + self.b)


def dense_tanh(rng, n=5, m=3, scale=0.5):
    return DenseTanh(
        jnp.asarray(scale * rng.normal(size=(n, n)) / np.sqrt(n)),
        jnp.asarray(rng.normal(size=(n, m))),
        jnp.asarray(0.1 * rng.normal(size=n)),
    )


def make_cell(name, key, rng, dtype=jnp.float64):
    """`(cell, structure, state size, input size)`."""
    if name == "user-dense":
        cell = jax.tree_util.tree_map(lambda a: a.astype(dtype), dense_tanh(rng))
        return cell, Dense(), 5, 3
    cls = {"ParaGRU": ParaGRU, "ParaLSTM": ParaLSTM, "GRU": GRU, "LSTM": LSTM}[name]
    kwargs = {"num_heads": 2} if name.startswith("Para") else {}
    cell = cls(4, 6, key=key, dtype=dtype, **kwargs)
    return cell, cell.structure, cell.state_size, 4


def step_and_inputs(cell, name, x):
    """`(fn, us)`: the step function and the inputs it takes, for raw inputs `(..., T, input)`."""
    if name == "user-dense":
        return cell, x
    project = cell.project
    for _ in range(x.ndim - 2):
        project = jax.vmap(project)
    return cell.step, project(x)


def inputs(cell, name, rng, length, dtype=jnp.float64):
    """`(fn, us)` for `length` random input steps."""
    size = 3 if name == "user-dense" else 4
    return step_and_inputs(cell, name, jnp.asarray(rng.normal(size=(length, size)), dtype))


NAMES = ["ParaGRU", "ParaLSTM", "GRU", "LSTM", "user-dense"]


@pytest.mark.parametrize("name", NAMES)
def test_newton_equals_sequential_float64_with_gradients_under_vmap(name, getkey, rng):
    cell, structure, n, _ = make_cell(name, getkey(), rng)
    x = rng.normal(size=(3, 97, 3 if name == "user-dense" else 4))  # 97: odd length
    h0s = 0.5 * rng.normal(size=(3, n))
    weights = rng.normal(size=(3, 97, n))

    def newton(fn, h0, us):
        return newton_solve(fn, h0, us, structure=structure)

    def sequential(fn, h0, us):
        return sequential_solve(fn, h0, us), None

    def loss(cell, x, h0s, solver):
        fn, us = step_and_inputs(cell, name, x)
        hs, diagnostics = jax.vmap(lambda h0, u: solver(fn, h0, u))(h0s, us)
        return jnp.sum(weights * jnp.sin(hs)), (hs, diagnostics)

    @eqx.filter_jit
    def run(cell, x, h0s, solver):
        return jax.grad(loss, argnums=(0, 1, 2), has_aux=True)(cell, x, h0s, solver)

    grads, (hs, diagnostics) = run(cell, x, h0s, newton)
    expected_grads, (expected, _) = run(cell, x, h0s, sequential)
    np.testing.assert_allclose(hs, expected, rtol=1e-11, atol=1e-11)
    stats = diagnostics.stats
    assert bool(jnp.all(stats["newton_converged"])) and not bool(jnp.any(stats["fallback"]))
    assert bool(jnp.all(diagnostics.result == RESULTS.successful))
    assert 1 <= int(jnp.max(stats["iterations"])) <= 8
    assert float(jnp.max(stats["residual"])) <= 1e-12
    # gradients with respect to parameters, inputs and h0: relative error <= 1e-11.
    # Measured (float64, all five cells, every leaf): at most 1.5e-13 (ParaGRU), most
    # leaves 1e-14 to 4e-14; 1e-11 leaves about 70x headroom for other BLAS/backends,
    # and a wrong adjoint (e.g. a missing term of the implicit-function VJP) is O(1e-2+).
    leaves = zip(jax.tree_util.tree_leaves(grads), jax.tree_util.tree_leaves(expected_grads))
    for a, b in leaves:
        assert float(jnp.max(jnp.abs(a - b)) / jnp.max(jnp.abs(b))) <= 1e-11


@pytest.mark.parametrize("name", NAMES)
def test_newton_equals_sequential_float32(name, getkey, rng):
    cell, structure, n, _ = make_cell(name, getkey(), rng, dtype=jnp.float32)
    fn, us = inputs(cell, name, rng, 1000, dtype=jnp.float32)
    h0 = jnp.zeros(n, jnp.float32)
    hs, diagnostics = jax.jit(lambda u: newton_solve(fn, h0, u, structure=structure))(us)
    reference = jax.jit(lambda u: sequential_solve(fn, h0, u))(us)
    assert hs.dtype == jnp.float32 and bool(diagnostics.stats["newton_converged"])
    np.testing.assert_allclose(hs, reference, rtol=1e-4, atol=2e-5)


def test_every_linear_method_inside_newton_and_its_backward(getkey, rng):
    # the accelerator default is "scan"; on CPU "auto" means "sequential"
    cell, structure, n, _ = make_cell("ParaGRU", getkey(), rng)
    fn, us = inputs(cell, "ParaGRU", rng, 70)
    h0 = rng.normal(size=(n,))

    def loss(us, method):
        hs = newton_solve(fn, h0, us, structure=structure, linear=method)[0]
        return jnp.sum(jnp.sin(hs))

    @jax.jit
    def all_methods(us):
        methods = {"scan": AssociativeScan(), "chunked": ChunkedScan(8)}
        return {name: jax.value_and_grad(loss)(us, m) for name, m in methods.items()}

    expected = jax.value_and_grad(lambda us: jnp.sum(jnp.sin(sequential_solve(fn, h0, us))))(us)
    for method, (value, grad) in all_methods(us).items():
        np.testing.assert_allclose(value, expected[0], rtol=1e-12, err_msg=method)
        np.testing.assert_allclose(grad, expected[1], rtol=1e-9, atol=1e-12, err_msg=method)


def test_gradients_through_closures_and_jit_vmap_grad_consistency(rng):
    a = rng.uniform(-1, 1, (4,))
    W = rng.normal(size=(4, 2))
    xs = rng.normal(size=(2, 30, 2))

    def loss(a, xs, solver):
        def cell(h, x):  # parameters enter through the closure
            return jnp.tanh(a * h + W @ x)

        hs = jax.vmap(lambda x: solver(cell, jnp.zeros(4), x))(xs)
        return jnp.sum(hs**2)

    def newton(fn, h0, xs):
        return newton_solve(fn, h0, xs, structure=Diagonal())[0]

    jitted = jax.jit(jax.grad(loss), static_argnums=2)(a, xs, newton)
    expected = jax.jit(jax.grad(loss), static_argnums=2)(a, xs, sequential_solve)
    np.testing.assert_allclose(jitted, expected, rtol=1e-10)
    # vmap consistency: the batched solve equals one solve per sequence
    cell = lambda h, x: jnp.tanh(a * h + W @ x)  # noqa: E731
    solve = jax.jit(lambda xs: newton_solve(cell, jnp.zeros(4), xs, structure=Diagonal())[0])
    batched = jax.jit(jax.vmap(solve))(xs)
    np.testing.assert_allclose(batched[1], solve(xs[1]), rtol=1e-13, atol=1e-15)


def test_linear_cell_converges_in_one_iteration(rng):
    a = rng.uniform(-1.5, 1.5, (200, 3))  # |a| > 1 included
    b = rng.normal(size=(200, 3))
    hs, d = newton_solve(lambda h, ab: ab[0] * h + ab[1], jnp.ones(3), (a, b), structure=Diagonal())
    assert int(d.stats["iterations"]) == 1 and bool(d.stats["newton_converged"])
    np.testing.assert_allclose(
        hs, sequential_solve(lambda h, ab: ab[0] * h + ab[1], jnp.ones(3), (a, b))
    )


def test_k_iterations_make_the_first_k_states_exact(rng):
    # (the best iterate is returned; on this cell each iteration lowers the residual)
    cell = dense_tanh(rng, scale=1.5)
    xs = rng.normal(size=(40, 3))
    h0 = jnp.zeros(5)
    reference = sequential_solve(cell, h0, xs)
    for k in (1, 2, 3):
        hs, d = newton_solve(
            cell,
            h0,
            xs,
            max_steps=k,
            fallback=None,
            throw=False,
            guess="zeros",
            rtol=0.0,
            atol=0.0,
        )
        assert int(d.stats["iterations"]) == k
        np.testing.assert_allclose(hs[:k], reference[:k], rtol=1e-10, atol=1e-12)


class CountingDense(Dense):
    """`Dense()` counting its Jacobian evaluations at run time (one per
    trajectory: the calls are vmapped over time, which calls the callback once)."""

    def value_and_jacobian(self, fn, h):
        jax.debug.callback(lambda: JACOBIANS.append(1))
        return super().value_and_jacobian(fn, h)


JACOBIANS: list[int] = []


def test_dense_newton_takes_one_jacobian_per_iteration_and_none_at_the_last_iterate(rng):
    """K iterations take K Jacobians (the converged iterate's residual needs cell
    values only), and each iterate is the one of an explicit Newton method: the
    block-bidiagonal system `R'(h) δ = −R(h)` solved densely."""
    cell = dense_tanh(rng, scale=1.5)
    xs, h0 = jnp.asarray(rng.normal(size=(12, 3))), jnp.zeros(5)
    T, n = 12, 5

    def residual(flat):
        hs = flat.reshape(T, n)
        return (hs - jax.vmap(cell)(jnp.concatenate([h0[None], hs[:-1]]), xs)).ravel()

    iterate = jnp.zeros(T * n)
    for k in (1, 2, 3):
        iterate = iterate - jnp.linalg.solve(jax.jacfwd(residual)(iterate), residual(iterate))
        JACOBIANS.clear()
        solver = Newton(max_steps=k, guess="zeros", rtol=0.0, atol=0.0)
        solve = jax.jit(lambda xs, s=solver: solve_recurrence(cell, h0, xs, s, structure=CountingDense(), throw=False))  # fmt: skip
        sol = solve(xs)
        assert int(sol.stats["iterations"]) == k and len(JACOBIANS) == k  # was k + 1
        # measured: agrees to 1e-16 (identical arithmetic but the dense solve)
        np.testing.assert_allclose(sol.value, iterate.reshape(T, n), rtol=1e-12, atol=1e-13)
    JACOBIANS.clear()
    converged = jax.jit(lambda xs: solve_recurrence(cell, h0, xs, Newton(), structure=CountingDense()))(xs)  # fmt: skip
    assert bool(converged.stats["converged"])
    assert len(JACOBIANS) == int(converged.stats["iterations"])
    np.testing.assert_allclose(converged.value, sequential_solve(cell, h0, xs), atol=1e-12)


def test_initial_guesses_and_windows_reach_the_same_solution(getkey, rng):
    cell, structure, n, _ = make_cell("ParaLSTM", getkey(), rng)
    fn, us = inputs(cell, "ParaLSTM", rng, 150)
    h0 = 0.3 * rng.normal(size=(n,))
    reference = sequential_solve(fn, h0, us)
    guesses = ("zeros", "h0", reference + 1e-3)

    @jax.jit
    def solve(h0, us):
        results = [newton_solve(fn, h0, us, structure=structure, guess=g) for g in guesses]
        windowed = newton_solve(fn, h0, us, structure=structure, window=64)  # 64 + 64 + 22
        return results, windowed

    results, (windowed, d_windowed) = solve(h0, us)
    for hs, d in results:
        np.testing.assert_allclose(hs, reference, rtol=1e-11, atol=1e-11)
        assert bool(d.stats["newton_converged"])
    np.testing.assert_allclose(windowed, reference, rtol=1e-11, atol=1e-11)
    assert bool(d_windowed.stats["newton_converged"]) and int(d_windowed.stats["iterations"]) >= 1


def _log_cell(h, x):  # finite for h > -2; contractive (slope 1/(h + 2) < 1/2 near h > 0)
    return jnp.log(h + 2) + x


def _windowed(guess, xs, h0, throw):
    """Five windows of 10 steps, one Newton step each, from `guess`."""
    solver = Newton(max_steps=1, window=10)
    return solve_recurrence(
        _log_cell, h0, xs, solver, structure=Diagonal(), guess=guess, throw=throw
    )


_WINDOWED = jax.jit(_windowed, static_argnums=3)


def test_the_worst_window_names_the_result(rng):
    """Five windows of 10 steps, each with its own result, the others
    started at the sequential solution (converged before any step): a window
    started outside the cell's domain makes the solve `recurrence_nonfinite`,
    one that needs more steps than allowed `recurrence_max_steps_reached`,
    whichever window it is (first, middle or last), and `throw=True` raises.
    A failed first or middle window leaves the windows after it converged
    (the cell contracts the error away), so only their worst tells."""
    xs, h0 = rng.uniform(size=(50, 3)), jnp.ones(3)
    reference = sequential_solve(_log_cell, h0, xs)
    nonfinite = _WINDOWED(reference.at[40:].set(-5.0), xs, h0, False)
    assert nonfinite.result == RESULTS.recurrence_nonfinite
    assert bool(nonfinite.stats["nonfinite"]) and not bool(nonfinite.stats["converged"])
    np.testing.assert_array_equal(nonfinite.value[:40], reference[:40])  # windows 1-4: no step
    for start in (0, 20, 40):  # the first, the middle, the last window
        capped = _WINDOWED(reference.at[start : start + 10].add(1.0), xs, h0, False)
        assert capped.result == RESULTS.recurrence_max_steps_reached, start
        assert int(capped.stats["iterations"]) == 1 and not bool(capped.stats["nonfinite"])
        assert not bool(capped.stats["converged"]) and not bool(capped.stats["newton_converged"])
        # one step leaves the failed window 0.037-0.040 off (measured): wrong, not rounding
        assert np.max(np.abs(capped.value - reference)) > 0.03, start
        with pytest.raises(RuntimeError, match="did not reach the tolerance within the step cap"):
            jax.block_until_ready(
                _WINDOWED(reference.at[start : start + 10].add(1.0), xs, h0, True).value
            )
    assert bool(_WINDOWED(reference, xs, h0, False).successful)


def test_quasi_newton_reaches_the_newton_solution_with_more_iterations(rng):
    cell = dense_tanh(rng, scale=0.3)
    xs, h0 = rng.normal(size=(120, 3)), jnp.zeros(5)
    exact, d_exact = newton_solve(cell, h0, xs)
    quasi, d_quasi = newton_solve(cell, h0, xs, quasi=True, max_steps=100)
    np.testing.assert_allclose(quasi, exact, rtol=1e-11, atol=1e-11)
    d_quasi, d_exact = d_quasi.stats, d_exact.stats
    assert bool(d_quasi["newton_converged"]) and d_quasi["iterations"] > d_exact["iterations"]


def non_contractive(rng):
    """A diagonal GRU-like cell with recurrent weights scaled ×8."""
    a = 8 * rng.uniform(-1, 1, 6)
    W = rng.normal(size=(6, 2))
    return lambda h, x: jnp.tanh(a * h + W @ x)


def test_non_contractive_cell_is_caught_and_each_fallback_handles_it(rng):
    cell = non_contractive(rng)
    xs, h0 = rng.normal(size=(300, 2)), jnp.zeros(6)
    reference = sequential_solve(cell, h0, xs)
    options = dict(structure=Diagonal(), max_steps=5)

    @jax.jit
    def run(xs):
        return {
            name: newton_solve(cell, h0, xs, fallback=fallback, throw=False, **options)
            for name, fallback in (
                ("sequential", Sequential()),
                ("damped", DampedNewton()),
                ("none", None),
            )
        }

    results = run(xs)
    hs, solution = results["sequential"]
    d = solution.stats
    assert not bool(d["newton_converged"]) and bool(d["fallback"]) and bool(d["converged"])
    assert solution.result == RESULTS.successful
    np.testing.assert_array_equal(hs, reference)

    hs, solution = results["damped"]
    d = solution.stats
    assert not bool(d["newton_converged"]) and bool(d["fallback"])
    assert int(d["fallback_iterations"]) == 100  # the default cap: flagged, not returned silently
    assert not bool(d["converged"])
    assert solution.result == RESULTS.recurrence_max_steps_reached

    hs, solution = results["none"]
    d = solution.stats
    assert not bool(d["converged"]) and not bool(d["fallback"]) and float(d["residual"]) > 1e-3
    assert solution.result == RESULTS.recurrence_max_steps_reached
    with pytest.raises(RuntimeError, match="did not reach the tolerance"):
        newton_solve(cell, h0, xs, fallback=None, **options)


def test_damped_fallback_converges_where_newton_stalls(rng):
    a = 3 * rng.uniform(-1, 1, (6,))
    W = rng.normal(size=(6, 2))
    cell = lambda h, x: jnp.tanh(a * h + W @ x)  # noqa: E731
    xs, h0 = rng.normal(size=(300, 2)), jnp.zeros(6)
    hs, d = newton_solve(
        cell, h0, xs, structure=Diagonal(), max_steps=3, fallback=DampedNewton(max_steps=400)
    )
    d = d.stats
    assert not bool(d["newton_converged"]) and bool(d["converged"])
    assert 0 < int(d["fallback_iterations"]) < 400
    np.testing.assert_allclose(hs, sequential_solve(cell, h0, xs), atol=1e-10)


def test_nonfinite_iterates_trigger_the_fallback(rng):
    def cell(h, x):  # finite along the true trajectory (h > 0), NaN for h < -2
        return jnp.log(h + 2) + x

    xs, h0 = rng.uniform(size=(50, 3)), jnp.ones(3)
    hs, d = newton_solve(cell, h0, xs, structure=Diagonal(), guess=-5 * jnp.ones((50, 3)))
    d = d.stats
    assert bool(d["nonfinite"]) and bool(d["fallback"]) and bool(d["converged"])
    np.testing.assert_allclose(hs, sequential_solve(cell, h0, xs))
    _, d = newton_solve(
        cell,
        h0,
        xs,
        structure=Diagonal(),
        guess=-5 * jnp.ones((50, 3)),
        fallback=None,
        throw=False,
    )
    assert bool(d.stats["nonfinite"]) and d.result == RESULTS.recurrence_nonfinite


def test_kalman_filter_matches_a_sequential_filter_and_its_limits(rng):
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


def test_structure_check_switch_catches_a_lying_cell(rng):
    cell = dense_tanh(rng)
    xs = rng.normal(size=(20, 3))
    with pytest.raises(RuntimeError, match="Jacobian is not diagonal"):
        newton_solve(cell, jnp.zeros(5), xs, structure=Diagonal(), check_structure=True)
    hs, _ = newton_solve(cell, jnp.zeros(5), xs, structure=Dense(), check_structure=True)
    np.testing.assert_allclose(hs, sequential_solve(cell, jnp.zeros(5), xs), atol=1e-12)


def test_nonfinite_input_is_an_error(rng):
    cell = dense_tanh(rng)
    xs = rng.normal(size=(20, 3))
    xs[7, 1] = np.nan
    with pytest.raises(ValueError, match="`xs` must be finite"):  # eager: issue 12's policy
        newton_solve(cell, jnp.zeros(5), xs)
    with pytest.raises(RuntimeError, match="NaN or Inf"):  # under jit: the solution's result
        jax.jit(lambda xs: newton_solve(cell, jnp.zeros(5), xs)[0])(xs)


@pytest.mark.parametrize(
    "h0, kwargs, match",
    [
        (jnp.zeros((5, 1)), {}, r"h0 must be a floating-point state vector of shape \(n,\)"),
        (jnp.zeros(4), {}, r"shape \(4,\) and one step of xs failed"),
        (jnp.zeros(5), {"structure": Block(2)}, "divisible by 2"),
        (jnp.zeros(5), {"fallback": "retry"}, "backup` must be Sequential"),
        (jnp.zeros(5), {"guess": "ones"}, "guess` must be one of"),
        (jnp.zeros(5), {"guess": jnp.zeros((3, 5))}, r"guess must have shape \(T, n\)"),
        (jnp.zeros(5), {"max_steps": 0}, "max_steps` must be a positive integer"),
        (jnp.zeros(5), {"window": 0}, "window` must be a positive integer or None"),
        (jnp.zeros(5), {"omega": 3.0}, "omega` must be in"),
        (jnp.zeros(5), {"linear": "magic"}, "linear` must be a linear-recurrence method"),
        (jnp.zeros(5, jnp.float32), {}, "returned dtype float64 for a state of dtype float32"),
    ],
)
def test_bad_input_is_a_value_error(h0, kwargs, match, rng):
    cell = dense_tanh(rng)
    with pytest.raises(ValueError, match=match):
        newton_solve(cell, h0, jnp.ones((10, 3)), **kwargs)


def test_cell_output_shape_must_equal_state_shape():
    with pytest.raises(ValueError, match=r"same shape as h0 \(3,\); it returned \(2,\)"):
        newton_solve(lambda h, x: h[:2] + x, jnp.zeros(3), jnp.ones((10, 2)))
    with pytest.raises(ValueError, match="same leading"):
        newton_solve(lambda h, x: h + x[0], jnp.zeros(3), (jnp.ones((10, 3)), jnp.ones((9, 3))))
