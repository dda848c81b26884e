"""Grid baselines for 1-D advection: convergence orders against the exact shift."""

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from solvers.advection import CentralCN, UpwindCN, advection_grid
from solvers.stepping import rollout


A, LOWER, UPPER = 0.25, -2.0, 2.0


def periodic_error(cls, n):
    """Max error at t = 2 for u₀ = sin(πx/2) with Δt = 2h (CFL 0.5)."""
    x = advection_grid(n, LOWER, UPPER, periodic=True)
    h = (UPPER - LOWER) / n
    dt, t1 = 2 * h, 2.0
    steps = round(t1 / dt)
    stepper = cls(n, LOWER, UPPER, A, dt=dt, periodic=True)
    u0 = jnp.asarray(np.sin(math.pi * x / 2)[None])
    u = jax.jit(rollout(stepper, steps))(u0)[-1, 0]
    return np.max(np.abs(np.asarray(u) - np.sin(math.pi * (x - A * t1) / 2)))


@pytest.mark.parametrize(("cls", "order"), [(UpwindCN, 1), (CentralCN, 2)])
def test_convergence_order(cls, order):
    errors = [periodic_error(cls, n) for n in (32, 64, 128)]
    rates = np.log2(np.asarray(errors[:-1]) / np.asarray(errors[1:]))
    # measured rates: UpwindCN 0.97, 0.98; CentralCN 2.00, 2.00
    np.testing.assert_allclose(rates, order, atol=0.1)


def test_dirichlet_keeps_ends_at_zero_and_moves_pulse():
    n, dt = 401, 0.05
    x = advection_grid(n, LOWER, UPPER, periodic=False)
    u0 = np.exp(-0.5 * ((x + 1.5) / 0.1) ** 2)
    u0[[0, -1]] = 0
    exact = np.exp(-0.5 * ((x - A * 1.0 + 1.5) / 0.1) ** 2)
    errors = {}
    for cls in (CentralCN, UpwindCN):
        u = np.asarray(jax.jit(rollout(cls(n, dt=dt), 20))(jnp.asarray(u0[None])))[-1, 0]
        assert u[0] == 0 and u[-1] == 0
        errors[cls] = np.max(np.abs(u - exact))
    # measured max error of CentralCN 1.02e-2 at h = 0.01, Δt = 0.05 (dispersive
    # phase error of Crank–Nicolson); upwind's diffusion is larger
    assert errors[CentralCN] < 1.2e-2
    assert errors[UpwindCN] > 2 * errors[CentralCN]


def test_bad_input():
    with pytest.raises(ValueError, match="`dt`"):
        UpwindCN(16, dt=0.0)
    with pytest.raises(ValueError, match="`n`"):
        CentralCN(2, dt=0.1)
    with pytest.raises(ValueError, match="`u`"):
        UpwindCN(16, dt=0.1)(jnp.zeros((1, 8)))
