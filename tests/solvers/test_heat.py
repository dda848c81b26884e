"""2-D heat equation: exact per-step factors, time order, dense reference, data."""

import jax.numpy as jnp
import numpy as np
import pytest

from solvers import heat
from tests.solvers._heat_reference import dense_heat_records


def _mode(s, k, m):
    x = np.linspace(0, 1, s)
    return np.sin(k * np.pi * x)[:, None] * np.sin(m * np.pi * x)[None, :]


def _lam(s, k, m):
    h = 1 / (s - 1)
    return 4 * np.sin(k * np.pi * h / 2) ** 2 + 4 * np.sin(m * np.pi * h / 2) ** 2


@pytest.mark.parametrize("method", ["implicit", "explicit"])
def test_eigenmode_decays_by_exact_factor(method):
    s, k, m, steps = 17, 2, 3, 7
    params = heat.HeatParams(diffusivity=1.0, dt=5e-4, method=method)
    r = params.diffusivity * params.dt * (s - 1) ** 2
    factor = 1 / (1 + r * _lam(s, k, m)) if method == "implicit" else 1 - r * _lam(s, k, m)
    out = heat.advance(jnp.asarray(_mode(s, k, m)), params, steps)
    np.testing.assert_allclose(np.asarray(out), _mode(s, k, m) * factor**steps, atol=1e-14)


def test_implicit_euler_first_order_in_time_and_analytic_rate():
    s, k, m, t = 33, 1, 2, 0.05
    x0 = jnp.asarray(_mode(s, k, m))
    semi = np.exp(-_lam(s, k, m) * (s - 1) ** 2 * t)  # exact in time, discrete in space
    dts = np.array([t / 10, t / 20, t / 40])
    errors = []
    for dt in dts:
        out = heat.advance(x0, heat.HeatParams(dt=float(dt)), round(t / dt))
        errors.append(np.abs(np.asarray(out) - _mode(s, k, m) * semi).max())
    order = np.polyfit(np.log(dts), np.log(errors), 1)[0]
    assert 0.9 < order < 1.1, (order, errors)
    # The semi-discrete rate tends to the analytic κπ²(k² + m²) at second order.
    rates = [_lam(n, k, m) * (n - 1) ** 2 for n in (17, 33, 65)]
    exact = np.pi**2 * (k**2 + m**2)
    errs = np.abs(np.array(rates) - exact)
    assert 3.8 < errs[0] / errs[1] < 4.2 and 3.8 < errs[1] / errs[2] < 4.2


def test_matches_dense_reference_with_boundaries():
    s, dt, steps = 9, 2e-3, 5
    theta = np.array([0.3, 1.0, -0.5, 0.2, 0.7])
    records = dense_heat_records(s, theta, dt * (s - 1) ** 2, steps, implicit=True)
    times = dt * np.arange(1, steps + 1)
    out = np.asarray(heat.solve(jnp.asarray(theta), s, heat.HeatParams(dt=dt), times))
    np.testing.assert_allclose(out[:, 1:-1, 1:-1], records, atol=1e-13)
    np.testing.assert_allclose(out[:, 0, 1:-1], theta[1])
    np.testing.assert_allclose(out[:, 1:-1, -1], theta[4])


def test_constant_stays_constant_and_float32():
    theta = np.full(5, 0.37)
    out = heat.solve(jnp.asarray(theta), 17, heat.HeatParams(), [0.01, 0.1])
    np.testing.assert_allclose(np.asarray(out), 0.37, atol=1e-13)
    theta = np.array([0.3, 1.0, -0.5, 0.2, 0.7])
    out64 = np.asarray(heat.solve(jnp.asarray(theta), 17, heat.HeatParams(), [0.05]))
    out32 = heat.solve(jnp.asarray(theta, jnp.float32), 17, heat.HeatParams(), [0.05])
    assert out32.dtype == jnp.float32
    np.testing.assert_allclose(np.asarray(out32), out64, atol=1e-5)


def test_dataset():
    d = heat.make_dataset(4, 9, seed=3, n_steps=10, record_every=5, low=100.0, high=500.0)
    assert d["inputs"].shape == (4, 5) and d["outputs"].shape == (4, 2, 9, 9)
    assert d["inputs"].min() >= 100 and d["inputs"].max() <= 500
    np.testing.assert_allclose(d["times"], [5e-3, 1e-2])
    again = heat.make_dataset(
        2, 9, seed=3, n_steps=10, record_every=5, low=100.0, high=500.0, start=2
    )
    np.testing.assert_array_equal(again["inputs"], d["inputs"][2:])
    np.testing.assert_allclose(again["outputs"], d["outputs"][2:], rtol=1e-14)
    direct = heat.solve(jnp.asarray(d["inputs"][1]), 9, heat.HeatParams(), d["times"])
    np.testing.assert_allclose(np.asarray(direct), d["outputs"][1], rtol=1e-13)


def test_bad_input():
    with pytest.raises(ValueError, match="unstable"):
        heat.advance(jnp.zeros((17, 17)), heat.HeatParams(dt=1e-2, method="explicit"), 1)
    with pytest.raises(ValueError, match="dt"):
        heat.HeatParams(dt=0.0)
    with pytest.raises(ValueError, match="diffusivity"):
        heat.HeatParams(diffusivity=-1.0)
    with pytest.raises(ValueError, match="theta"):
        heat.solve(jnp.zeros(4), 9, heat.HeatParams(), [0.01])
    with pytest.raises(ValueError, match="resolution"):
        heat.solve(jnp.zeros(5), 2, heat.HeatParams(), [0.01])
    with pytest.raises(ValueError, match="method"):
        heat.HeatParams(method="crank")
