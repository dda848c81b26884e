"""The solver modules and the `Solution` they return, against a Python loop."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from sciml.pararnn import (
    RESULTS,
    Auto,
    DampedNewton,
    Diagonal,
    Fallback,
    Newton,
    Sequential,
    SequentialScan,
    Solution,
    solve_recurrence,
)


def tanh_cell(scale, rng, n=4, m=2):
    a = scale * rng.uniform(-1, 1, n)
    W = rng.normal(size=(n, m))
    return lambda h, x: jnp.tanh(a * h + W @ x)


def loop(cell, h0, xs):
    h, out = np.asarray(h0), []
    for x in xs:
        h = np.asarray(cell(h, x))
        out.append(h)
    return np.array(out)


def test_every_solver_matches_a_python_loop(rng):
    cell = tanh_cell(0.9, rng)
    xs, h0 = rng.normal(size=(60, 2)), 0.1 * rng.normal(size=4)
    expected = loop(cell, h0, xs)
    solvers = {
        "sequential": Sequential(),
        "newton": Newton(),
        "quasi": Newton(quasi=True, max_steps=100, linear=SequentialScan()),
        "damped": DampedNewton(max_steps=500, damping=1e-6),
        "fallback": Fallback(Newton(max_steps=2), Sequential()),
        "auto": Auto(),
    }

    @jax.jit
    def run(xs):
        return {
            k: solve_recurrence(cell, h0, xs, s, structure=Diagonal()) for k, s in solvers.items()
        }

    for name, solution in run(xs).items():
        assert isinstance(solution, Solution)
        assert solution.result == RESULTS.successful, name
        assert bool(solution.stats["converged"]), name
        np.testing.assert_allclose(solution.value, expected, rtol=1e-11, atol=1e-11, err_msg=name)


def test_non_contractive_cell_reports_max_steps_or_raises(rng):
    cell = tanh_cell(8.0, rng, n=6)
    xs, h0 = rng.normal(size=(300, 2)), jnp.zeros(6)
    solution = solve_recurrence(
        cell, h0, xs, Newton(max_steps=3), structure=Diagonal(), throw=False
    )
    assert solution.result == RESULTS.recurrence_max_steps_reached
    assert int(solution.stats["iterations"]) == 3 and not bool(solution.stats["converged"])
    assert "recurrence_max_steps_reached" in repr(solution)
    with pytest.raises(RuntimeError, match="did not reach the tolerance"):
        solve_recurrence(cell, h0, xs, Newton(max_steps=3), structure=Diagonal())


def test_nan_input_reports_nonfinite_or_raises(rng):
    cell = tanh_cell(0.5, rng)
    xs = rng.normal(size=(40, 2))
    xs[11, 0] = np.nan
    for solver in (Newton(), Fallback(Newton(), Sequential()), Sequential()):
        solution = solve_recurrence(
            cell, jnp.zeros(4), xs, solver, structure=Diagonal(), throw=False
        )
        assert solution.result == RESULTS.recurrence_nonfinite, solver
        assert not bool(solution.stats["converged"])
        with pytest.raises(ValueError, match="`xs` must be finite"):  # eager: issue 12's policy
            solve_recurrence(cell, jnp.zeros(4), xs, solver, structure=Diagonal())


@pytest.mark.parametrize(
    "make, match",
    [
        (lambda: Newton(max_steps=0), "max_steps` must be a positive integer"),
        (lambda: Newton(rtol=-1.0), "rtol` must be >= 0"),
        (lambda: Newton(omega=0.0), "omega` must be in"),
        (lambda: Newton(window=0), "window` must be a positive integer or None"),
        (lambda: Newton(linear="scan"), "linear` must be a linear-recurrence method"),
        (lambda: DampedNewton(damping=0.0), "damping` must be positive"),
        (lambda: Fallback(Sequential(), Sequential()), "primary` must be a Newton"),
        (lambda: Fallback(Newton(), Newton()), "backup` must be Sequential"),
        (lambda: Auto(newton=Sequential()), "newton` must be Newton"),
        (lambda: Sequential(unroll=0), "unroll` must be a positive integer"),
    ],
)
def test_check_init_errors(make, match):
    with pytest.raises(ValueError, match=match):
        make()


def test_solver_and_structure_arguments_are_checked(rng):
    cell = tanh_cell(0.5, rng)
    with pytest.raises(ValueError, match="solver must be Sequential"):
        solve_recurrence(cell, jnp.zeros(4), jnp.ones((5, 2)), "newton")
    with pytest.raises(ValueError, match="structure must be one of"):
        solve_recurrence(cell, jnp.zeros(4), jnp.ones((5, 2)), structure="diagonal")
