"""The neural fields against hand-written references of their formulas."""

import math

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import optimistix as optx

from sciml import insr


def test_siren_is_the_papers_network_and_initialisation():
    omega0, width = 30.0, 64  # ω₀ and the 2 hidden layers: the defaults
    field = insr.SIREN(3, 2, width=width, key=jax.random.key(0))
    weights = [np.asarray(layer.weight) for layer in field.layers]
    biases = [np.asarray(layer.bias) for layer in field.layers]
    assert [w.shape for w in weights] == [(width, 3), (width, width), (width, width), (2, width)]

    # the paper's bounds, written out: first layer U(±1/fan_in), the others
    # (output included) U(±√(6/fan_in)/ω₀); biases PyTorch's U(±1/√fan_in)
    bounds = [1 / 3, math.sqrt(6 / width) / omega0, math.sqrt(6 / width) / omega0]
    bounds.append(math.sqrt(6 / width) / omega0)
    for w, b, bound, fan_in in zip(weights, biases, bounds, [3, width, width, width]):
        assert np.abs(w).max() <= bound
        # uniform on the whole interval, not a narrower one: with >= 128 draws
        # the largest |w| is above 0.95·bound unless the interval is too small
        # (probability 0.95^128 < 0.002 per layer for a correct U(±bound))
        assert np.abs(w).max() > 0.95 * bound
        # std of U(±c) is c/√3; 10% covers the sampling error of >= 128 draws
        assert abs(w.std() - bound / math.sqrt(3)) < 0.1 * bound / math.sqrt(3)
        assert np.abs(b).max() <= 1 / math.sqrt(fan_in)

    x = np.array([0.3, -0.7, 0.1])
    h = x
    for w, b in zip(weights[:-1], biases[:-1]):
        h = np.sin(omega0 * (w @ h + b))
    expected = weights[-1] @ h + biases[-1]
    np.testing.assert_allclose(np.asarray(field(jnp.asarray(x, jnp.float32))), expected, rtol=1e-5)


def test_periodic_embedding_is_exactly_periodic_with_its_derivative():
    lower, upper = -2.0, 2.0
    inner = insr.SIREN(2, 1, width=16, hidden_layers=1, key=jax.random.key(1))
    field = insr.PeriodicEmbedding(inner, lower, upper)
    x = jnp.linspace(lower, upper, 7)[:, None]
    value = jax.vmap(field)(x)
    shifted = jax.vmap(field)(x + (upper - lower))
    # float32 rounding of the angle: measured differences ~1e-6
    np.testing.assert_allclose(np.asarray(shifted), np.asarray(value), atol=1e-5)
    np.testing.assert_allclose(np.asarray(value[-1]), np.asarray(value[0]), atol=1e-5)
    derivative = jax.vmap(jax.jacfwd(lambda y: field(y)[0]))
    np.testing.assert_allclose(
        np.asarray(derivative(x[-1:])), np.asarray(derivative(x[:1])), rtol=1e-4, atol=1e-4
    )
    theta = 2 * math.pi * (0.5 - lower) / (upper - lower)
    by_hand = inner(jnp.array([math.cos(theta), math.sin(theta)], jnp.float32))
    np.testing.assert_allclose(np.asarray(field(jnp.array([0.5]))), np.asarray(by_hand), rtol=1e-5)


def test_fourier_feature_mlp_matches_its_formula_and_freezes_its_frequencies():
    scale = 2.5
    field = insr.FourierFeatureMLP(2, 3, n_features=4096, scale=scale, key=jax.random.key(2))
    b = np.asarray(field.frequencies)
    assert b.shape == (4096, 2)
    # B ~ N(0, scale²): the sample std of 8192 draws is within 3% (about 4 standard errors)
    assert abs(b.std() - scale) < 0.03 * scale
    x = jnp.array([0.2, -0.4])
    z = 2 * np.pi * b @ np.asarray(x)
    expected = field.mlp(jnp.asarray(np.concatenate([np.cos(z), np.sin(z)]), jnp.float32))
    np.testing.assert_allclose(np.asarray(field(x)), np.asarray(expected), rtol=1e-4, atol=1e-5)
    grads = eqx.filter_grad(lambda f: jnp.sum(f(x)))(field)
    assert np.all(np.asarray(grads.frequencies) == 0)
    assert np.any(np.asarray(grads.mlp.layers[0].weight) != 0)


def test_function_field_steps_a_mode_by_implicit_eulers_exact_factor():
    # u(x) = c cos kx + s sin kx through FunctionField; one Gauss–Newton
    # iteration solves each (linear) implicit-Euler step exactly, which
    # damps the amplitude by 1/√(1 + (akΔt)²) per step (written here)
    a, length, dt, n = 0.25, 4.0, 0.1, 5
    k = 2 * math.pi / length

    def fn(params, x):
        return (params["c"] * jnp.cos(k * x) + params["s"] * jnp.sin(k * x)).reshape(1)

    with jax.enable_x64(True):
        field = insr.FunctionField(fn, {"c": jnp.float64(1.0), "s": jnp.float64(0.0)})
        problem = insr.Advection1D(a, -2.0, 2.0, periodic=True)
        solver = insr.LeastSquaresSolver(
            optx.GaussNewton(rtol=1e-10, atol=1e-12), collocation=insr.Collocation(n_points=32)
        )
        sol = insr.integrate(
            field, insr.ImplicitEuler(solver), problem, 0.0, n * dt, dt, key=jax.random.key(3)
        )
        final = insr.field_at(sol.value, -1).params
        amplitude = math.hypot(float(final["c"]), float(final["s"]))
    # rounding only: measured ~1e-16
    assert abs(amplitude - (1 + (a * k * dt) ** 2) ** (-n / 2)) < 1e-12
