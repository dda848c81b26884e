"""Cells against independent references: numpy transcriptions of the ParaRNN equations,
the hand-derived ParaGRU Jacobian, equinox's GRU/LSTM cells; Jacobian-structure checks."""

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest
import scipy.linalg

from sciml.pararnn import GRU, LSTM, ParaGRU, ParaLSTM, check_structure
from sciml.recurrence import Block, Dense, Diagonal


def sigmoid(v):
    return 1 / (1 + np.exp(-v))


def head_matrices(B):
    """The block-diagonal input matrices `(gates, hidden, input)` of per-head blocks `B`."""
    heads, _, gates, _ = B.shape
    return [
        scipy.linalg.block_diag(*[np.asarray(B[h, :, g, :]).T for h in range(heads)])
        for g in range(gates)
    ]


def test_paragru_step_matches_numpy_equations(getkey, rng):
    cell = ParaGRU(6, 4, num_heads=2, key=getkey())
    cell = eqx.tree_at(lambda c: c.b, cell, jnp.asarray(rng.normal(size=(3, 4))))
    x, h = np.random.default_rng(0).normal(size=(2, 6)), np.random.default_rng(1).normal(size=4)
    (a_z, a_r, a_h), (b_z, b_r, b_h) = np.asarray(cell.A), np.asarray(cell.b)
    B_z, B_r, B_h = head_matrices(cell.B)
    z = sigmoid(a_z * h + B_z @ x[0] + b_z)
    r = sigmoid(a_r * h + B_r @ x[0] + b_r)
    candidate = np.tanh(a_h * (r * h) + B_h @ x[0] + b_h)
    expected = z * candidate + (1 - z) * h
    np.testing.assert_allclose(cell(jnp.asarray(h), jnp.asarray(x[0])), expected, rtol=1e-13)
    # projections for all steps at once equal the per-step ones
    us = cell.project(jnp.asarray(x))
    np.testing.assert_allclose(us[1], cell.project(jnp.asarray(x[1:]))[0], rtol=1e-14)


def test_paragru_jacobian_is_the_papers_formula(getkey, rng):
    cell = ParaGRU(4, 5, key=getkey())
    h = jnp.asarray(rng.normal(size=(5,)))
    u = cell.project(rng.normal(size=(1, 4)))[0]
    _, diag = Diagonal().value_and_jacobian(lambda v: cell.step(v, u), h)
    A, h_, u_ = np.asarray(cell.A), np.asarray(h), np.asarray(u)
    z, r = sigmoid(A[0] * h_ + u_[0]), sigmoid(A[1] * h_ + u_[1])
    candidate = np.tanh(A[2] * r * h_ + u_[2])
    expected = (
        (1 - z)
        + (candidate - h_) * z * (1 - z) * A[0]
        + z * (1 - candidate**2) * A[2] * (r + h_ * r * (1 - r) * A[1])
    )
    np.testing.assert_allclose(diag, expected, rtol=1e-13)


def test_paralstm_step_matches_numpy_equations(getkey, rng):
    cell = ParaLSTM(4, 6, num_heads=2, key=getkey())
    x, c, h = rng.normal(size=4), rng.normal(size=6), rng.normal(size=6)
    (a_f, a_o, a_c), (p_f, p_o) = np.asarray(cell.A), np.asarray(cell.C)
    b_f, b_o, b_c = np.asarray(cell.b)
    B_f, B_o, B_c = head_matrices(cell.B)
    f = sigmoid(a_f * h + B_f @ x + p_f * c + b_f)
    c_new = f * c + (1 - f) * np.tanh(a_c * h + B_c @ x + b_c)
    o = sigmoid(a_o * h + B_o @ x + p_o * c_new + b_o)
    out = cell(jnp.asarray(np.concatenate([c, h])), jnp.asarray(x))
    np.testing.assert_allclose(out, np.concatenate([c_new, o * np.tanh(c_new)]), rtol=1e-13)
    assert cell.state_size == 12
    np.testing.assert_array_equal(cell.readout(out[None]), out[None, 6:])


