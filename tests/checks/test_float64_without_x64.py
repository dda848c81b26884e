"""Every public constructor that takes `dtype=` says, once and in sciml's own
words, that float64 needs `jax_enable_x64`, and builds float32 parameters.

Before, only FNO, S4D, S5 and DCDM did: the ParaRNN cells and models, the
spectral convolution used alone, the neural fields and the sequence model let JAX
warn once per parameter array ("Explicitly requested dtype float64 requested
in zeros is not available") from inside sciml and silently built float32.
"""

import warnings

import jax
import jax.numpy as jnp
import pytest

from sciml import insr, operators, pararnn, ssm


F64 = jnp.float64
KEY = jax.random.key(0)

CONSTRUCTORS = {
    "SpectralConv": lambda: operators.SpectralConv(2, 2, 4, dtype=F64, key=KEY),
    "SpectralConv-tucker": lambda: operators.SpectralConv(
        2, 2, (4, 4), factorization="tucker", rank=0.5, dtype=F64, key=KEY
    ),
    "ChannelMLP": lambda: operators.ChannelMLP(2, 2, 4, dtype=F64, key=KEY),
    "ParaGRU": lambda: pararnn.ParaGRU(3, 4, dtype=F64, key=KEY),
    "ParaLSTM": lambda: pararnn.ParaLSTM(3, 4, dtype=F64, key=KEY),
    "GRU": lambda: pararnn.GRU(3, 4, dtype=F64, key=KEY),
    "LSTM": lambda: pararnn.LSTM(3, 4, dtype=F64, key=KEY),
    "RNNModel": lambda: pararnn.RNNModel(3, 2, width=4, depth=1, dtype=F64, key=KEY),
    "SIREN": lambda: insr.SIREN(2, 1, width=8, dtype=F64, key=KEY),
    "FourierFeatureMLP": lambda: insr.FourierFeatureMLP(2, 1, width=8, dtype=F64, key=KEY),
    "FourierBasis": lambda: insr.FourierBasis(3, 0.0, 1.0, dtype=F64),
    "SequenceModel": lambda: ssm.SequenceModel(
        2, 2, d_model=4, n_layers=1, state_size=4, dtype=F64, key=KEY
    ),
}


@pytest.fixture
def x64_off():
    jax.config.update("jax_enable_x64", False)
    try:
        yield
    finally:
        jax.config.update("jax_enable_x64", True)


@pytest.mark.parametrize("name", list(CONSTRUCTORS))
def test_float64_without_x64_warns_once_in_our_words(name, x64_off):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        module = CONSTRUCTORS[name]()
    messages = [str(w.message) for w in caught]
    # One warning, ours (JAX's say "Explicitly requested dtype").
    assert len(caught) == 1, messages
    assert "`dtype=float64` needs 64-bit JAX" in messages[0]
    assert "jax_enable_x64" in messages[0]
    dtypes = {leaf.dtype for leaf in jax.tree.leaves(module) if hasattr(leaf, "dtype")}
    assert dtypes <= {jnp.dtype(jnp.float32), jnp.dtype(jnp.complex64)}, dtypes
