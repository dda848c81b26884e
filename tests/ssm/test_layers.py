"""The three evaluation paths, step mode, bidirectionality and bad input."""

import logging

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from sciml.ssm import S4D, S5


@eqx.filter_jit
def apply(layer, u, mode):
    return layer(u, mode=mode)


def discretized(Lambda, B, dt, method):
    """(Λ̄, B̄) of a diagonal system, written out: ZOH Λ̄ = e^{Δλ}, B̄ = (e^{Δλ} − 1)/λ · B;
    bilinear Λ̄ = (1 − Δλ/2)⁻¹(1 + Δλ/2), B̄ = (1 − Δλ/2)⁻¹ Δ B. `dt` and `Lambda`
    broadcast; B's trailing axes (S5's input columns) are scaled row by row."""
    if method == "zoh":
        Lambda_bar, gamma = np.exp(dt * Lambda), (np.exp(dt * Lambda) - 1) / Lambda
    else:
        assert method == "bilinear"
        inverse = 1 / (1 - dt / 2 * Lambda)
        Lambda_bar, gamma = inverse * (1 + dt / 2 * Lambda), inverse * dt
    return Lambda_bar, gamma.reshape(gamma.shape + (1,) * (B.ndim - gamma.ndim)) * B


def direct_s4d(layer, u, method):
    """y_t = sum_s K_h[t-s] u_s with K from the continuous parameters, by explicit loops."""
    u = np.asarray(u)
    L, H = u.shape
    Lambda = np.tile(np.asarray(layer.Lambda), (H // layer.n_ssm, 1))
    B = np.tile(np.asarray(layer.B), (H // layer.n_ssm, 1))
    dt = np.exp(np.asarray(layer.log_dt))[:, None]
    Lambda_bar, B_bar = discretized(Lambda, B, dt, method)
    C = np.asarray(layer.C)[0]
    x = np.zeros_like(Lambda)
    y = np.zeros((L, H))
    for t in range(L):
        x = Lambda_bar * x + B_bar * u[t][:, None]
        y[t] = 2 * np.sum(C * x, -1).real + np.asarray(layer.D) * u[t]
    return y


def direct_s5(layer, u, method, reverse=False):
    u = np.asarray(u)
    Lambda = np.asarray(layer.Lambda)
    dt = np.exp(np.asarray(layer.log_dt))
    Lambda_bar, B_bar = discretized(Lambda, np.asarray(layer.B), dt, method)
    x = np.zeros_like(Lambda)
    states = []
    for t in range(u.shape[0])[:: -1 if reverse else 1]:
        x = Lambda_bar * x + B_bar @ u[t]
        states.append(x)
    return np.array(states[:: -1 if reverse else 1])


@pytest.fixture
def u(getkey):
    return jax.random.normal(getkey(), (257, 6))


@pytest.mark.parametrize("method", ["zoh", "bilinear"])
@pytest.mark.parametrize("init", ["legs", "lin", "inv", "real", "ptd"])
def test_s4d_paths_agree_with_direct_recurrence(init, method, u, getkey):
    layer = S4D(6, 16, init=init, n_ssm=3, discretization=method, key=getkey())
    expected = direct_s4d(layer, u, method)
    # measured at most 4e-14; making the layer ignore `method` (always ZOH) errs by 6e-3 to 4
    for mode in ("conv", "scan", "recurrent"):
        np.testing.assert_allclose(apply(layer, u, mode), expected, atol=1e-12, rtol=1e-12)


@pytest.mark.parametrize("method", ["zoh", "bilinear"])
@pytest.mark.parametrize("init", ["hippo-n", "lin", "inv", "real", "ptd"])
@pytest.mark.parametrize("conj_sym", [True, False])
def test_s5_paths_agree_with_direct_recurrence(init, conj_sym, method, u, getkey):
    layer = S5(6, 16, blocks=2, init=init, conj_sym=conj_sym, discretization=method, key=getkey())
    states = direct_s5(layer, u, method)
    scale = 2 if conj_sym else 1
    expected = scale * (states @ np.asarray(layer.C)[0].T).real + np.asarray(layer.D) * u
    # measured at most 5e-15; making the layer ignore `method` (always ZOH) errs by 5e-4 to 0.3
    for mode in ("conv", "scan", "recurrent"):
        np.testing.assert_allclose(apply(layer, u, mode), expected, atol=1e-12, rtol=1e-12)


@pytest.mark.parametrize("cls", [S4D, S5])
@pytest.mark.parametrize("method", ["zoh", "bilinear"])
def test_step_and_chunked_scan_equal_the_full_call(cls, method, u, getkey):
    layer = cls(6, 8, discretization=method, key=getkey())
    y = apply(layer, u, None)
    state = layer.init_state()
    outputs = []
    step = eqx.filter_jit(layer.step)
    scan = eqx.filter_jit(lambda layer, u, state: layer.scan(u, state))
    for t in range(10):
        state, y_t = step(state, u[t])
        outputs.append(y_t)
    np.testing.assert_allclose(jnp.stack(outputs), y[:10], atol=1e-12)
    # carry the state across calls: steps 0..9 by step(), then two scan chunks
    y1, state = scan(layer, u[10:150], state)
    y2, final = scan(layer, u[150:], state)
    np.testing.assert_allclose(jnp.concatenate([y1, y2]), y[10:], atol=1e-12)
    _, final_direct = scan(layer, u, None)
    np.testing.assert_allclose(final, final_direct, atol=1e-12)


def test_s4d_bidirectional_is_forward_plus_time_reversed_strictly_future_pass(u, getkey):
    bi = S4D(6, 16, bidirectional=True, key=getkey())
    forward = eqx.tree_at(
        lambda m: (m.C_re, m.C_im, m.D, m.log_dt),
        S4D(6, 16, key=getkey()),
        (bi.C_re[:1], bi.C_im[:1], bi.D, bi.log_dt),
    )
    backward = eqx.tree_at(lambda m: (m.C_re, m.C_im), forward, (bi.C_re[1:], bi.C_im[1:]))
    zero_D = eqx.tree_at(lambda m: m.D, backward, jnp.zeros(6))
    # S4's backward branch sees u_{t+1}, u_{t+2}, ...: the reversed pass shifted by one
    reversed_pass = jnp.flip(apply(zero_D, jnp.flip(u, 0), None), 0)
    future = jnp.concatenate([reversed_pass[1:], jnp.zeros((1, 6))])
    expected = apply(forward, u, None) + future
    for mode in ("conv", "scan", "recurrent"):
        np.testing.assert_allclose(apply(bi, u, mode), expected, atol=1e-12)


def test_s5_bidirectional_concatenates_forward_and_reversed_states(u, getkey):
    layer = S5(6, 8, bidirectional=True, key=getkey())
    C = np.asarray(layer.C)
    states = [direct_s5(layer, u, "zoh"), direct_s5(layer, u, "zoh", reverse=True)]
    states = np.concatenate(states, axis=-1)
    expected = 2 * (states @ np.concatenate([C[0], C[1]], -1).T).real + np.asarray(layer.D) * u
    for mode in ("conv", "scan", "recurrent"):
        np.testing.assert_allclose(apply(layer, u, mode), expected, atol=1e-12)


@pytest.mark.parametrize("cls", [S4D, S5])
@pytest.mark.parametrize("method", ["zoh", "bilinear"])
def test_constant_input_settles_at_the_dc_gain(cls, method, getkey):
    # A constant input u0 held long enough: the recurrence x = Λ̄x + B̄u0 settles at
    # x = (I − Λ̄)⁻¹B̄u0 (Λ̄, B̄ written out in the test), and both methods keep the
    # continuous DC gain, x = −Λ⁻¹Bu0: two closed forms, the second independent of
    # the discretisation. With these steps the transient dies out within L steps.
    H, L = 4, 4096
    layer = cls(H, 8, discretization=method, key=getkey())
    dt = np.array([0.1, 0.2, 0.3, 0.25])  # one per channel (S4D) or mode (S5: P' = 4)
    layer = eqx.tree_at(lambda m: m.log_dt, layer, jnp.log(jnp.asarray(dt)))
    u0 = np.random.default_rng(0).standard_normal(H)
    D, C = np.asarray(layer.D), np.asarray(layer.C)[0]
    if cls is S4D:  # channel h: 2 Re Σ_n C_hn x_hn with x_h = (gain per mode) u0_h
        Lambda, B = np.asarray(layer.Lambda)[0], np.asarray(layer.B)[0]
        Lambda_bar, B_bar = discretized(Lambda, B, dt[:, None], method)
        discrete = 2 * np.sum(C * B_bar / (1 - Lambda_bar), -1).real * u0 + D * u0
        continuous = 2 * np.sum(C * -B / Lambda, -1).real * u0 + D * u0
    else:  # y = 2 Re(C̃ x) + D u0 (conjugate symmetry), x (P',)
        Lambda, B = np.asarray(layer.Lambda), np.asarray(layer.B)
        Lambda_bar, B_bar = discretized(Lambda, B, dt, method)
        discrete = 2 * (C @ (B_bar @ u0 / (1 - Lambda_bar))).real + D * u0
        continuous = 2 * (C @ (-(B @ u0) / Lambda)).real + D * u0
    assert np.max(np.abs(Lambda_bar)) ** L < 1e-15  # max |λ̄| = 0.985 (S4D, bilinear): 1e-27
    # both measured at most 4e-14 relative (S4D, bilinear)
    np.testing.assert_allclose(discrete, continuous, rtol=1e-12)
    y = np.asarray(apply(layer, jnp.broadcast_to(jnp.asarray(u0), (L, H)), None))
    np.testing.assert_allclose(y[-1], discrete, rtol=1e-12)


def test_the_documented_defaults_zoh_and_dt_from_1e3_to_1e1(getkey):
    """Built with the defaults, S4D is the zero-order hold of its parameters
    (the loop above), and both layers draw Δ log-uniformly in [1e-3, 1e-1]:
    64 draws reach below 2e-3 and above 5e-2 (a range [1e-3, 1e-2] or
    [1e-4, 1e-1] leaves it, or fails to fill it, with certainty)."""
    small = S4D(4, 8, key=getkey())
    u = jax.random.normal(getkey(), (16, 4))
    # measured 4e-15; the bilinear rule gives 2e-4 at the smallest steps
    np.testing.assert_allclose(apply(small, u, None), direct_s4d(small, u, "zoh"), atol=1e-12)
    for layer in (S4D(64, 2, key=getkey()), S5(4, 128, key=getkey())):  # 64 steps each
        dt = np.exp(np.asarray(layer.log_dt))
        assert dt.size == 64 and 1e-3 <= dt.min() < 2e-3 and 5e-2 < dt.max() <= 1e-1, dt


def test_step_rescale_is_a_rescaled_dt(u, getkey):
    layer = S5(6, 8, key=getkey())
    scaled = eqx.tree_at(lambda m: m.log_dt, layer, layer.log_dt + np.log(0.5))
    rescaled = eqx.filter_jit(lambda m, u: m(u, step_rescale=0.5))(layer, u)
    np.testing.assert_allclose(rescaled, apply(scaled, u, None), atol=1e-13)


@pytest.mark.parametrize("cls", [S4D, S5])
def test_gradients_agree_across_paths_and_under_vmap(cls, getkey):
    layer = cls(4, 8, key=getkey())
    batch = jax.random.normal(getkey(), (3, 64, 4))

    def loss(model, mode):
        return jnp.sum(jnp.sin(jax.vmap(lambda x: model(x, mode=mode))(batch)))

    grad = eqx.filter_jit(eqx.filter_grad(loss))
    grads = [grad(layer, mode) for mode in ("conv", "scan", "recurrent")]
    for g in grads[1:]:
        for a, b in zip(jax.tree_util.tree_leaves(grads[0]), jax.tree_util.tree_leaves(g)):
            np.testing.assert_allclose(a, b, rtol=1e-9, atol=1e-11)
    jitted = eqx.filter_jit(jax.vmap(layer))(batch)
    np.testing.assert_allclose(jitted[1], layer(batch[1]), atol=1e-13)


@pytest.mark.parametrize("cls", [S4D, S5])
def test_float32_paths_match_float64(cls, getkey):
    layer = cls(8, 32, key=getkey())
    u = jax.random.normal(getkey(), (1024, 8))
    expected = np.asarray(apply(layer, u, "recurrent"))
    layer32 = jax.tree_util.tree_map(
        lambda x: x.astype(jnp.float32) if eqx.is_inexact_array(x) else x, layer
    )
    u32 = u.astype(jnp.float32)
    for mode in ("conv", "scan", "recurrent"):
        y = apply(layer32, u32, mode)
        assert y.dtype == jnp.float32
        np.testing.assert_allclose(y, expected, atol=5e-4 * np.max(np.abs(expected)))


def test_bad_arguments(getkey):
    key = getkey()
    with pytest.raises(ValueError, match="state_size=15 is odd"):
        S4D(4, 15, key=key)
    with pytest.raises(ValueError, match="dt_min must be smaller than dt_max"):
        S4D(4, 8, dt_min=0.1, dt_max=0.1, key=key)
    with pytest.raises(ValueError, match="dt_min and dt_max must be positive"):
        S5(4, 8, dt_min=-1.0, key=key)
    with pytest.raises(ValueError, match=r"`init` must be one of .*'legs'.*got 'legz'"):
        S4D(4, 8, init="legz", key=key)
    with pytest.raises(ValueError, match=r"`init` must be one of .*'hippo-n'.*got 'diag'"):
        S5(4, 8, init="diag", key=key)
    with pytest.raises(ValueError, match=r"`discretization` must be one of \('zoh', 'bilinear'\)"):
        S5(4, 8, discretization="euler", key=key)
    with pytest.raises(ValueError, match="n_ssm=3 must be a positive divisor of features=4"):
        S4D(4, 8, n_ssm=3, key=key)
    with pytest.raises(ValueError, match="init='diag' .* even n_ssm"):
        S4D(4, 8, init="diag", key=key)
    with pytest.raises(ValueError, match="blocks=3 must divide state_size=8"):
        S5(4, 8, blocks=3, key=key)
    layer = S4D(4, 8, key=key)
    with pytest.raises(
        ValueError, match=r"input must have shape \(length, features\) with features=4"
    ):
        layer(jnp.zeros((10, 5)))
    with pytest.raises(ValueError, match="`mode` must be one of"):
        layer(jnp.zeros((10, 4)), mode="fft")
    with pytest.raises(ValueError, match="bidirectional layer"):
        S5(4, 8, bidirectional=True, key=key).step(jnp.zeros(4, complex), jnp.zeros(4))


@pytest.mark.parametrize("cls", [S4D, S5])
def test_non_finite_input_is_reported(cls, getkey):
    layer = cls(4, 8, key=getkey())
    u = jnp.ones((100, 4)).at[57, 2].set(jnp.nan)
    # the package's non-finite policy (issue 12): checked when concrete (eager), not
    # under jit (no host callback in compiled layers; see tests/ssm/test_bad_input.py)
    with pytest.raises(ValueError, match="`u` must be finite"):
        layer(u)
    assert not np.all(np.isfinite(eqx.filter_jit(layer)(u)))
    unchecked = cls(4, 8, check_finite=False, key=getkey())
    assert not np.all(np.isfinite(unchecked(u)))


@pytest.mark.parametrize("cls", [S4D, S5])
def test_softplus_real_transform(cls, getkey):
    # Re Λ = −softplus(θ): the same S4D-Lin spectrum Λ_n = −1/2 + iπn (written here)
    # as the exp transform, the same outputs, and the chain rule of its own parametrisation
    key = getkey()
    kwargs = dict(init="lin", key=key)
    exp_layer = cls(4, 8, real_transform="exp", **kwargs)
    sp_layer = cls(4, 8, real_transform="softplus", **kwargs)
    expected = -0.5 + 1j * np.pi * np.arange(4)
    np.testing.assert_allclose(
        np.asarray(sp_layer.Lambda).reshape(-1), expected.reshape(-1), rtol=1e-13
    )
    np.testing.assert_allclose(
        -np.log1p(np.exp(np.asarray(sp_layer.Lambda_re))),
        np.asarray(sp_layer.Lambda).real,
        rtol=1e-13,
    )
    u = jax.random.normal(getkey(), (50, 4))
    np.testing.assert_allclose(sp_layer(u), exp_layer(u), rtol=1e-12, atol=1e-12)

    def grad_re(layer):
        return jax.grad(lambda m: jnp.sum(jnp.sin(m(u))))(layer).Lambda_re

    # ∂L/∂(Re Λ) from the exp layer: ∂L/∂θ_exp = ∂L/∂ReΛ · (−exp θ_exp)
    d_re = grad_re(exp_layer) / -jnp.exp(exp_layer.Lambda_re)
    sigmoid = 1 / (1 + np.exp(-np.asarray(sp_layer.Lambda_re)))
    np.testing.assert_allclose(grad_re(sp_layer), d_re * -sigmoid, rtol=1e-10, atol=1e-14)


def test_s5_complex_normal_C_init(getkey):
    # C̃ ~ CN(0, 1) drawn directly: independent real and imaginary parts of variance 1/2.
    # 2 × 64 × 64 samples: the sample moments are within ±0.04 of the truth at 4σ.
    layer = S5(64, 128, C_init="complex_normal", bidirectional=True, key=getkey())
    C = np.asarray(layer.C)
    assert C.shape == (2, 64, 64)
    re, im = C.real.ravel(), C.imag.ravel()
    np.testing.assert_allclose([re.mean(), im.mean()], [0, 0], atol=0.04)
    np.testing.assert_allclose([re.var(), im.var()], [0.5, 0.5], atol=0.04)
    assert abs(np.mean(re * im)) < 0.04
    # the layer reads it out as y = 2 Re(C̃ x) + D u (conj_sym): check one step by hand
    layer = S5(64, 128, C_init="complex_normal", key=getkey())  # causal, for step mode
    u = np.asarray(jax.random.normal(getkey(), (64,)))
    rec = layer.recurrent()
    x = np.asarray(rec.B_bar) @ u
    expected = 2 * (np.asarray(layer.C)[0] @ x).real + np.asarray(layer.D) * u
    np.testing.assert_allclose(rec.step(rec.init_state(), jnp.asarray(u))[1], expected, rtol=1e-12)


def _compilations(fn):
    """How many XLA compilations `fn()` triggers (JAX's compile log)."""
    messages = []
    handler = logging.Handler()
    handler.emit = lambda record: messages.append(record.getMessage())
    logger = logging.getLogger("jax")
    logger.addHandler(handler)
    try:
        with jax.log_compiles():
            fn()
    finally:
        logger.removeHandler(handler)
    return sum("Compiling" in m for m in messages)


@pytest.mark.parametrize("cls", [S4D, S5])
@pytest.mark.parametrize("mode", ["conv", "scan", "recurrent"])
def test_eager_calls_do_not_recompile(cls, mode, getkey):
    # Outside jit a call used to run op by op (about 130 small compilations for each
    # new shape) and the recurrent mode's loop recompiled on every call. Now a call
    # is one compiled function per shape: repeated calls compile nothing, a new
    # length compiles the layer once (plus the eager input check's few ops).
    layer = cls(4, 8, key=getkey())
    u, v = jnp.ones((16, 4)), jnp.ones((21, 4))
    layer(u, mode=mode)
    assert _compilations(lambda: [layer(u, mode=mode) for _ in range(3)]) == 0
    assert _compilations(lambda: layer(v, mode=mode)) <= 5
    assert _compilations(lambda: layer(v, mode=mode)) == 0
    step = layer.recurrent()
    step(u)
    assert _compilations(lambda: [step(u) for _ in range(3)]) == 0