def test_dense_cells_match_equinox(getkey, rng):
    gru = GRU(3, 4, key=getkey())
    reference = eqx.nn.GRUCell(3, 4, key=getkey())
    reference = eqx.tree_at(
        lambda c: (c.weight_ih, c.weight_hh, c.bias, c.bias_n),
        reference,
        (gru.weight_ih, gru.weight_hh, gru.bias, gru.bias_n),
    )
    x, h = rng.normal(size=(3,)), rng.normal(size=(4,))
    np.testing.assert_allclose(gru(h, x), reference(x, h), rtol=1e-14)

    lstm = LSTM(3, 4, key=getkey())
    reference = eqx.nn.LSTMCell(3, 4, key=getkey())
    reference = eqx.tree_at(
        lambda c: (c.weight_ih, c.weight_hh, c.bias),
        reference,
        (lstm.weight_ih, lstm.weight_hh, lstm.bias),
    )
    c = rng.normal(size=(4,))
    h_new, c_new = reference(x, (h, c))
    np.testing.assert_allclose(lstm(jnp.concatenate([c, h]), x), jnp.concatenate([c_new, h_new]))


def test_pararnn_initialisation(getkey):
    hidden = 400
    cell = ParaLSTM(8, hidden, num_heads=4, key=getkey())
    std = 2 / np.sqrt(5 * hidden)
    assert abs(np.std(cell.A) / std - 1) < 0.05 and abs(np.std(cell.C) / std - 1) < 0.05
    limit = np.sqrt(6 / (8 // 4 + hidden // 4))
    assert np.max(np.abs(cell.B)) <= limit and np.max(np.abs(cell.B)) > 0.9 * limit
    np.testing.assert_allclose(cell.b[0], -np.linspace(0, 1, hidden))
    np.testing.assert_array_equal(cell.b[1:], 0)
    assert ParaGRU(2, 2, key=getkey(), dtype=jnp.float32).A.dtype == jnp.float32


CELLS = {
    "ParaGRU": lambda key: ParaGRU(4, 6, num_heads=2, key=key),
    "ParaLSTM": lambda key: ParaLSTM(4, 6, num_heads=2, key=key),
    "GRU": lambda key: GRU(4, 3, key=key),
    "LSTM": lambda key: LSTM(4, 3, key=key),
}


@pytest.mark.parametrize("name", list(CELLS))
def test_declared_structures_are_true_and_lies_are_caught(name, getkey, rng):
    cell = CELLS[name](getkey())
    hs = jnp.asarray(rng.normal(size=(4, cell.state_size)))
    us = cell.project(rng.normal(size=(4, 4)))
    assert check_structure(cell.step, hs, us, cell.structure) < 1e-12
    # the structured Jacobian, made dense, is the full Jacobian
    _, jac = cell.structure.value_and_jacobian(lambda v: cell.step(v, us[0]), hs[0])
    np.testing.assert_allclose(
        cell.structure.to_dense(jac),
        jax.jacfwd(cell.step)(hs[0], us[0]),
        rtol=1e-13,
        atol=1e-15,
    )
    if cell.structure != Diagonal():
        with pytest.raises(ValueError, match="Jacobian is not diagonal"):
            check_structure(cell.step, hs, us, Diagonal())


def test_weak_coupling_is_caught(rng):
    coupling = 1e-4 * rng.normal(size=(4, 4))

    def nearly_diagonal(h, x):
        return jnp.tanh(0.5 * h + coupling @ h + x)

    hs, xs = rng.normal(size=(2, 4)), rng.normal(size=(2, 4))
    with pytest.raises(ValueError, match="not diagonal"):
        check_structure(nearly_diagonal, hs, xs, Diagonal())
    with pytest.raises(ValueError, match=r"not block\(2\)"):
        check_structure(nearly_diagonal, hs, xs, Block(2))
    assert check_structure(nearly_diagonal, hs, xs, Dense()) == 0


@pytest.mark.parametrize("bad", ["diag", "block(2)", ("block", 2), 3])
def test_bad_structures(bad):
    # structures are modules now: strings are refused, naming the accepted ones
    with pytest.raises(ValueError, match="structure must be one of"):
        check_structure(lambda h, x: h, np.zeros((2, 4)), np.zeros((2, 4)), bad)
    with pytest.raises(ValueError, match="k` must be a positive integer"):
        Block(0)


def test_structure_spellings():
    assert Block(2) == Block(2) and Block(2) != Block(3) and Block(2) != Diagonal()
    assert str(Block(3)) == "block(3)" and str(Diagonal()) == "diagonal"


@pytest.mark.parametrize(
    "make, match",
    [
        (lambda key: ParaGRU(5, 4, num_heads=2, key=key), "must divide"),
        (lambda key: ParaLSTM(4, 0, key=key), "hidden_size` must be a positive integer"),
        (lambda key: GRU(0, 3, key=key), "input_size` must be a positive integer"),
    ],
)
def test_bad_sizes(make, match, getkey):
    with pytest.raises(ValueError, match=match):
        make(getkey())
