"""Stepper modules and the shared time loop: `rollout` / `repeat` / `record`
against Python loops of stepper calls and against exact solutions; batching by
`jax.vmap`; errors at construction and at trace time."""

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from solvers import burgers, heat, navier_stokes as ns
from solvers.stepping import AbstractStepper, Repeat, record, repeat, rollout


def _python_loop(stepper, u0, n):
    """The obviously-correct trajectory: `n` separate calls of the stepper."""
    out, u, step = [], u0, eqx.filter_jit(stepper)
    for _ in range(n):
        u = step(u)
        out.append(u)
    return jnp.stack(out)


def _ns_field(s=16, seed=0):
    w = ns.random_vorticity(jax.random.key(seed), 1, s, dtype=jnp.float64)
    return 3 * w  # (1, s, s): the channel axis


def _burgers_field(s=32):
    x = np.arange(s) / s
    return jnp.asarray(burgers.cole_hopf(x, 0.0, 0.05))[None]


def _heat_field(s=9):
    return heat.initial_field(jnp.asarray([0.3, 1.0, -0.5, 0.2, 0.7]), s)[None]


STEPPERS = {
    "navier_stokes": (lambda: ns.NavierStokes(16, viscosity=1e-2, dt=1e-2), _ns_field),
    "burgers": (lambda: burgers.Burgers(32, viscosity=0.05, dt=1e-2), _burgers_field),
    "heat": (lambda: heat.Heat(9, dt=2e-3), _heat_field),
    "heat_explicit": (lambda: heat.Heat(9, dt=2e-3, scheme=heat.ExplicitEuler()), _heat_field),
}


@pytest.fixture(params=sorted(STEPPERS))
def stepper_and_field(request):
    make_stepper, make_field = STEPPERS[request.param]
    return make_stepper(), make_field()


def test_rollout_repeat_record_equal_python_loop(stepper_and_field):
    stepper, u0 = stepper_and_field
    loop = _python_loop(stepper, u0, 6)
    dt = stepper.dt

    @jax.jit
    def loops(u0):
        return {
            "rollout": rollout(stepper, 6)(u0),
            "with_init": rollout(stepper, 6, include_init=True)(u0),
            "repeat": repeat(stepper, 6)(u0),
            # Streaming chunk by chunk: 3 + 3 steps = 6 steps.
            "chunked": repeat(stepper, 3)(repeat(stepper, 3)(u0)),
            # A Repeat is a stepper: its rollout samples every n-th step.
            "every_2nd": rollout(repeat(stepper, 2), 3)(u0),
            "record": record(stepper, u0, [0.0, 2 * dt, 2 * dt, 5 * dt, 6 * dt]),
        }

    out = loops(u0)
    # A loop of calls transforms to the state and back every step; the shared
    # loops transform once, so they agree to round-off.
    atol = 1e-13 * float(jnp.abs(loop).max())
    assert out["rollout"].shape == (6, *u0.shape) and out["rollout"].dtype == u0.dtype
    np.testing.assert_allclose(out["rollout"], loop, atol=atol)
    np.testing.assert_array_equal(out["with_init"][0], u0)
    np.testing.assert_allclose(out["with_init"][1:], loop, atol=atol)
    np.testing.assert_allclose(out["repeat"], loop[-1], atol=atol)
    np.testing.assert_allclose(out["chunked"], loop[-1], atol=atol)
    np.testing.assert_allclose(out["every_2nd"], loop[1::2], atol=atol)
    np.testing.assert_allclose(out["record"][0], u0, atol=0.1 * atol)
    np.testing.assert_allclose(out["record"][1:], loop[jnp.array([1, 1, 4, 5])], atol=atol)
    # Unjitted, the loops run too (each primitive compiles on its own).
    np.testing.assert_allclose(rollout(stepper, 2)(u0), loop[:2], atol=atol)


def test_jit_vmap_equals_per_sample_calls(stepper_and_field):
    stepper, u0 = stepper_and_field
    batch = jnp.stack([u0, -0.5 * u0, u0[..., ::-1]])
    batched = jax.jit(jax.vmap(stepper))(batch)
    single = jnp.stack([stepper(u) for u in batch])
    np.testing.assert_allclose(batched, single, atol=1e-13 * float(jnp.abs(single).max()))
    trajectories = jax.jit(jax.vmap(rollout(stepper, 3)))(batch)
    for traj, u in zip(trajectories, batch):
        np.testing.assert_allclose(traj, _python_loop(stepper, u, 3), atol=1e-12)


def test_repeat_traced_count_compiles_once():
    stepper, u0 = ns.NavierStokes(16, viscosity=1e-2, dt=1e-2), _ns_field()

    @jax.jit
    @eqx.debug.assert_max_traces(max_traces=1)
    def advance(u, n):
        return repeat(stepper, n)(u)

    a = advance(u0, jnp.asarray(2))
    b = advance(u0, jnp.asarray(5))
    loop = _python_loop(stepper, u0, 5)
    np.testing.assert_allclose(a, loop[1], atol=1e-13)
    np.testing.assert_allclose(b, loop[4], atol=1e-13)
    np.testing.assert_array_equal(
        advance(u0, jnp.asarray(0)), stepper.from_state(stepper.to_state(u0))
    )


def test_plain_function_as_stepper():
    # Any u -> u function rolls out: here u_{n+1} = A u_n, against matrix powers.
    a = jnp.asarray(np.random.default_rng(0).standard_normal((4, 4)) / 3)
    u0 = jnp.arange(4.0)
    traj = rollout(lambda u: a @ u, 5, include_init=True)(u0)
    powers = [np.linalg.matrix_power(np.asarray(a), k) @ np.asarray(u0) for k in range(6)]
    np.testing.assert_allclose(traj, np.stack(powers), rtol=1e-12)
    np.testing.assert_allclose(repeat(lambda u: a @ u, 5)(u0), powers[-1], rtol=1e-12)


