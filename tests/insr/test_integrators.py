"""Exact integrator tests: a linear Fourier-basis field on periodic advection.

With a field linear in its weights and `F(u) = −a∂ₓu` mapping the Fourier span
to itself, each step's least-squares problem has an exact zero-residual
solution, so one Gauss–Newton iteration reproduces the integrator's
amplification factor per mode to rounding: midpoint `|g| = 1`, phase
`2·atan(akΔt/2)`; implicit Euler `|g| = 1/√(1 + (akΔt)²)`; explicit Euler
`|g| = √(1 + (akΔt)²)`. The closed forms are written here, independently of
the integrators' own `amplification`. A nonlinear, time-dependent ODE
(`u′ = −u² + βt`, a field constant in space) checks that implicit midpoint
solves its own step equation, which the trapezoid rule does not.
"""

import math
from typing import ClassVar

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import optimistix as optx
import pytest

from sciml import insr


A, LOWER, UPPER = 0.25, -2.0, 2.0
N_MODES = 4


def exact_solver():
    return insr.LeastSquaresSolver(
        optx.GaussNewton(rtol=1e-10, atol=1e-12),
        collocation=insr.Collocation(n_points=64),
        stopping=insr.Stopping(max_steps=5),
    )


def mode_field(m, dtype=jnp.float64):
    coefficients = jnp.zeros((1, 2 * N_MODES + 1), dtype).at[0, m].set(1.0)  # cos k_m (x − lo)
    return insr.FourierBasis(N_MODES, LOWER, UPPER, coefficients=coefficients)


def amplitude_phase(field, m):
    c = field.coefficients[0]
    cos, sin = float(c[m]), float(c[N_MODES + m])
    return math.hypot(cos, sin), math.atan2(sin, cos)


@pytest.mark.parametrize("m", [1, 3])
@pytest.mark.parametrize("integrator", ["midpoint", "implicit", "explicit"])
def test_fourier_mode_amplification_is_exact(m, integrator):
    dt, n = 0.1, 10
    cls = {
        "midpoint": insr.Midpoint,
        "implicit": insr.ImplicitEuler,
        "explicit": insr.ExplicitEuler,
    }
    problem = insr.Advection1D(A, LOWER, UPPER, periodic=True)
    sol = eqx.filter_jit(insr.integrate)(
        mode_field(m),
        cls[integrator](exact_solver()),
        problem,
        0.0,
        n * dt,
        dt,
        key=jax.random.key(0),
    )
    assert sol.successful
    amp, phase = amplitude_phase(insr.field_at(sol.value, -1), m)
    z = A * (2 * math.pi * m / (UPPER - LOWER)) * dt
    expected_amp = {
        "midpoint": 1.0,
        "implicit": (1 + z**2) ** (-n / 2),
        "explicit": (1 + z**2) ** (n / 2),
    }[integrator]
    # u = Re(g^n e^{ik(x−lo)}); g has argument −2atan(z/2) (midpoint) or −atan(z) (Euler)
    per_step = {
        "midpoint": 2 * math.atan(z / 2),
        "implicit": math.atan(z),
        "explicit": math.atan(z),
    }
    expected_phase = math.remainder(n * per_step[integrator], 2 * math.pi)
    # measured errors ~2e-16 (midpoint, m = 1: amplitude 2.2e-16, phase 0); 1e-12 leaves
    # > 1000x headroom
    np.testing.assert_allclose(amp, expected_amp, rtol=1e-12)
    np.testing.assert_allclose(phase, expected_phase, atol=1e-12)
    # the integrators' own factor agrees with the closed form
    g = cls[integrator]().amplification(-1j * z)
    np.testing.assert_allclose(abs(g) ** n, expected_amp, rtol=1e-12)


def test_midpoint_conserves_l2_of_many_modes():
    key = jax.random.key(3)
    coefficients = jax.random.normal(key, (1, 2 * N_MODES + 1))
    field = insr.FourierBasis(N_MODES, LOWER, UPPER, coefficients=coefficients)
    problem = insr.Advection1D(A, LOWER, UPPER, periodic=True)
    sol = insr.integrate(field, insr.Midpoint(exact_solver()), problem, 0.0, 1.0, 0.1, key=key)
    energy = jnp.sum(sol.value.coefficients[:, 0, 1:] ** 2, axis=-1)
    # exact up to float64 rounding over 10 steps (bound 1e-12)
    np.testing.assert_allclose(energy[-1], energy[0], rtol=1e-12)


