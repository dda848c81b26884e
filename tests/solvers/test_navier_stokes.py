"""Navier–Stokes: exact solutions, convergence order, budgets, transforms, data."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy.integrate import simpson

from solvers import navier_stokes as ns


def _reference_step(w, nu, dt, forcing):
    """Slow, explicit numpy version of one CN/Heun step (full complex FFTs)."""
    s = w.shape[0]
    k = np.fft.fftfreq(s) * s
    kx, ky = np.meshgrid(k, k, indexing="ij")
    lap = 4 * np.pi**2 * (kx**2 + ky**2)
    mask = (3 * np.abs(kx) < s) & (3 * np.abs(ky) < s)

    def nonlinear(w_hat):
        psi = np.zeros_like(w_hat)
        psi[lap > 0] = w_hat[lap > 0] / lap[lap > 0]
        u = np.fft.ifft2(2j * np.pi * ky * psi).real
        v = -np.fft.ifft2(2j * np.pi * kx * psi).real
        wx = np.fft.ifft2(2j * np.pi * kx * w_hat).real
        wy = np.fft.ifft2(2j * np.pi * ky * w_hat).real
        return np.fft.fft2(u * wx + v * wy) * mask

    w_hat = np.fft.fft2(w)
    f_hat = np.fft.fft2(forcing)
    n0 = nonlinear(w_hat)
    a = 0.5 * dt * nu * lap
    tilde = ((1 - a) * w_hat + dt * (f_hat - n0)) / (1 + a)
    n1 = nonlinear(tilde)
    return np.fft.ifft2(((1 - a) * w_hat + dt * (f_hat - 0.5 * (n0 + n1))) / (1 + a)).real


@pytest.fixture(scope="module")
def smooth_field():
    w = np.asarray(ns.random_vorticity(jax.random.key(3), 1, 32, dtype=jnp.float64)[0])
    k = np.fft.fftfreq(32) * 32
    mask = (3 * np.abs(k)[:, None] < 32) & (3 * np.abs(k)[None, :] < 32)
    return 5 * np.fft.ifft2(np.fft.fft2(w) * mask).real  # band-limited, O(1) amplitude


@pytest.mark.parametrize("k", [1, 3])
def test_taylor_green_decay(k):
    nu, dt = 1e-3, 1e-4
    params = ns.NSParams(viscosity=nu, dt=dt, forcing="none")
    w0 = ns.taylor_green(32, k=k, amplitude=2.0, dtype=jnp.float64)
    times = [0.1, 0.5]
    out = np.asarray(ns.solve(w0, params, times))
    lam = 8 * np.pi**2 * k**2
    for t, w in zip(times, out):
        exact = np.asarray(w0) * np.exp(-lam * nu * t)
        # The Crank–Nicolson factor, to round-off...
        steps = round(t / dt)
        a = 0.5 * dt * nu * lam
        np.testing.assert_allclose(w, np.asarray(w0) * ((1 - a) / (1 + a)) ** steps, atol=1e-12)
        # ... and the analytic decay, to near machine precision for this dt.
        np.testing.assert_allclose(w, exact, atol=5e-11 * 2.0)


def test_forced_shell_exact_solution():
    # The FNO forcing lies in the shell |k|² = 8π², so from ω0 = 0 the solution
    # is ω(t) = f (1 − exp(−8π²νt)) / (8π²ν) and the nonlinear term vanishes.
    nu = 1e-2
    params = ns.NSParams(viscosity=nu, dt=1e-4, forcing="fno")
    out = ns.solve(jnp.zeros((16, 16)), params, [0.2, 1.0])
    f = np.asarray(ns.default_forcing(16, jnp.float64))
    lam = 8 * np.pi**2
    for t, w in zip([0.2, 1.0], np.asarray(out)):
        np.testing.assert_allclose(w, f * (1 - np.exp(-lam * nu * t)) / (lam * nu), atol=1e-9)


def test_second_order_in_time(smooth_field):
    t_end, nu = 0.4, 1e-2
    w0 = jnp.asarray(smooth_field)

    def run(dt):
        return np.asarray(ns.solve(w0, ns.NSParams(viscosity=nu, dt=dt), [t_end])[0])

    reference = run(0.4 / 320)
    dts = np.array([0.4 / 10, 0.4 / 20, 0.4 / 40])
    errors = np.array([np.abs(run(dt) - reference).max() for dt in dts])
    order = np.polyfit(np.log(dts), np.log(errors), 1)[0]
    assert 1.8 < order < 2.3, (order, errors)


def test_matches_slow_reference(smooth_field):
    nu, dt = 1e-3, 5e-3
    w = smooth_field
    for _ in range(4):
        w = _reference_step(w, nu, dt, np.asarray(ns.default_forcing(32, jnp.float64)))
    out = ns.solve(jnp.asarray(smooth_field), ns.NSParams(viscosity=nu, dt=dt), [4 * dt])
    np.testing.assert_allclose(np.asarray(out[0]), w, atol=1e-12)


def test_enstrophy_and_energy_budget(smooth_field):
    # Band-limited field + 2/3 dealiasing: advection conserves ∫ω² and ∫|u|², so
    # dZ/dt = −2νP + 2∫fω and dE/dt = −2νZ + 2∫fψ hold up to O(dt²).
    nu, dt = 5e-3, 5e-4
    times = np.linspace(0, 0.5, 51)
    out = np.asarray(ns.solve(jnp.asarray(smooth_field), ns.NSParams(viscosity=nu, dt=dt), times))
    f = np.asarray(ns.default_forcing(32, jnp.float64))
    z = np.asarray(ns.enstrophy(out))
    p = np.asarray(ns.palinstrophy(out))
    work = np.mean(f * out, axis=(-2, -1))
    dz = z[-1] - z[0]
    predicted = simpson(-2 * nu * p + 2 * work, x=times)
    assert abs(dz - predicted) < 1e-4 * abs(dz), (dz, predicted)
    # Energy: ∫ f ψ = Σ f̂ conj(ω̂)/|k|².
    k = np.fft.fftfreq(32) * 32
    k2 = 4 * np.pi**2 * (k[:, None] ** 2 + k[None, :] ** 2)
    inv = np.where(k2 > 0, 1 / np.where(k2 > 0, k2, 1), 0)
    fpsi = np.sum((np.fft.fft2(f) * np.conj(np.fft.fft2(out)) * inv).real, axis=(-2, -1)) / 32**4
    e = np.asarray(ns.kinetic_energy(out))
    de = e[-1] - e[0]
    predicted_e = simpson(-2 * nu * z + 2 * fpsi, x=times)
    assert abs(de - predicted_e) < 1e-4 * abs(de), (de, predicted_e)


def test_chunked_equals_monolithic_and_batch_equals_single(smooth_field):
    params = ns.NSParams(viscosity=1e-3, dt=1e-3)
    w0 = jnp.stack([jnp.asarray(smooth_field), -jnp.asarray(smooth_field).T])
    full = ns.solve(w0, params, [0.03])[:, 0]
    w = w0
    for _ in range(3):
        w = ns.advance(w, params, 10)
    np.testing.assert_allclose(np.asarray(w), np.asarray(full), atol=1e-12)
    single = ns.solve(w0[1], params, [0.03])[0]
    np.testing.assert_allclose(np.asarray(single), np.asarray(full[1]), atol=1e-13)
    jitted = jax.jit(lambda x: ns.advance(x, params, 30))(w0)
    np.testing.assert_allclose(np.asarray(jitted), np.asarray(full), atol=1e-12)


def test_float32_matches_float64(smooth_field):
    params = ns.NSParams(viscosity=1e-3, dt=1e-3)
    out64 = np.asarray(ns.solve(jnp.asarray(smooth_field), params, [0.1]))
    out32 = ns.solve(jnp.asarray(smooth_field, jnp.float32), params, [0.1])
    assert out32.dtype == jnp.float32
    scale = np.abs(out64).max()
    np.testing.assert_allclose(np.asarray(out32), out64, atol=2e-5 * scale)


def test_random_vorticity_covariance():
    # Pointwise variance of the GRF equals Σ_k σ²(4π²|k|² + τ²)^(−α) over the kept modes.
    s, n = 16, 400
    w = np.asarray(ns.random_vorticity(jax.random.key(0), n, s, dtype=jnp.float64))
    k = np.fft.fftfreq(s) * s
    kept = (2 * np.abs(k)[:, None] < s) & (2 * np.abs(k)[None, :] < s)
    k2 = k[:, None] ** 2 + k[None, :] ** 2
    spec = 7.0**3 * (4 * np.pi**2 * k2 + 49) ** -2.5
    expected = np.sum(np.where(kept & (k2 > 0), spec, 0))
    assert abs(w.var() / expected - 1) < 0.05
    np.testing.assert_allclose(w.mean(axis=(1, 2)), 0, atol=1e-12)  # zero-mean mode


def test_dataset_deterministic_extendable_and_nested():
    kw = dict(t_final=0.2, record_every=0.1, dt=0.01)
    a = ns.make_dataset(3, 32, seed=7, **kw)
    b = ns.make_dataset(2, 32, seed=7, start=1, batch_size=1, **kw)
    assert a["inputs"].shape == (3, 32, 32) and a["outputs"].shape == (3, 2, 32, 32)
    np.testing.assert_allclose(a["times"], [0.1, 0.2])
    np.testing.assert_array_equal(a["inputs"][1:], b["inputs"])
    np.testing.assert_allclose(a["outputs"][1:], b["outputs"], atol=1e-12)
    fine = ns.make_dataset(1, 64, seed=7, start=2, **kw)
    coarse = a["outputs"][2]
    err = np.abs(fine["outputs"][0][..., ::2, ::2] - coarse).max()
    assert err < 0.02 * np.abs(coarse).max()
    c = ns.make_dataset(1, 32, seed=8, **kw)
    assert np.abs(c["inputs"][0] - a["inputs"][0]).max() > 0.1


def test_dataset_t_start_gives_the_developed_flow_as_input():
    """With `t_start` the pair is (ω(t_start), ω(t_start + k·record_every)) of the
    same trajectory that starts from the sample's random field at t = 0."""
    kw = dict(record_every=0.1, dt=0.01)
    whole = ns.make_dataset(2, 32, seed=3, t_final=0.3, **kw)
    late = ns.make_dataset(2, 32, seed=3, t_final=0.3, t_start=0.1, **kw)
    np.testing.assert_allclose(late["times"], [0.2, 0.3])
    np.testing.assert_allclose(late["inputs"], whole["outputs"][:, 0], rtol=0, atol=1e-6)
    np.testing.assert_allclose(late["outputs"], whole["outputs"][:, 1:], rtol=0, atol=1e-6)
    assert np.abs(late["inputs"] - whole["inputs"]).max() > 1e-3  # the flow moved
    with pytest.raises(ValueError, match="t_start"):
        ns.make_dataset(1, 32, seed=3, t_final=0.3, t_start=-0.1, **kw)
    with pytest.raises(ValueError, match="multiple of record_every"):
        ns.make_dataset(1, 32, seed=3, t_final=0.3, t_start=0.05, **kw)
    with pytest.raises(ValueError, match="record_every <= t_final - t_start"):
        ns.make_dataset(1, 32, seed=3, t_final=0.3, t_start=0.3, **kw)


def test_bad_input():
    with pytest.raises(ValueError, match="viscosity"):
        ns.NSParams(viscosity=0.0)
    with pytest.raises(ValueError, match="dt"):
        ns.NSParams(dt=-1e-3)
    with pytest.raises(ValueError, match="forcing"):
        ns.NSParams(forcing="kolmogorov")
    with pytest.raises(ValueError, match="even"):
        ns.solve(jnp.zeros((15, 15)), ns.NSParams(), [0.1])
    with pytest.raises(ValueError, match="even"):
        ns.random_vorticity(jax.random.key(0), 1, 33)
    with pytest.raises(ValueError, match="multiples of dt"):
        ns.solve(jnp.zeros((16, 16)), ns.NSParams(dt=0.03), [0.1])
    with pytest.raises(ValueError, match="shape"):
        ns.solve(jnp.zeros((16, 8)), ns.NSParams(), [0.1])
