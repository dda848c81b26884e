"""Burgers: Cole–Hopf exact solution, spectral convergence, time order, data."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from solvers import burgers


NU = 0.05


def _error(s, dt, t=0.3):
    x = np.arange(s) / s
    u0 = jnp.asarray(burgers.cole_hopf(x, 0.0, NU))
    out = burgers.solve(u0, burgers.BurgersParams(viscosity=NU, dt=dt), [t])[0]
    return np.abs(np.asarray(out) - burgers.cole_hopf(x, t, NU)).max()


def test_cole_hopf_spectral_convergence():
    errors = [_error(s, 1e-3) for s in (8, 16, 32, 64)]
    assert errors[-1] < 1e-12
    # Spectral (geometric) convergence: each doubling gains more than a fixed factor.
    assert errors[0] / errors[1] > 100 and errors[1] / errors[2] > 1e3, errors


def test_fourth_order_in_time():
    dts = np.array([0.3 / 4, 0.3 / 8, 0.3 / 16])
    errors = np.array([_error(64, dt) for dt in dts])
    order = np.polyfit(np.log(dts), np.log(errors), 1)[0]
    assert 3.6 < order < 4.4, (order, errors)


def test_float32_batch_and_dataset():
    x = np.arange(64) / 64
    u0 = burgers.cole_hopf(x, 0.0, NU)
    batch = jnp.stack([jnp.asarray(u0), -jnp.asarray(u0[::-1])])
    params = burgers.BurgersParams(viscosity=NU, dt=1e-3)
    out64 = np.asarray(burgers.solve(batch, params, [0.2]))
    out32 = burgers.solve(batch.astype(jnp.float32), params, [0.2])
    assert out32.dtype == jnp.float32
    np.testing.assert_allclose(np.asarray(out32), out64, atol=1e-5)
    np.testing.assert_allclose(out64[0, 0], burgers.cole_hopf(x, 0.2, NU), atol=1e-10)
    d = burgers.make_dataset(3, 128, seed=1, n_records=2, t_final=0.5, dt=1e-3)
    assert d["inputs"].shape == (3, 128) and d["outputs"].shape == (3, 2, 128)
    np.testing.assert_allclose(d["times"], [0.25, 0.5])
    # Mean is conserved (conservation form), and energy decays.
    np.testing.assert_allclose(
        d["outputs"].mean(-1), np.repeat(d["inputs"].mean(-1)[:, None], 2, 1), atol=1e-12
    )
    energy = (d["outputs"] ** 2).mean(-1)
    assert np.all(np.diff(energy, axis=1) < 0) and np.all(
        energy[:, 0] < (d["inputs"] ** 2).mean(-1)
    )
    again = burgers.make_dataset(1, 128, seed=1, n_records=2, t_final=0.5, dt=1e-3, start=2)
    np.testing.assert_array_equal(again["inputs"][0], d["inputs"][2])
    fine = burgers.random_initial(jax.random.key(1), 3, 256)
    np.testing.assert_allclose(
        np.asarray(fine)[2, ::2], d["inputs"][2], atol=0.05 * np.abs(d["inputs"][2]).max()
    )


def test_bad_input():
    with pytest.raises(ValueError, match="viscosity"):
        burgers.BurgersParams(viscosity=-0.1)
    with pytest.raises(ValueError, match="dt"):
        burgers.BurgersParams(dt=0.0)
    with pytest.raises(ValueError, match="even"):
        burgers.solve(jnp.zeros(63), burgers.BurgersParams(), [0.1])
    with pytest.raises(ValueError, match="multiples"):
        burgers.solve(jnp.zeros(64), burgers.BurgersParams(dt=0.03), [0.1])