@pytest.mark.parametrize(("integrator", "order"), [(insr.Midpoint, 2), (insr.ImplicitEuler, 1)])
def test_global_error_order(integrator, order):
    """Error of mode m = 2 at t = 2 against the exact shift, under Δt halving."""
    m, t1 = 2, 2.0
    problem = insr.Advection1D(A, LOWER, UPPER, periodic=True)
    k = 2 * math.pi * m / (UPPER - LOWER)
    errors = []
    for n in (10, 20, 40):
        sol = eqx.filter_jit(insr.integrate)(
            mode_field(m),
            integrator(exact_solver()),
            problem,
            0.0,
            t1,
            t1 / n,
            key=jax.random.key(n),
        )
        c = insr.field_at(sol.value, -1).coefficients[0]
        exact = np.zeros(2 * N_MODES + 1)
        exact[m], exact[N_MODES + m] = math.cos(k * A * t1), math.sin(k * A * t1)
        errors.append(np.linalg.norm(np.asarray(c) - exact))
    rates = np.log2(np.asarray(errors[:-1]) / np.asarray(errors[1:]))
    # measured rates: 2.00 / 2.00 (midpoint), 0.95 / 0.98 (implicit Euler)
    np.testing.assert_allclose(rates, order, atol=0.1)


def midpoint_amplitude_float32(solver):
    """Mode 1's amplitude after 10 midpoint steps of a float32 field (the field
    checked to stay float32)."""
    problem = insr.Advection1D(A, LOWER, UPPER, periodic=True)
    sol = insr.integrate(
        mode_field(1, jnp.float32),
        insr.Midpoint(solver),
        problem,
        0.0,
        1.0,
        0.1,
        key=jax.random.key(0),
    )
    final = insr.field_at(sol.value, -1)
    assert final.coefficients.dtype == jnp.float32
    return amplitude_phase(final, 1)[0]


def test_midpoint_amplitude_float32(float32):
    # float32 cannot meet the float64 tolerances of exact_solver()
    amp = midpoint_amplitude_float32(
        insr.LeastSquaresSolver(
            optx.GaussNewton(rtol=1e-5, atol=1e-6),
            collocation=insr.Collocation(n_points=64),
            stopping=insr.Stopping(max_steps=5),
        )
    )
    # float32 rounding over 10 steps; bound 1e-5 (~100 eps)
    np.testing.assert_allclose(amp, 1.0, atol=1e-5)


def test_float64_solve_of_a_float32_field():
    """`LeastSquaresSolver(dtype=float64)` solves in float64 and returns float32 weights."""
    amp = midpoint_amplitude_float32(
        insr.LeastSquaresSolver(
            optx.GaussNewton(rtol=1e-10, atol=1e-12),
            collocation=insr.Collocation(n_points=64),
            stopping=insr.Stopping(max_steps=5),
            dtype=jnp.float64,
        )
    )
    np.testing.assert_allclose(amp, 1.0, atol=1e-6)  # float32 storage of float64 steps


class Riccati(insr.AbstractEvolutionProblem):
    """`u′ = −u² + β t` for a field constant in space (every point the same ODE)."""

    beta: float = 0.0
    in_size: int = 1
    out_size: int = 1
    boundary_weight: float = 0.0

    def rhs(self, field, t, x):
        return -(field(x) ** 2) + self.beta * t

    def initial_condition(self, x):
        return jnp.ones(1, x.dtype)

    def sample_interior(self, key, n, dtype):
        return jax.random.uniform(key, (n, 1), dtype)

    def sample_boundary(self, key, n, dtype):
        return jnp.zeros((0, 1), dtype)

    def boundary_residual(self, field, t, x):
        return jnp.zeros((0,), x.dtype)


def midpoint_root(u0, t, dt, beta):
    """`u₁` of `(u₁ − u₀)/Δt = −m² + β(t + Δt/2)`, `m = (u₀ + u₁)/2`: with
    `u₁ = 2m − u₀`, `(Δt/2)m² + m − u₀ − (Δt/2)β(t + Δt/2) = 0`, the root near `u₀`."""
    c = u0 + dt / 2 * beta * (t + dt / 2)
    m = (-1 + math.sqrt(1 + 2 * dt * c)) / dt
    return 2 * m - u0


def trapezoid_root(u0, t, dt, beta):
    """`u₁` of the trapezoid rule `(u₁ − u₀)/Δt = (F(t, u₀) + F(t + Δt, u₁))/2`:
    `(Δt/2)u₁² + u₁ − u₀ − (Δt/2)(−u₀² + βt + β(t + Δt)) = 0`."""
    c = u0 + dt / 2 * (-(u0**2) + beta * (2 * t + dt))
    return (-1 + math.sqrt(1 + 2 * dt * c)) / dt


