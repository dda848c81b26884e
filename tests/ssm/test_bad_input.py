"""Bad input to the SSM layers fails loudly, naming the argument (issue 12).

Each case below returned a wrong answer (or a raw error from inside JAX)
before: complex input to S4D's scan mode and S5 gave a meaningless real output;
a negative, zero or non-finite `dt` / `step_rescale` gave a runaway
recurrence; `ptd_perturbation(3)` returned a matrix; a tree of labels given to
`optax.multi_transform` failed with an unrelated error from inside the model.
"""

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from sciml.ssm import (
    S4D,
    S5,
    SequenceModel,
    discrete_log_eigenvalues,
    discretize,
    optimize_perturbation,
    ptd_eig,
    ptd_perturbation,
    ssm_labels,
)


LAYERS = [
    (S4D, "conv"),
    (S4D, "scan"),
    (S4D, "recurrent"),
    (S5, "conv"),
    (S5, "scan"),
    (S5, "recurrent"),
]


@pytest.mark.parametrize("cls, mode", LAYERS)
def test_complex_input_is_a_type_error(cls, mode, getkey):
    layer = cls(4, 8, key=getkey())
    u = jnp.ones((12, 4)) * (1 + 1j)
    with pytest.raises(TypeError, match="`u` must be real"):
        layer(u, mode=mode)
    with pytest.raises(TypeError, match="`u` must be real"):
        jax.jit(lambda m, u: m(u, mode=mode))(layer, u)  # a trace-time check
    with pytest.raises(TypeError, match="`u_t` must be real"):
        layer.recurrent().step(layer.init_state(), u[0])
    with pytest.raises(TypeError, match="`u` must be real"):
        layer.scan(u)


@pytest.mark.parametrize("bad", [-1.0, 0.0, np.nan, np.inf])
@pytest.mark.parametrize("cls", [S4D, S5])
def test_step_rescale_must_be_positive_and_finite(cls, bad, getkey):
    layer = cls(4, 8, key=getkey())
    u = jnp.ones((12, 4))
    for call in (
        lambda: layer(u, step_rescale=bad),
        lambda: layer(u, mode="recurrent", step_rescale=bad),
        lambda: layer.recurrent(step_rescale=bad),
        lambda: (
            layer.kernel(12, step_rescale=bad) if cls is S4D else layer.scan(u, step_rescale=bad)
        ),
    ):
        with pytest.raises(ValueError, match="`step_rescale` must be finite and > 0"):
            call()


@pytest.mark.parametrize("bad", [-0.1, 0.0, np.nan, np.inf])
@pytest.mark.parametrize("method", ["zoh", "bilinear"])
def test_discretize_dt_must_be_positive_and_finite(bad, method):
    Lambda = jnp.array([-0.5 + 1j, -1.0 - 2j])
    B = jnp.ones(2, complex)
    with pytest.raises(ValueError, match="`dt` must be finite and > 0"):
        discretize(Lambda, B, bad, method)
    with pytest.raises(ValueError, match="`dt` must be finite and > 0"):
        discrete_log_eigenvalues(Lambda, jnp.array([0.1, bad]), method)
    # a valid step still gives the decaying |λ̄| < 1
    Lambda_bar, _ = discretize(Lambda, B, 0.1, method)
    assert np.all(np.abs(Lambda_bar) < 1)


@pytest.mark.parametrize("N", [1, 3, 5])
def test_ptd_needs_an_even_size(N):
    for fn in (ptd_perturbation, ptd_eig, lambda N: optimize_perturbation(N, steps=1)):
        with pytest.raises(ValueError, match=f"`N` must be even for PTD, got N={N}"):
            fn(N)
    with pytest.raises(ValueError, match="state_size / blocks"):
        S5(4, N, init="ptd", conj_sym=False, key=jax.random.key(0))


@pytest.mark.parametrize("weight", [-1.0, float("nan"), float("inf")])
def test_ptd_transfer_weight_must_be_finite_and_non_negative(weight):
    with pytest.raises(ValueError, match="transfer_weight must be finite and >= 0"):
        optimize_perturbation(4, steps=1, transfer_weight=weight)


@pytest.mark.parametrize("cls", [S4D, S5])
def test_non_finite_input_eager_is_an_error_naming_u(cls, getkey):
    layer = cls(4, 8, key=getkey())
    u = jnp.ones((30, 4)).at[17, 2].set(jnp.nan).at[3, 0].set(jnp.inf)
    with pytest.raises(ValueError, match=r"`u` must be finite, got 1 NaN and 1 infinite"):
        layer(u)
    with pytest.raises(ValueError, match="`u_t` must be finite"):
        layer.recurrent().step(layer.init_state(), u[17])
    with pytest.raises(ValueError, match="`u` must be finite"):
        layer.recurrent()(u)
    model = SequenceModel(4, 2, layer=cls.__name__.lower(), d_model=8, n_layers=1,
                          state_size=8, key=getkey())  # fmt: skip
    with pytest.raises(ValueError, match="`x` must be finite"):
        model(u)


