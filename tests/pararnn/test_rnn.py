"""The RNN layer and the residual model: modes agree, auto follows the crossover table, bad input."""

import inspect

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from sciml.pararnn import (
    GRU,
    LSTM,
    RNN,
    AbstractCell,
    Auto,
    Block,
    Diagonal,
    Fallback,
    Newton,
    ParaGRU,
    ParaLSTM,
    RNNModel,
    Sequential,
    sequential_solve,
)


def choose_mode(length, state_size, structure, *, batch_size=1, backend=None, table=None):
    auto = Auto(batch_size=batch_size, backend=backend, crossovers=table)
    return "newton" if auto.uses_newton(length, state_size, structure) else "sequential"


NEWTON = Fallback(Newton(), Sequential())


def test_model_modes_agree_and_the_model_is_causal(getkey, rng):
    # (gradients of both modes agree: tests/pararnn/test_newton.py, and the
    # char-LM smoke test trains both modes to the same losses)
    model = RNNModel(11, 11, 8, 2, cell="paragru", num_heads=2, tokens=True, key=getkey())
    tokens = np.repeat(rng.integers(0, 11, (1, 40)), 2, axis=0)
    tokens[1, 25:] = (tokens[0, 25:] + 1) % 11  # the same sequence, changed from step 25 on
    forward = eqx.filter_jit(lambda m, x: jax.vmap(m)(x))
    sequential = forward(model.with_solver(Sequential()), tokens)
    newton = forward(model.with_solver(NEWTON), tokens)
    np.testing.assert_allclose(newton, sequential, rtol=1e-10, atol=1e-12)
    np.testing.assert_array_equal(sequential[0, :25], sequential[1, :25])
    # Newton steps are causal too; only the stopping iteration may differ
    np.testing.assert_allclose(newton[0, :25], newton[1, :25], rtol=1e-10, atol=1e-12)
    assert float(jnp.min(jnp.max(jnp.abs(newton[0, 25:] - newton[1, 25:]), axis=-1))) > 0
    assert {block.rnn.solver for block in model.with_solver(NEWTON).blocks} == {NEWTON}


def test_layer_matches_a_hand_written_scan_and_reports_diagnostics(getkey, rng):
    cell = ParaGRU(4, 6, num_heads=2, key=getkey())
    xs = rng.normal(size=(33, 4))
    h0 = rng.normal(size=(6,))

    @eqx.filter_jit
    def run(cell, xs, h0):
        return (
            sequential_solve(cell, h0, xs),  # one raw-input step at a time
            RNN(cell, Sequential())(xs, h0),
            RNN(cell, NEWTON).solve(xs, h0),
        )

    expected, sequential, (newton, diagnostics) = run(cell, xs, h0)
    np.testing.assert_allclose(sequential, expected, rtol=1e-13)
    np.testing.assert_allclose(newton, expected, rtol=1e-11, atol=1e-12)
    assert bool(diagnostics.stats["converged"]) and int(diagnostics.stats["iterations"]) >= 1
    assert RNN(cell, Sequential()).solve(xs, h0)[1] is None


def test_auto_mode_follows_the_crossover_table(getkey):
    from sciml.pararnn import Dense

    table = {"cpu": {"diagonal": (100, 1000, 64), "dense": (200, None, None)}}
    kw = dict(backend="cpu", table=table)
    assert choose_mode(500, 8, Diagonal(), **kw) == "newton"
    assert choose_mode(500, 8, Diagonal(), batch_size=16, **kw) == "sequential"
    assert choose_mode(50, 8, Diagonal(), **kw) == "sequential"
    assert choose_mode(5000, 8, Diagonal(), **kw) == "sequential"
    assert choose_mode(500, 8, Block(2), **kw) == "sequential"  # not in the table
    assert choose_mode(10**6, 512, Dense(), **kw) == "newton"
    assert choose_mode(500, 8, Diagonal(), backend="unknown", table=table) == "sequential"
    # what was measured on CPU: large batch x hidden never runs Newton
    assert choose_mode(4096, 256, Diagonal(), batch_size=4, backend="cpu") == "sequential"

    layer = RNN(ParaLSTM(4, 4, key=getkey()), Auto(batch_size=2))
    expected = choose_mode(50, 8, Block(2), batch_size=2)
    assert isinstance(layer.resolved_solver(50), Sequential) == (expected == "sequential")
    _, diagnostics = layer.solve(jnp.ones((50, 4)))
    assert (diagnostics is None) == (expected == "sequential")
    assert layer.with_solver(NEWTON).solver == NEWTON


