"""The DCDM iteration against independent references: CG/PCG written out in
numpy, a dense solve, and the properties the paper proves (A-norm monotonicity,
A-orthogonality, scale invariance, one step with the exact inverse)."""

import warnings

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from sciml.dcdm import DCDM, PrecisionWarning, a_norm_error, solve
from sciml.solution import RESULTS


def laplacian_2d(n: int) -> np.ndarray:
    """Dense h²-scaled Dirichlet Laplacian on an n×n grid (SPD)."""
    t = 2 * np.eye(n) - np.eye(n, k=1) - np.eye(n, k=-1)
    return np.kron(t, np.eye(n)) + np.kron(np.eye(n), t)


def system(n=6, seed=0):
    rng = np.random.default_rng(seed)
    A = laplacian_2d(n) + np.diag(rng.uniform(0, 1, n * n))  # SPD, varied diagonal
    b = rng.standard_normal(n * n)
    return A, b


def reference_pcg(A, b, M_inv, steps):
    """Textbook preconditioned CG from x0 = 0; returns the iterates x_1..x_steps."""
    x = np.zeros_like(b)
    r = b.copy()
    z = M_inv @ r
    p = z.copy()
    out = []
    for _ in range(steps):
        Ap = A @ p
        alpha = (r @ z) / (p @ Ap)
        x = x + alpha * p
        r_new = r - alpha * Ap
        z_new = M_inv @ r_new
        p = z_new + (r_new @ z_new) / (r @ z) * p
        r, z = r_new, z_new
        out.append(x)
    return out


@eqx.filter_jit
def _value_after(A, b, direction_fn, k, n_orthogonal):
    """x_k of the solve; one program per (k, n_orthogonal, direction function),
    shared by every matrix, right-hand side and direction parameters."""
    with warnings.catch_warnings():  # rtol=1e-14 on purpose: exactly k steps, never earlier
        warnings.simplefilter("ignore", PrecisionWarning)
        sol = solve(
            lambda x: A @ x,
            b,
            direction_fn,
            DCDM(rtol=1e-14, max_steps=k, n_orthogonal=n_orthogonal),
            throw=False,
        )
    return sol.value


def iterates(A, b, direction_fn, steps, n_orthogonal):
    """x_1..x_steps; `direction_fn` an `eqx.Partial` of a module-level function,
    so that its arrays are arguments of the compiled program, not constants."""
    A, b = jnp.asarray(A), jnp.asarray(b)
    return [
        np.asarray(_value_after(A, b, direction_fn, k, n_orthogonal)) for k in range(1, steps + 1)
    ]


def _matvec(M, r):
    return M @ r


