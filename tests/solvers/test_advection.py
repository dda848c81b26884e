"""Grid baselines for 1-D advection: convergence orders against the exact shift."""

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from solvers.advection import CentralCN, UpwindCN, advection_grid
from solvers.stepping import rollout


A, LOWER, UPPER = 0.25, -2.0, 2.0


def periodic_error(cls, n, a):
    """Max error at t = 2 for u₀ = sin(πx/2) with Δt = 2h (CFL 0.5)."""
    x = advection_grid(n, LOWER, UPPER, periodic=True)
    h = (UPPER - LOWER) / n
    dt, t1 = 2 * h, 2.0
    steps = round(t1 / dt)
    stepper = cls(n, LOWER, UPPER, a, dt=dt, periodic=True)
    u0 = jnp.asarray(np.sin(math.pi * x / 2)[None])
    u = jax.jit(rollout(stepper, steps))(u0)[-1, 0]
    return np.max(np.abs(np.asarray(u) - np.sin(math.pi * (x - a * t1) / 2)))


# Both signs of the velocity: the upwind operator takes its stencil from the side
# the flow comes from, a separate branch for a < 0.
@pytest.mark.parametrize("a", [A, -A])
@pytest.mark.parametrize(("cls", "order"), [(UpwindCN, 1), (CentralCN, 2)])
def test_convergence_order(cls, order, a):
    errors = [periodic_error(cls, n, a) for n in (32, 64, 128)]
    rates = np.log2(np.asarray(errors[:-1]) / np.asarray(errors[1:]))
    # measured rates, either sign: UpwindCN 0.97, 0.98; CentralCN 2.00, 2.00; with
    # the a < 0 upwind stencil on the wrong side: -0.03, -0.01
    np.testing.assert_allclose(rates, order, atol=0.1)


@pytest.mark.parametrize("sign", [1, -1])
def test_dirichlet_keeps_ends_at_zero_and_moves_pulse(sign):
    # a pulse starting 0.5 from one end, moving towards the middle at speed A
    n, dt, a, t1 = 401, 0.05, sign * A, 1.0
    x = advection_grid(n, LOWER, UPPER, periodic=False)
    start = -1.5 * sign
    u0 = np.exp(-0.5 * ((x - start) / 0.1) ** 2)
    u0[[0, -1]] = 0
    exact = np.exp(-0.5 * ((x - start - a * t1) / 0.1) ** 2)
    errors = {}
    for cls in (CentralCN, UpwindCN):
        stepper = cls(n, velocity=a, dt=dt)
        u = np.asarray(jax.jit(rollout(stepper, round(t1 / dt)))(jnp.asarray(u0[None])))[-1, 0]
        assert u[0] == 0 and u[-1] == 0
        errors[cls] = np.max(np.abs(u - exact))
        # the peak lies on the node nearest the exact centre (start + a t = ±1.25)
        assert abs(x[np.argmax(u)] - (start + a * t1)) < 0.5 * (x[1] - x[0])
    # measured max errors at h = 0.01, Δt = 0.05, either sign: CentralCN 1.02e-2
    # (dispersive phase error of Crank–Nicolson), UpwindCN 0.105 (numerical
    # diffusion); a pulse moved the wrong way errs by about 1
    assert errors[CentralCN] < 1.2e-2
    assert 2 * errors[CentralCN] < errors[UpwindCN] < 0.12


@pytest.mark.parametrize("periodic", [True, False])
@pytest.mark.parametrize("cls", [UpwindCN, CentralCN])
def test_negative_velocity_is_the_mirror_image(cls, periodic):
    # Mirror symmetry x -> -x of the domain [-2, 2]: advecting the mirrored initial
    # condition with -a gives the mirror of advecting with +a. Periodic nodes
    # x_i = -2 + ih mirror to node -i (mod n), Dirichlet nodes to node n - 1 - i.
    n, dt, steps = 64, 0.1, 20
    u0 = np.random.default_rng(0).standard_normal(n)
    u0[[0, -1]] = 0
    mirror = (-np.arange(n)) % n if periodic else np.arange(n)[::-1]
    x = advection_grid(n, LOWER, UPPER, periodic=periodic)
    distance = np.abs(x[mirror] + x) % (UPPER - LOWER)  # periodic: -2 is 2
    np.testing.assert_allclose(np.minimum(distance, UPPER - LOWER - distance), 0, atol=1e-15)

    def advect(a, u):
        stepper = cls(n, LOWER, UPPER, a, dt=dt, periodic=periodic)
        return np.asarray(jax.jit(rollout(stepper, steps))(jnp.asarray(u[None])))[-1, 0]

    forward = advect(A, u0)
    # measured difference at most 3e-15 (values up to 3); the a < 0 upwind stencil on
    # the wrong side errs by 1.1
    np.testing.assert_allclose(advect(-A, u0[mirror]), forward[mirror], rtol=0, atol=1e-13)


def test_bad_input():
    with pytest.raises(ValueError, match="`dt`"):
        UpwindCN(16, dt=0.0)
    with pytest.raises(ValueError, match="`n`"):
        CentralCN(2, dt=0.1)
    with pytest.raises(ValueError, match="`u`"):
        UpwindCN(16, dt=0.1)(jnp.zeros((1, 8)))
