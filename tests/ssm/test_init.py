import jax
import numpy as np
import pytest
import scipy.linalg

from sciml.ssm import (
    S4D,
    S5,
    hippo_legs,
    hippo_nplr,
    s4d_inv,
    s4d_legs,
    s4d_lin,
    s4d_real,
    s5_init,
)


def test_s4d_spectra_closed_forms():
    N = 16
    n = np.arange(N // 2)
    np.testing.assert_allclose(s4d_lin(N), -0.5 + 1j * np.pi * n)
    np.testing.assert_allclose(s4d_inv(N), -0.5 + 1j * N / np.pi * (N / (2 * n + 1) - 1))
    np.testing.assert_allclose(s4d_real(N), -(n + 1.0))


def test_s4d_legs_b_options():
    N = 32
    A_N, _, _ = hippo_nplr(N)
    _, B = hippo_legs(N)
    Lambda, B_raw = s4d_legs(N, b_scale=1.0, b_clip=None)
    # the modes are eigenpairs of the normal part: A_N v = lambda v with B_raw = V^H B
    w, V = np.linalg.eig(A_N)
    assert np.all(Lambda.imag < 0)
    np.testing.assert_allclose(Lambda.real, -0.5, atol=1e-12)
    for lam in Lambda:
        assert np.min(np.abs(w - lam)) < 1e-9
    # |V^H B| does not depend on the eigenvector phases
    _, B_half = s4d_legs(N, b_scale=0.5, b_clip=None)
    np.testing.assert_allclose(B_half, B_raw / 2)
    assert np.linalg.norm(B_raw) ** 2 <= np.linalg.norm(B) ** 2 / 2 + 1e-9  # half of V^H B
    _, B_clip = s4d_legs(N)  # reference: scale 1, clip 2
    np.testing.assert_allclose(B_clip.real, B_raw.real)
    np.testing.assert_allclose(B_clip.imag, np.clip(B_raw.imag, -2, 2))
    assert np.max(np.abs(B_raw.imag)) > 2  # the clip is active at this size


def test_s4d_layer_inits_and_copies(getkey):
    layer = S4D(8, 16, init="diag", n_ssm=2, key=getkey())
    Lambda = np.asarray(layer.Lambda)
    np.testing.assert_allclose(Lambda[0], s4d_inv(16), atol=1e-12)
    np.testing.assert_allclose(Lambda[1], s4d_lin(16), atol=1e-12)
    np.testing.assert_allclose(np.asarray(layer.B), 1.0)
    real = S4D(8, 16, init="real", key=getkey())
    np.testing.assert_allclose(np.asarray(real.Lambda)[0], s4d_real(16), atol=1e-12)


def test_log_dt_is_log_uniform(getkey):
    layer = S5(4, 8, dt_min=1e-3, dt_max=1e-1, key=getkey())
    many = S4D(4096, 4, dt_min=1e-3, dt_max=1e-1, key=getkey())
    log_dt = np.asarray(many.log_dt)
    assert np.all(log_dt >= np.log(1e-3)) and np.all(log_dt <= np.log(1e-1))
    # uniform on [log 1e-3, log 1e-1]: mean and standard deviation
    assert np.mean(log_dt) == pytest.approx(np.log(1e-2), abs=0.05)
    assert np.std(log_dt) == pytest.approx(np.log(100) / np.sqrt(12), rel=0.05)
    assert layer.log_dt.shape == (4,)  # one step per (stored) mode


@pytest.mark.parametrize("conj_sym", [True, False])
def test_s5_block_diagonal_hippo_n(conj_sym):
    P, J = 16, 4
    Lambda, V, V_inv = s5_init("hippo-n", P, J, conj_sym=conj_sym)
    A_N, _, _ = hippo_nplr(P // J)
    blocks = scipy.linalg.block_diag(*([A_N] * J))
    full = V @ np.diag(Lambda) @ V_inv
    np.testing.assert_allclose(2 * full.real if conj_sym else full, blocks, atol=1e-12)
    assert Lambda.shape == ((P // 2,) if conj_sym else (P,))
    np.testing.assert_allclose(V_inv, V.conj().T)


def test_s5_parameters_follow_the_eigenbasis(getkey):
    P, H = 16, 64
    layer = S5(H, P, init="hippo-n", key=getkey())
    Lambda, V, _ = s5_init("hippo-n", P)
    np.testing.assert_allclose(np.asarray(layer.Lambda), Lambda, atol=1e-12)
    # B~ = V^H B for a real lecun-normal B: [V, conj V] is unitary, so 2 Re(V B~) = B
    B = 2 * (V @ np.asarray(layer.B)).real
    np.testing.assert_allclose(2 * (V @ V.conj().T).real, np.eye(P), atol=1e-12)
    assert np.std(B) == pytest.approx(1 / np.sqrt(P), rel=0.1)  # fan-in P
    assert np.max(np.abs(B)) <= 2 / 0.87962566 / np.sqrt(P) + 1e-9  # truncated at 2 sigma


def test_conj_sym_with_odd_blocks_rejected():
    with pytest.raises(ValueError, match="state_size / blocks=3 is odd"):
        s5_init("hippo-n", 6, 2)
    Lambda, _, _ = s5_init("hippo-n", 6, 2, conj_sym=False)
    assert Lambda.shape == (6,)


def test_every_init_is_stable(getkey):
    for init in ("legs", "lin", "inv", "real", "ptd", "hippo-n"):
        assert np.all(np.asarray(S4D(4, 8, init=init, key=getkey()).Lambda.real) < 0)
    for init in ("hippo-n", "lin", "inv", "real", "ptd"):
        assert np.all(np.asarray(S5(4, 8, init=init, key=getkey()).Lambda.real) < 0)


def test_keys_make_layers_reproducible():
    a = S5(4, 8, key=jax.random.key(3))
    b = S5(4, 8, key=jax.random.key(3))
    np.testing.assert_array_equal(np.asarray(a.C_re), np.asarray(b.C_re))