def test_exact_inverse_converges_in_one_step():
    A, b = system()
    A_inv = np.linalg.inv(A)
    for scale in (1.0, -3.5e4):
        sol = solve(lambda x: jnp.asarray(A) @ x, jnp.asarray(b), lambda r, c=scale: c * A_inv @ r)
        assert int(sol.stats["num_steps"]) == 1
        np.testing.assert_allclose(sol.value, np.linalg.solve(A, b), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("n_orthogonal", [1, 4])
def test_identity_directions_are_cg_and_jacobi_directions_are_pcg(n_orthogonal):
    A, b = system()
    steps = 12
    # In exact arithmetic every n_orthogonal >= 1 gives CG; in float64 the
    # first 16 iterates (residual down to 1e-6) agree to 3e-16 relative
    # (measured), so 1e-12 leaves a wide margin for round-off only.
    for M_inv in (np.eye(len(b)), np.diag(1 / np.diag(A))):
        ref = reference_pcg(A, b, M_inv, steps)
        direction = eqx.Partial(_matvec, jnp.asarray(M_inv))
        ours = iterates(A, b, direction, steps, n_orthogonal=n_orthogonal)
        for k, (x_ref, x) in enumerate(zip(ref, ours, strict=True)):
            scale = np.linalg.norm(x_ref)
            assert np.linalg.norm(x - x_ref) <= 1e-12 * scale, f"iterate {k + 1}"


def _identity_plus_tanh(W1, W2, r):
    return r + 0.5 * W2 @ jnp.tanh(3 * W1 @ r)


def nonlinear_direction(n, seed=1):
    """An untrained 'network': the identity plus a fixed random nonlinear map."""
    rng = np.random.default_rng(seed)
    W1 = jnp.asarray(rng.standard_normal((n, n)) / np.sqrt(n))
    W2 = jnp.asarray(rng.standard_normal((n, n)) / np.sqrt(n))
    return eqx.Partial(_identity_plus_tanh, W1, W2)


@pytest.mark.parametrize("n_orthogonal", [0, 2])
def test_a_norm_error_never_increases_and_directions_are_a_orthogonal(n_orthogonal):
    A, b = system()
    x_exact = np.linalg.solve(A, b)
    f = nonlinear_direction(len(b))
    xs = [np.zeros_like(b)] + iterates(A, b, f, 12, n_orthogonal=n_orthogonal)
    apply_A = lambda x: jnp.asarray(A) @ x  # noqa: E731
    errors = [float(a_norm_error(apply_A, jnp.asarray(x), jnp.asarray(x_exact))) for x in xs]
    assert all(e1 <= e0 * (1 + 1e-12) for e0, e1 in zip(errors, errors[1:])), errors
    assert errors[-1] < 0.8 * errors[0], errors  # progress (measured 0.65-0.68 after 12 steps)
    # x_k − x_{k−1} = α_k p_k: the direction of step k, A-orthogonal to the
    # previous n_orthogonal ones (cosine in the A-inner product ≤ 1e-10;
    # without orthogonalisation it is O(0.1)).
    steps = [x1 - x0 for x0, x1 in zip(xs, xs[1:])]
    for k in range(1, len(steps)):
        for j in range(max(0, k - n_orthogonal), k):
            u, v = steps[k], steps[j]
            cosine = (u @ A @ v) / np.sqrt((u @ A @ u) * (v @ A @ v))
            assert abs(cosine) < 1e-10, (k, j, cosine)
    if n_orthogonal == 0:
        u, v = steps[2], steps[1]
        assert abs((u @ A @ v) / np.sqrt((u @ A @ u) * (v @ A @ v))) > 1e-3


def reference_dcdm(apply_A, b, direction_fn, steps, *, n_orthogonal=2, normalise=True):
    """The paper's iteration written out in numpy from x0 = 0: `q = f(r/‖r‖)`
    (`f(r)` with `normalise=False`), A-orthogonalised against the last
    `n_orthogonal` directions, exact line search, recurrence residual
    `r ← r − αAp`. Returns the iterates `x_1..x_steps` and the recurrence
    residuals `r_1..r_steps`."""
    x, r = np.zeros_like(b), b.copy()
    directions, xs, rs = [], [], []
    for _ in range(steps):
        q = direction_fn(r / np.linalg.norm(r) if normalise else r)
        p = q.copy()
        for p_j, Ap_j in directions[-n_orthogonal:] if n_orthogonal else []:
            p -= (q @ Ap_j) / (p_j @ Ap_j) * p_j
        Ap = apply_A(p)
        alpha = (p @ r) / (p @ Ap)
        x, r = x + alpha * p, r - alpha * Ap
        directions.append((p, Ap))
        xs.append(x)
        rs.append(r)
    return xs, rs


def test_nonlinear_directions_match_the_written_out_iteration():
    """With a direction function that is not homogeneous (tanh), the input
    scaling matters: the residual of every step and the final iterate are
    those of the numpy iteration fed the unit-norm residual, and not those of
    one fed the raw residual."""
    A, b = system()
    b = 40.0 * b  # ‖b‖ ≈ 240: the raw residual drives tanh far from its linear range
    f = nonlinear_direction(len(b))
    f_np = lambda r: np.asarray(f(jnp.asarray(r)))  # noqa: E731
    steps = 10
    with warnings.catch_warnings():  # rtol=1e-14 on purpose: exactly `steps` steps
        warnings.simplefilter("ignore", PrecisionWarning)
        sol = solve(
            lambda x: jnp.asarray(A) @ x,
            jnp.asarray(b),
            f,
            DCDM(rtol=1e-14, max_steps=steps),
            throw=False,
        )
    history = np.asarray(sol.stats["residual_history"])[1:]
    xs, rs = reference_dcdm(lambda x: A @ x, b, f_np, steps)
    raw_xs, raw_rs = reference_dcdm(lambda x: A @ x, b, f_np, steps, normalise=False)
    expected, raw = np.linalg.norm(rs, axis=1), np.linalg.norm(raw_rs, axis=1)
    # measured ≤ 2.3e-16 relative per step; the raw-residual iteration's
    # residuals differ by ≥ 52 % at every step
    np.testing.assert_allclose(history, expected, rtol=1e-10)
    assert np.min(np.abs(raw / expected - 1)) > 0.1
    # the iterate: measured 1.1e-15 ‖x*‖ apart; the raw-residual one is 0.69 ‖x*‖ away
    scale = np.linalg.norm(np.linalg.solve(A, b))
    assert np.linalg.norm(np.asarray(sol.value) - xs[-1]) <= 1e-10 * scale
    assert np.linalg.norm(raw_xs[-1] - xs[-1]) > 0.1 * scale


def test_convergence_is_never_declared_on_the_recurrence_residual():
    """An operator applied in float32 inside a float64 solve (an inexact
    `apply_A`): the recurrence residual keeps falling as in exact arithmetic,
    while the true residual `b − apply_A(x)` stalls at float32 rounding,
    ~1e-7 ‖b‖. With `rtol` = 1e-10 the recurrence meets the tolerance, the true
    residual never can: the solve must not report success, and what it reports
    is the true residual."""
    A, b = system()
    A32 = A.astype(np.float32)

    def apply_np(x):
        return (A32 @ x.astype(np.float32)).astype(np.float64)

    def apply_A(x):
        return (jnp.asarray(A32) @ x.astype(jnp.float32)).astype(jnp.float64)

    rtol, steps = 1e-10, 80
    tol = rtol * np.linalg.norm(b)
    sol = solve(apply_A, jnp.asarray(b), lambda r: r, DCDM(rtol=rtol, max_steps=steps), throw=False)
    x = np.asarray(sol.value)
    true = np.linalg.norm(b - np.asarray(apply_A(jnp.asarray(x))))
    # the set-up does what it says: the written-out recurrence residual falls
    # below tol at step 24 (3e-11 ‖b‖) while the true residual there is 1.2e-7 ‖b‖
    # = 1.2e3 tol (measured); declaring convergence on the recurrence residual
    # reports success at step 24 with that true residual
    xs, rs = reference_dcdm(apply_np, b, lambda r: r, steps)
    k = next(k for k, r in enumerate(rs) if np.linalg.norm(r) <= tol)
    assert np.linalg.norm(b - apply_np(xs[k])) > 1e2 * tol
    assert sol.result == RESULTS.max_steps_reached
    assert true > 1e2 * tol
    np.testing.assert_allclose(float(sol.stats["residual_norm"]), true, rtol=1e-6)


def test_scale_of_the_direction_does_not_change_the_iterates():
    A, b = system()
    f = nonlinear_direction(len(b))
    apply_A = lambda x: jnp.asarray(A) @ x  # noqa: E731
    one = solve(apply_A, jnp.asarray(b), f, DCDM(max_steps=15), throw=False)
    scaled = solve(
        apply_A, jnp.asarray(b), lambda r: -250.0 * f(r), DCDM(max_steps=15), throw=False
    )
    np.testing.assert_allclose(scaled.value, one.value, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(
        scaled.stats["residual_history"], one.stats["residual_history"], rtol=1e-9
    )


def test_converges_to_the_dense_solution_on_the_true_residual():
    A, b = system(n=8)
    sol = solve(
        lambda x: jnp.asarray(A) @ x, jnp.asarray(b), lambda r: r, DCDM(rtol=1e-10, max_steps=200)
    )
    assert sol.result == RESULTS.successful
    true = np.linalg.norm(b - A @ np.asarray(sol.value))
    assert true <= 1e-10 * np.linalg.norm(b)
    np.testing.assert_allclose(float(sol.stats["residual_norm"]), true, rtol=1e-6)
    k = int(sol.stats["num_steps"])
    history = np.asarray(sol.stats["residual_history"])
    assert np.all(np.isfinite(history[: k + 1])) and np.all(np.isnan(history[k + 1 :]))
    np.testing.assert_allclose(history[0], np.linalg.norm(b))


def test_refresh_and_grid_shaped_unknowns():
    n = 8
    A = laplacian_2d(n)
    b = np.random.default_rng(3).standard_normal((n, n))

    def apply_A(x):
        return (jnp.asarray(A) @ x.ravel()).reshape(x.shape)

    for refresh_every in (None, 1, 4):
        sol = solve(
            apply_A, jnp.asarray(b), lambda r: r, DCDM(rtol=1e-9, refresh_every=refresh_every)
        )
        expected = np.linalg.solve(A, b.ravel()).reshape(n, n)
        np.testing.assert_allclose(sol.value, expected, rtol=0, atol=1e-8)


def test_float32_network_in_a_float64_loop():
    A, b = system()
    A_inv32 = jnp.asarray(np.linalg.inv(A), jnp.float32)

    def f(r):  # an approximate inverse evaluated in float32
        return A_inv32 @ r.astype(jnp.float32)

    sol = solve(lambda x: jnp.asarray(A) @ x, jnp.asarray(b), f, DCDM(rtol=1e-12))
    assert sol.value.dtype == jnp.float64
    assert np.linalg.norm(b - A @ np.asarray(sol.value)) <= 1e-12 * np.linalg.norm(b)


def test_failures_are_reported_never_claimed_as_convergence():
    A, b = system()
    apply_A = lambda x: jnp.asarray(A) @ x  # noqa: E731
    capped = solve(apply_A, jnp.asarray(b), lambda r: r, DCDM(max_steps=3), throw=False)
    assert capped.result == RESULTS.max_steps_reached
    assert int(capped.stats["num_steps"]) == 3
    with pytest.raises(eqx.EquinoxRuntimeError, match="maximum number of solver steps"):
        solve(apply_A, jnp.asarray(b), lambda r: r, DCDM(max_steps=3))
    zero = solve(apply_A, jnp.asarray(b), lambda r: 0 * r, throw=False)
    assert zero.result == RESULTS.breakdown
    indefinite = solve(lambda x: -x, jnp.asarray(b), lambda r: r, throw=False)
    assert indefinite.result == RESULTS.not_positive_definite
    bad = jnp.asarray(b).at[0].set(jnp.nan)
    under_jit = jax.jit(lambda b: solve(apply_A, b, lambda r: r, throw=False).result)
    assert under_jit(bad) == RESULTS.nonfinite_input
    nan_net = solve(apply_A, jnp.asarray(b), lambda r: r * jnp.nan, throw=False)
    assert nan_net.result == RESULTS.nonfinite_direction
    zero_rhs = solve(apply_A, jnp.zeros_like(jnp.asarray(b)), lambda r: r, DCDM(atol=1e-30))
    assert int(zero_rhs.stats["num_steps"]) == 0


def test_a_nonfinite_residual_mid_loop_stops_the_loop_there_and_is_named():
    """An operator that returns NaN once the iterate is large (the true residual
    is taken every step): the solve stops at the step where the written-out CG
    iterate first exceeds the bound, with `RESULTS.nonfinite`, and returns that
    step's (finite) iterate."""
    A, b = system()
    b = 1e3 * b  # max|x_k| of CG: 509, 800, 890 at k = 1, 2, 3 (850 at the solution)
    bound = 850.0  # directions have entries of order 1: only an iterate can exceed it
    expected = reference_pcg(A, b, np.eye(len(b)), 3)
    first = next(k for k, x in enumerate(expected, start=1) if np.abs(x).max() > bound)
    assert first == 3

    def blows_up(x):
        return jnp.asarray(A) @ x * jnp.where(jnp.abs(x).max() > bound, jnp.nan, 1.0)

    settings = DCDM(max_steps=50, n_orthogonal=1, refresh_every=1)
    sol = solve(blows_up, jnp.asarray(b), lambda r: r, settings, throw=False)
    assert sol.result == RESULTS.nonfinite
    assert int(sol.stats["num_steps"]) == first
    history = np.asarray(sol.stats["residual_history"])
    assert np.isfinite(history[:first]).all() and np.isnan(history[first:]).all()
    # CG to round-off: measured 1e-13 of |x| ~ 1e3; a step more or less moves it by 90
    np.testing.assert_allclose(sol.value, expected[first - 1], rtol=0, atol=1e-8)


def test_bad_arguments_raise_early():
    A, b = system()
    apply_A = lambda x: jnp.asarray(A) @ x  # noqa: E731
    b = jnp.asarray(b)
    with pytest.raises(ValueError, match="`direction_fn` must return the shape"):
        solve(apply_A, b, lambda r: r[:-1])
    with pytest.raises(ValueError, match="`apply_A` must map"):
        solve(lambda x: x[:-1], b, lambda r: r)
    with pytest.raises(ValueError, match="`x0` must have the shape"):
        solve(apply_A, b, lambda r: r, x0=jnp.zeros(3))
    with pytest.raises(ValueError, match="`max_steps` must be a positive integer"):
        solve(apply_A, b, lambda r: r, DCDM(max_steps=0))
    with pytest.raises(ValueError, match="`n_orthogonal` must be an integer >= 0"):
        solve(apply_A, b, lambda r: r, DCDM(n_orthogonal=-1))
    with pytest.raises(ValueError, match="`rtol` and `atol`"):
        solve(apply_A, b, lambda r: r, DCDM(rtol=-1.0))
    with pytest.raises(ValueError, match="`b` must be a floating-point"):
        solve(apply_A, jnp.arange(36), lambda r: r)


def test_jit_and_vmap_agree_with_single_solves():
    A, _ = system()
    rhs = np.random.default_rng(5).standard_normal((3, A.shape[0]))
    apply_A = lambda x: jnp.asarray(A) @ x  # noqa: E731

    def one(b):
        return solve(apply_A, b, lambda r: r, DCDM(rtol=1e-10), throw=False).value

    batched = jax.jit(jax.vmap(one))(jnp.asarray(rhs))
    for i in range(3):
        np.testing.assert_allclose(batched[i], np.linalg.solve(A, rhs[i]), atol=1e-9)


def test_x0_captured_as_a_constant_under_jit():
    """An `x0` closed over from outside `jit` is a constant there: the input
    check must not try to branch on a traced test of it."""
    A, b = system()
    x0 = jnp.ones(A.shape[0])
    apply_A = lambda x: jnp.asarray(A) @ x  # noqa: E731
    solved = jax.jit(lambda b: solve(apply_A, b, lambda r: r, DCDM(rtol=1e-10), x0=x0).value)
    np.testing.assert_allclose(solved(jnp.asarray(b)), np.linalg.solve(A, b), atol=1e-9)


def test_bad_input_is_named():
    """Non-finite tolerances, NaN in `b`, `x0` or the directions, an indefinite
    operator and a dtype mismatch each get an error that names the cause."""
    A, b = system()
    apply_A = lambda x: jnp.asarray(A) @ x  # noqa: E731
    b = jnp.asarray(b)
    for rtol, atol in ((jnp.inf, 0.0), (1e-6, jnp.inf), (float("nan"), 0.0)):
        with pytest.raises(ValueError, match="`rtol` and `atol`"):
            solve(apply_A, b, lambda r: r, DCDM(rtol=rtol, atol=atol))
    with pytest.raises(ValueError, match="`b` contains NaN"):
        solve(apply_A, b.at[3].set(jnp.nan), lambda r: r)
    with pytest.raises(ValueError, match="`x0` contains NaN"):
        solve(apply_A, b, lambda r: r, x0=jnp.zeros_like(b).at[0].set(jnp.inf))
    with pytest.raises(ValueError, match="`apply_A` must return the dtype of `b`"):
        solve(lambda x: apply_A(x).astype(jnp.float32), b, lambda r: r)
    with pytest.raises(eqx.EquinoxRuntimeError, match="not positive definite"):
        solve(lambda x: -apply_A(x), b, lambda r: r).value.block_until_ready()
    with pytest.raises(eqx.EquinoxRuntimeError, match="`direction_fn`"):
        solve(apply_A, b, lambda r: r / 0.0).value.block_until_ready()
    with pytest.raises(Exception, match="`b` or `x0` contains NaN"):  # JaxRuntimeError
        jax.jit(lambda b: solve(apply_A, b, lambda r: r).value)(b.at[0].set(jnp.nan))
