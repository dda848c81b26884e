"""Models keep the precision they were built in when float64 is on for a solver.

`jax_enable_x64` is global: after it every model built without a `dtype` is
float64. A model built with `dtype=jnp.float32` must stay float32 under it:
its parameters, its output for a float32 input, and its gradient (the
recipe of docs/precision.md). The tests run with x64 on (tests/conftest.py).
"""

import equinox as eqx
import jax
import jax.numpy as jnp

import sciml.dcdm
from sciml.dcdm import DCDM
from sciml.operators import TFNO
from sciml.ssm import S4D


def _dtypes(tree) -> set[str]:
    return {str(x.dtype) for x in jax.tree.leaves(eqx.filter(tree, eqx.is_array))}


@eqx.filter_jit
def _output_and_gradient(model, x):
    return model(x), eqx.filter_grad(lambda m: jnp.sum(m(x) ** 2))(model)


def _check(model, x):
    assert jax.config.jax_enable_x64
    assert _dtypes(model) == {"float32"}
    y, grads = _output_and_gradient(model, x)
    assert y.dtype == jnp.float32
    assert _dtypes(grads) == {"float32"}


def test_a_float32_tfno_stays_float32():
    model = TFNO(
        n_modes=(6, 6), in_channels=1, out_channels=1, hidden_channels=8, n_layers=2,
        dtype=jnp.float32, key=jax.random.key(0),
    )  # fmt: skip
    _check(model, jnp.ones((1, 12, 12), jnp.float32))


def test_a_float32_s4d_stays_float32():
    # Before: its `C` was drawn as float64 (a NumPy scalar in the draw promoted it).
    model = S4D(features=4, state_size=8, dtype=jnp.float32, key=jax.random.key(0))
    _check(model, jnp.ones((16, 4), jnp.float32))
    # what the recipe guards against: without a dtype, JAX's default float
    assert _dtypes(S4D(features=4, state_size=8, key=jax.random.key(0))) == {"float64"}


def _poisson(x):
    xp = jnp.pad(x, 1)
    return 4 * x - xp[:-2, 1:-1] - xp[2:, 1:-1] - xp[1:-1, :-2] - xp[1:-1, 2:]


def test_x64_for_the_solve_only_leaves_the_models_float32():
    # the one-line recipe of docs/api/dcdm.md for a script that keeps x64 off
    with jax.enable_x64(False):
        model = S4D(features=4, state_size=8, key=jax.random.key(0))
        with jax.enable_x64(True):  # float64 for the solve, and only there
            solver = DCDM(rtol=1e-12, n_orthogonal=1)
            sol = sciml.dcdm.solve(_poisson, jnp.ones((8, 8)), sciml.dcdm.Identity(), solver)
            residual = jnp.linalg.norm(_poisson(sol.value) - 1) / 8
            x = sol.value[:, :4].astype(jnp.float32)  # handed to the model in its precision
        assert sol.value.dtype == jnp.float64 and bool(sol.successful)
        assert float(residual) < 1e-11  # float64's accuracy: float32 stops near 1e-7
        assert _dtypes(model) == {"float32"}
        assert model(x).dtype == jnp.float32
        assert jnp.ones(3).dtype == jnp.float32