def test_bad_input(getkey):
    cell = ParaLSTM(4, 6, key=getkey())
    layer = RNN(cell, NEWTON)
    with pytest.raises(ValueError, match=r"h0 must have shape \(state_size,\) = \(12,\)"):
        layer(jnp.ones((10, 4)), jnp.zeros(6))
    with pytest.raises(ValueError, match=r"xs must have shape \(length >= 1, input_size=4\)"):
        layer(jnp.ones((10, 5)))
    with pytest.raises(ValueError, match="jax.vmap over a batch"):
        layer(jnp.ones((2, 10, 4)))
    for solver in (Sequential(), NEWTON):
        with pytest.raises(ValueError, match="`xs` must be finite"):  # eager: issue 12's policy
            layer.with_solver(solver)(jnp.ones((10, 4)).at[3, 2].set(jnp.inf))
    with pytest.raises(ValueError, match="solver must be Sequential"):
        RNN(cell, "parallel")
    with pytest.raises(TypeError, match="tolerance"):
        Newton(tolerance=1e-3)
    # (equinox also warns about an array in a static field; array guesses go to solve_recurrence)
    with pytest.warns(UserWarning), pytest.raises(ValueError, match="guess` must be one of"):
        Newton(guess=jnp.zeros((10, 12)))
    with pytest.raises(ValueError, match="batch_size` must be a positive integer"):
        Auto(batch_size=0)
    with pytest.raises(ValueError, match="cell must be an AbstractCell"):
        RNN(lambda h, x: h, NEWTON)
    with pytest.raises(ValueError, match="cell` must be one of"):
        RNNModel(3, 3, 8, 1, cell="transformer", key=getkey())
    with pytest.raises(ValueError, match="tokens of shape"):
        RNNModel(3, 3, 8, 1, tokens=True, key=getkey())(jnp.ones((5, 3)))
    with pytest.raises(ValueError, match="input_size == cell.hidden_size"):
        RNNModel(3, 3, 8, 1, cell=lambda width, key: GRU(width, 4, key=key), key=getkey())


def docstring_example(obj) -> str:
    """The code of the first Python block in `obj`'s docstring."""
    return inspect.getdoc(obj).split("```python\n")[1].split("```")[0]


def test_user_cell_as_the_docstring_writes_it(rng):
    # the AbstractCell docstring's example, run as written (state_size as a field)
    names = {}
    exec(docstring_example(AbstractCell), names)
    cell = names["Leaky"](3)
    assert cell.state_size == 3
    xs = rng.normal(size=(40, 3))
    h, expected = np.zeros(3), []
    for x in xs:  # the recurrence by hand
        h = np.tanh(0.5 * h + x)
        expected.append(h)
    for solver in (Sequential(), Newton()):
        np.testing.assert_allclose(RNN(cell, solver)(xs), np.array(expected), rtol=1e-11)


@pytest.mark.parametrize("cell_type", [GRU, LSTM])
def test_dense_cells_multiply_the_state_at_full_precision(cell_type, getkey):
    # A GPU multiplies float32 in TF32 by default, so the Newton residual of the
    # exact sequential states sat near 1e-3, above float32's tolerance (an H200
    # failed a 16k-step dense GRU, fallback included). The CPU ignores the
    # precision, so this checks that the recurrent product asks for it.
    cell = cell_type(3, 4, dtype=jnp.float32, key=getkey())
    u = jnp.zeros(cell.project(jnp.zeros((1, 3))).shape[1:], jnp.float32)
    jaxpr = jax.make_jaxpr(cell.step)(jnp.zeros(cell.state_size, jnp.float32), u)
    dots = [e for e in jaxpr.jaxpr.eqns if e.primitive.name == "dot_general"]
    assert dots, "the cell's step has no matrix product"
    for eqn in dots:
        assert eqn.params["precision"] == (
            jax.lax.Precision.HIGHEST,
            jax.lax.Precision.HIGHEST,
        ), eqn.params["precision"]