def test_navier_stokes_taylor_green_rollout():
    # sin(2πkx) sin(2πky) without forcing: ω(t) = ω0 exp(−8π²k²νt), exactly the
    # Crank–Nicolson factor per step in the scheme.
    nu, dt, k, n = 1e-3, 1e-3, 2, 50
    stepper = ns.NavierStokes(32, viscosity=nu, dt=dt, forcing="none")
    w0 = ns.taylor_green(32, k=k, amplitude=2.0, dtype=jnp.float64)[None]
    traj = jax.jit(rollout(stepper, n))(w0)
    lam = 8 * np.pi**2 * k**2
    a = 0.5 * dt * nu * lam
    for i in (0, n - 1):
        t = (i + 1) * dt
        np.testing.assert_allclose(traj[i], w0 * ((1 - a) / (1 + a)) ** (i + 1), atol=1e-12)
        np.testing.assert_allclose(traj[i], w0 * np.exp(-lam * nu * t), atol=1e-9)


def test_heat_sine_mode_analytic_decay():
    # sin(kπx) sin(mπy) with zero boundary: exp(−κπ²(k²+m²)t) in the limit; the
    # implicit-Euler, 5-point scheme is first order in dt and second in h.
    s, k, m, t = 33, 1, 2, 0.05
    x = np.linspace(0, 1, s)
    mode = np.sin(k * np.pi * x)[:, None] * np.sin(m * np.pi * x)[None, :]
    exact = mode * np.exp(-(np.pi**2) * (k**2 + m**2) * t)
    errors = []
    for n in (50, 100, 200):
        stepper = heat.Heat(s, dt=t / n)
        out = record(stepper, jnp.asarray(mode)[None], [t])[0, 0]
        errors.append(np.abs(np.asarray(out) - exact).max())
    # Error = C·dt + (spatial error): halving dt halves the differences.
    assert errors[-1] < 0.025 * np.abs(exact).max(), errors
    ratio = (errors[0] - errors[1]) / (errors[1] - errors[2])
    assert 1.8 < ratio < 2.2, errors


def test_burgers_cole_hopf_record():
    nu, s = 0.05, 64
    x = np.arange(s) / s
    stepper = burgers.Burgers(s, viscosity=nu, dt=1e-3)
    u0 = jnp.asarray(burgers.cole_hopf(x, 0.0, nu))[None]
    times = [0.1, 0.3]
    out = jax.jit(lambda u: record(stepper, u, times))(u0)
    for t, u in zip(times, out):
        np.testing.assert_allclose(u[0], burgers.cole_hopf(x, t, nu), atol=1e-11)


def test_float32_stepper():
    u32 = np.asarray(_ns_field(), np.float32)
    with jax.enable_x64(False):
        stepper = ns.NavierStokes(16, viscosity=1e-2, dt=1e-2)
        assert stepper.inv_lap.dtype == jnp.float32
        out = rollout(stepper, 4)(jnp.asarray(u32))
        assert out.dtype == jnp.float32
    out64 = rollout(ns.NavierStokes(16, viscosity=1e-2, dt=1e-2), 4)(_ns_field())
    np.testing.assert_allclose(out, out64, atol=1e-5 * float(jnp.abs(out64).max()))


def test_bad_input():
    with pytest.raises(ValueError, match="even"):
        ns.NavierStokes(33)
    with pytest.raises(ValueError, match="even"):
        burgers.Burgers(63)
    with pytest.raises(ValueError, match="resolution"):
        heat.Heat(2)
    with pytest.raises(ValueError, match="viscosity"):
        ns.NavierStokes(16, viscosity=-1.0)
    with pytest.raises(ValueError, match="forcing"):
        ns.NavierStokes(16, forcing="kolmogorov")
    with pytest.raises(ValueError, match="scheme must be"):
        heat.Heat(9, scheme="crank")
    with pytest.raises(ValueError, match="unstable"):
        heat.Heat(17, dt=1e-2, scheme=heat.ExplicitEuler())
    with pytest.raises(ValueError, match="dtype"):
        ns.NavierStokes(16, dtype=jnp.int32)
    stepper = ns.NavierStokes(16, viscosity=1e-2, dt=1e-2)
    u0 = _ns_field()
    # No channel axis, a batch axis, another grid: trace-time errors naming `u`.
    for bad in (u0[0], u0[None], u0[:, :8, :8]):
        with pytest.raises(ValueError, match="u must be one field of shape"):
            stepper(bad)
        with pytest.raises(ValueError, match="jax.vmap"):
            jax.jit(rollout(stepper, 2))(bad)
    with pytest.raises(ValueError, match="dtype"):
        stepper(u0.astype(jnp.float32))
    with pytest.raises(ValueError, match="multiples of dt"):
        record(stepper, u0, [0.015])
    with pytest.raises(ValueError, match="non-decreasing"):
        record(stepper, u0, [0.02, 0.01])
    with pytest.raises(ValueError, match="at least one"):
        record(stepper, u0, [])
    with pytest.raises(ValueError, match="n must be"):
        rollout(stepper, -1)
    with pytest.raises(ValueError, match="n must be"):
        repeat(stepper, -3)
    with pytest.raises(ValueError, match="stepper must be"):
        rollout(3.0, 2)
    with pytest.raises(ValueError, match="concrete time step"):
        record(lambda u: u, u0, [0.1])
    assert isinstance(repeat(stepper, 2), Repeat) and isinstance(stepper, AbstractStepper)