@pytest.mark.parametrize("cls", [S4D, S5])
def test_non_finite_input_under_jit_is_not_checked(cls, getkey):
    # the policy: no host callback in compiled layers; NaN propagates, as in any jnp op
    layer = cls(4, 8, key=getkey())
    u = jnp.ones((30, 4)).at[17, 2].set(jnp.nan)
    y = eqx.filter_jit(layer)(u)  # no error raised
    assert not np.all(np.isfinite(y))
    jaxpr = str(jax.make_jaxpr(lambda u: layer(u))(jnp.ones((30, 4))))
    assert "callback" not in jaxpr
    # check_finite=False skips the eager check as well
    unchecked = cls(4, 8, check_finite=False, key=getkey())
    assert not np.all(np.isfinite(unchecked(u)))


def test_ssm_labels_with_optax_directly(getkey):
    model = SequenceModel(3, 2, d_model=8, n_layers=1, state_size=8, key=getkey())
    params = eqx.filter(model, eqx.is_inexact_array)
    transforms = {"ssm": optax.sgd(0.0), "default": optax.sgd(1.0)}
    # as the docstring shows: the function itself as `param_labels`
    optimizer = optax.multi_transform(transforms, ssm_labels)
    grads = jax.tree_util.tree_map(jnp.ones_like, params)
    updates, _ = optimizer.update(grads, optimizer.init(params), params)
    layer_updates = updates.blocks[0].ssm
    assert np.all(np.asarray(layer_updates.Lambda_re) == 0)  # "ssm" group: lr 0
    assert np.all(np.asarray(layer_updates.log_dt) == 0)
    assert np.all(np.asarray(layer_updates.C_re) == -1)  # "default" group: lr 1
    assert np.all(np.asarray(updates.encoder.weight) == -1)
    # a tree of labels is a (callable) module: optax calls it; the error says what to do
    with pytest.raises(TypeError, match=r"pass the function `ssm_labels` \(not"):
        optax.multi_transform(transforms, ssm_labels(params)).init(params)


@pytest.mark.parametrize("cls", [S4D, S5])
def test_transposed_input_is_refused_naming_u_and_the_shape(cls, getkey):
    # (features, length) = (4, 12) for a layer of 4 features: the message says
    # which axis is which and how to fix the call
    layer = cls(4, 8, key=getkey())
    u = jax.random.normal(getkey(), (12, 4))
    match = (
        r"input must have shape \(length, features\) with features=4, got shape \(4, 12\) "
        r"for `u`\. It looks transposed, \(features, length\): pass `u.T`"
    )
    with pytest.raises(ValueError, match=match):
        layer(u.T)
    with pytest.raises(ValueError, match=match):
        layer.recurrent()(u.T)
    with pytest.raises(ValueError, match=r"features=4, got shape \(12, 5\) for `u`\.$"):
        layer(jnp.ones((12, 5)))  # neither axis is the feature axis: no hint
    # a square input (length == features) cannot be told apart: it runs, as documented
    assert layer(jnp.ones((4, 4))).shape == (4, 4)


@pytest.mark.parametrize("cls", [S4D, S5])
def test_check_finite_always_raises_under_jit(cls, getkey):
    # Before: +Inf input under eqx.filter_jit gave NaN output and no error; the one
    # flag check_finite="always" compiles the check into the layer.
    key = getkey()
    checked = cls(4, 8, check_finite="always", key=key)
    unchecked = cls(4, 8, check_finite=False, key=key)  # the same parameters
    u = jax.random.normal(getkey(), (12, 4))
    bad = u.at[5, 1].set(jnp.inf)
    jitted = eqx.filter_jit(lambda layer, u: layer(u))
    # a finite input gives the numbers of the unchecked layer
    np.testing.assert_array_equal(jitted(checked, u), jitted(unchecked, u))
    with pytest.raises(eqx.EquinoxRuntimeError, match=rf"{cls.__name__}: `u` must be finite"):
        jitted(checked, bad)
    with pytest.raises(eqx.EquinoxRuntimeError, match="`u` must be finite"):
        eqx.filter_jit(jax.vmap(checked))(jnp.stack([u, bad]))
    recurrent = checked.recurrent()

    def steps(recurrent, u):
        return jax.lax.scan(lambda s, u_t: recurrent.step(s, u_t), recurrent.init_state(), u)

    with pytest.raises(eqx.EquinoxRuntimeError, match="`u_t` must be finite"):
        eqx.filter_jit(steps)(recurrent, bad)
    # eager calls keep the host check and its count
    with pytest.raises(ValueError, match="`u` must be finite, got 0 NaN and 1 infinite"):
        checked(bad)
    # the default compiles no check: NaN out, as the policy says
    assert not np.all(np.isfinite(jitted(unchecked, bad)))


@pytest.mark.parametrize("cls", [S4D, S5])
@pytest.mark.parametrize("bad", ["jit", "True", "never"])
def test_check_finite_option_is_checked(cls, bad, getkey):
    with pytest.raises(
        ValueError, match=r"`check_finite` must be one of \(True, False, 'always'\)"
    ):
        cls(4, 8, check_finite=bad, key=getkey())


@pytest.mark.parametrize("cls", [S4D, S5])
@pytest.mark.parametrize("dtype", [jnp.int32, jnp.bool_, jnp.complex64, "float"])
def test_non_floating_dtype_is_refused_at_construction(cls, dtype, getkey):
    # Before: dtype=jnp.int32 failed inside jax.random.normal with JAX's message.
    if dtype == "float":  # a valid spelling of float64: builds
        assert cls(4, 8, dtype=dtype, key=getkey()).D.dtype == jnp.float64
        return
    with pytest.raises(TypeError, match="`dtype` must be a real floating dtype such as"):
        cls(4, 8, dtype=dtype, key=getkey())
