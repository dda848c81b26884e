import numpy as np
import pytest

from sciml.ssm import hippo_legs, hippo_normal_eig, hippo_normal_modes, hippo_nplr


def closed_form_legs(N):
    A = np.zeros((N, N))
    for n in range(N):
        for k in range(N):
            if n > k:
                A[n, k] = -np.sqrt(2 * n + 1) * np.sqrt(2 * k + 1)
            elif n == k:
                A[n, k] = -(n + 1)
    return A, np.sqrt(2 * np.arange(N) + 1.0)


@pytest.mark.parametrize("N", [1, 2, 7, 16])
def test_hippo_legs_closed_form_and_identities(N):
    A, B = hippo_legs(N)
    A_ref, B_ref = closed_form_legs(N)
    np.testing.assert_array_equal(A, A_ref)
    np.testing.assert_array_equal(B, B_ref)
    np.testing.assert_allclose(A[:, 0], -B, atol=1e-14)  # A e0 = -B, so A^-1 B = -e0
    # lower triangular: the eigenvalues are the diagonal, -1..-N
    np.testing.assert_array_equal(np.sort(np.diag(A)), -np.arange(N, 0, -1.0))
    assert np.all(np.triu(A, 1) == 0)


def test_transfer_function_peak_is_one_at_zero_frequency():
    # sup_w |(iw - A)^-1 B|_2 = |A^-1 B|_2 = |e0| = 1, attained at w = 0
    A, B = hippo_legs(12)
    norms = [np.linalg.norm(np.linalg.solve(1j * w * np.eye(12) - A, B)) for w in (0, 0.5, 3, 50)]
    assert norms[0] == pytest.approx(1.0, abs=1e-12)
    assert max(norms[1:]) < 1.0


@pytest.mark.parametrize("N", [2, 5, 8, 32])
def test_nplr_form(N):
    A, B = hippo_legs(N)
    A_N, P, B2 = hippo_nplr(N)
    np.testing.assert_allclose(A_N - np.outer(P, P), A, atol=1e-12)
    np.testing.assert_allclose(P, B / np.sqrt(2))
    np.testing.assert_allclose(A_N + A_N.T, -np.eye(N), atol=1e-12)
    np.testing.assert_array_equal(B2, B)


@pytest.mark.parametrize("N", [4, 9, 64])
def test_normal_part_eigendecomposition_reconstructs(N):
    A_N, _, _ = hippo_nplr(N)
    Lambda, V = hippo_normal_eig(N)
    np.testing.assert_allclose(V.conj().T @ V, np.eye(N), atol=1e-12)
    np.testing.assert_allclose(V @ np.diag(Lambda) @ V.conj().T, A_N, atol=1e-11 * N)
    np.testing.assert_allclose(Lambda.real, -0.5, atol=1e-12)
    assert np.all(np.diff(Lambda.imag) >= 0)
    np.testing.assert_allclose(np.sort(Lambda.imag), np.sort(-Lambda.imag), atol=1e-10 * N)


@pytest.mark.parametrize(
    "N, top", [(8, 19.86), (16, 80.97), (32, 325.43), (64, 1303.3), (128, 5214.7)]
)
def test_largest_frequency(N, top):
    Lambda, _ = hippo_normal_eig(N)
    assert np.max(np.abs(Lambda.imag)) == pytest.approx(top, rel=2e-4)


@pytest.mark.parametrize("N", [2, 10, 32])
def test_conjugate_half_reconstructs_real_matrix(N):
    A_N, _, _ = hippo_nplr(N)
    Lambda, V = hippo_normal_modes(N)
    assert Lambda.shape == (N // 2,) and np.all(Lambda.imag < 0)
    np.testing.assert_allclose(2 * (V @ np.diag(Lambda) @ V.conj().T).real, A_N, atol=1e-11 * N)


@pytest.mark.parametrize("bad", [0, -3, 2.5, True, "8"])
def test_bad_sizes(bad):
    with pytest.raises(ValueError, match="N must be a positive integer"):
        hippo_legs(bad)