@pytest.mark.parametrize("beta", [0.0, 3.0])
def test_midpoint_solves_its_nonlinear_step_equation(beta):
    """On `u′ = −u²` (and with the time-dependent forcing `β t`) each midpoint
    step is the closed-form root of `(u₁ − u₀)/Δt = F(t + Δt/2, (u₀ + u₁)/2)`;
    the trapezoid rule, equal to it for a linear autonomous `F`, is not."""
    t0, dt, n, u0 = 0.2, 0.5, 4, 1.0
    field = insr.FunctionField(lambda c, x: c, jnp.array([u0]))
    solver = insr.LeastSquaresSolver(
        optx.GaussNewton(rtol=1e-13, atol=1e-14),
        collocation=insr.Collocation(n_points=8),
        stopping=insr.Stopping(max_steps=20),
    )
    sol = eqx.filter_jit(insr.integrate)(
        field,
        insr.Midpoint(solver),
        Riccati(beta=beta),
        t0,
        t0 + n * dt,
        dt,
        key=jax.random.key(0),
        saveat=insr.SaveAt(steps=True),
    )
    values = np.asarray(sol.value.params[:, 0])
    expected, trapezoid = [u0], [u0]
    for i in range(n):
        t = t0 + i * dt
        expected.append(midpoint_root(expected[-1], t, dt, beta))
        trapezoid.append(trapezoid_root(trapezoid[-1], t, dt, beta))
    # measured agreement 2e-16; the trapezoid rule differs by ≥ 1e-2 after the first step
    np.testing.assert_allclose(values, expected, rtol=1e-12)
    assert np.min(np.abs(np.asarray(trapezoid) - expected)[1:]) > 1e-3


class Trapezoid(insr.AbstractPointwiseIntegrator):
    """The trapezoid rule, an integrator the package does not have: it names
    no problem, and no problem names it."""

    solver: insr.AbstractStepSolver = eqx.field(default_factory=insr.LeastSquaresSolver)
    order: ClassVar[int] = 2

    def residual(self, problem, field, previous, t, dt, x):
        average = 0.5 * (problem.rhs(previous, t, x) + problem.rhs(field, t + dt, x))
        return (field(x) - previous(x)) / dt - average

    def amplification(self, z):
        return (1 + z / 2) / (1 - z / 2)


def test_a_new_integrator_steps_the_problems_of_its_declared_kind():
    """`Trapezoid`, defined here, declares through its base the kind of
    problem it steps: the library's `Advection1D` accepts it without naming
    it, and its steps have the trapezoid rule's closed-form amplification
    (`|g| = 1`, phase `2·atan(akΔt/2)` per step, as the midpoint rule's for a
    linear `F`); a problem of another kind still refuses it."""
    m, dt, n = 1, 0.1, 10
    problem = insr.Advection1D(A, LOWER, UPPER, periodic=True)
    sol = eqx.filter_jit(insr.integrate)(
        mode_field(m), Trapezoid(exact_solver()), problem, 0.0, n * dt, dt, key=jax.random.key(0)
    )
    amp, phase = amplitude_phase(insr.field_at(sol.value, -1), m)
    z = A * (2 * math.pi * m / (UPPER - LOWER)) * dt
    # measured errors ~2e-16, as the midpoint rule's; 1e-12 leaves > 1000x headroom
    np.testing.assert_allclose(amp, 1.0, rtol=1e-12)
    np.testing.assert_allclose(
        phase, math.remainder(n * 2 * math.atan(z / 2), 2 * math.pi), atol=1e-12
    )
    velocity = insr.FourierBasis(2, -1.0, 1.0, in_size=2, out_size=2)
    message = (
        r"TaylorGreen2D cannot be stepped with Trapezoid; use Splitting \(`Trapezoid.problems`"
    )
    with pytest.raises(ValueError, match=message):
        insr.integrate(
            velocity, Trapezoid(), insr.TaylorGreen2D(), 0.0, 0.1, 0.05, key=jax.random.key(0)
        )


@pytest.mark.parametrize(
    "cls",
    [
        insr.ExplicitEuler,
        insr.ImplicitEuler,
        insr.Midpoint,
        insr.Splitting,
        insr.IncrementalPotential,
    ],
)
def test_integrators_are_final_and_define_each_method_once(cls):
    """Abstract or final: a final integrator implements its bases' abstract
    methods and overrides none of their concrete ones."""
    for name, value in vars(cls).items():
        if name.startswith("__") or not callable(value):
            continue
        for base in cls.__mro__[1:]:
            inherited = vars(base).get(name)
            if inherited is not None:
                assert getattr(inherited, "__isabstractmethod__", False), (cls, base, name)
    assert not getattr(cls, "__abstractmethods__", None)
