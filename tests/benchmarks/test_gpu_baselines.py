"""The GPU suite's baselines: `torch.nn.GRU` given our GRU's weights computes our function.

PyTorch is not installed here, so the weight copy (`benchmarks.pararnn.torch_gru_weights`)
is checked against a numpy loop written from PyTorch's documented GRU equations
(gates r, z, n in that order, `r` multiplying the hidden term after its bias);
where torch imports, against `torch.nn.GRU` itself.
"""

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from benchmarks.pararnn import torch_gru_weights
from sciml.pararnn import GRU, RNN, Sequential


def sigmoid(x):
    return 1 / (1 + np.exp(-x))


def torch_gru_reference(weights, xs):
    """PyTorch's one-layer GRU from a zero state, step by step (torch.nn.GRU docs):
    r = σ(W_ir x + b_ir + W_hr h + b_hr), z = σ(W_iz x + b_iz + W_hz h + b_hz),
    n = tanh(W_in x + b_in + r ⊙ (W_hn h + b_hn)), h' = (1 − z) ⊙ n + z ⊙ h."""
    w_ih, w_hh = weights["weight_ih_l0"], weights["weight_hh_l0"]
    b_ih, b_hh = weights["bias_ih_l0"], weights["bias_hh_l0"]
    hidden = w_hh.shape[1]
    h, out = np.zeros(hidden), []
    for x in xs:
        gi, gh = w_ih @ x + b_ih, w_hh @ h + b_hh
        r = sigmoid(gi[:hidden] + gh[:hidden])
        z = sigmoid(gi[hidden : 2 * hidden] + gh[hidden : 2 * hidden])
        n = np.tanh(gi[2 * hidden :] + r * gh[2 * hidden :])
        h = (1 - z) * n + z * h
        out.append(h)
    return np.stack(out)


@pytest.fixture(scope="module")
def gru_case():
    # input 3 ≠ hidden 5, so a transposed or misplaced block cannot pass by shape
    key_cell, key_bias, key_x = jax.random.split(jax.random.key(0), 3)
    cell = GRU(3, 5, dtype=jnp.float64, key=key_cell)
    # a bias_n as large as the rest: its place in torch's bias_hh matters
    cell = eqx.tree_at(lambda c: c.bias_n, cell, jax.random.normal(key_bias, (5,), jnp.float64))
    xs = jax.random.normal(key_x, (40, 3), jnp.float64)
    return cell, xs


def test_torch_gru_weights_give_torch_equations_our_outputs(gru_case):
    cell, xs = gru_case
    weights = torch_gru_weights(cell)
    assert {k: v.shape for k, v in weights.items()} == {
        "weight_ih_l0": (15, 3),
        "weight_hh_l0": (15, 5),
        "bias_ih_l0": (15,),
        "bias_hh_l0": (15,),
    }
    ours = np.asarray(RNN(cell, Sequential())(xs))
    # float64: measured difference 2.2e-16; bias_n put in the r block of
    # bias_hh gives 0.92, the weight blocks in the order n, r, z 0.75
    np.testing.assert_allclose(torch_gru_reference(weights, np.asarray(xs)), ours, atol=1e-12)


def test_torch_gru_with_our_weights_matches_ours(gru_case):
    torch = pytest.importorskip("torch")
    cell, xs = gru_case
    gru = torch.nn.GRU(3, 5, batch_first=True, dtype=torch.float64)
    with torch.no_grad():
        for name, value in torch_gru_weights(cell).items():
            getattr(gru, name).copy_(torch.from_numpy(np.array(value)))
        theirs = gru(torch.from_numpy(np.array(xs))[None])[0][0].numpy()
    np.testing.assert_allclose(theirs, np.asarray(RNN(cell, Sequential())(xs)), atol=1e-12)
