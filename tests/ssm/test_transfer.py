"""Transfer functions and the distances to HiPPO-LegS."""

import numpy as np
import pytest
import scipy.integrate

from sciml.ssm import (
    diagonal_transfer,
    hippo_legs,
    hippo_normal_modes,
    hippo_nplr,
    hippo_transfer,
    smooth_input_distance,
    transfer_distance,
)


def legs_system(N, b_scale):
    Lambda, V = hippo_normal_modes(N)
    B = b_scale * (V.conj().T @ hippo_legs(N)[1])
    both = lambda x: np.concatenate([x, np.conj(x)], -1)  # noqa: E731
    return both(Lambda), both(V), both(B)


def test_transfer_functions_match_dense_solves():
    N = 9
    A, B = hippo_legs(N)
    A_N, _, _ = hippo_nplr(N - 1)
    omega = np.array([-40.0, -1.0, 0.0, 0.3, 7.0, 250.0])
    dense = np.array([np.linalg.solve(1j * w * np.eye(N) - A, B) for w in omega])
    np.testing.assert_allclose(hippo_transfer(N, omega), dense, rtol=1e-12)
    B8 = hippo_legs(N - 1)[1]
    dense_N = np.array([np.linalg.solve(1j * w * np.eye(N - 1) - A_N, B8) for w in omega])
    np.testing.assert_allclose(
        diagonal_transfer(*legs_system(N - 1, 1.0), omega), dense_N, atol=1e-12
    )


@pytest.mark.parametrize(
    "N, unhalved, halved", [(16, 20.2, 10.0), (32, 40.7, 20.3), (64, 81.5, 40.7)]
)
def test_s4d_legs_worst_case_distance_grows_with_n(N, unhalved, halved):
    # computed reference values: the spike at the top frequency grows like N
    assert transfer_distance(*legs_system(N, 1.0)) == pytest.approx(unhalved, rel=0.01)
    assert transfer_distance(*legs_system(N, 0.5)) == pytest.approx(halved, rel=0.01)


def test_smooth_input_distance_matches_time_domain_solution():
    # x' = Ax + Bu with u = exp(-t^2/2), from rest at t = -10, compared at T = 2
    N, T = 6, 2.0
    Lambda, V, B_t = legs_system(N, 0.5)
    A_N, _, _ = hippo_nplr(N)
    A, B = hippo_legs(N)

    def final_state(M, b):
        sol = scipy.integrate.solve_ivp(
            lambda t, x: M @ x + b * np.exp(-(t**2) / 2),
            (-10.0, T),
            np.zeros(N),
            rtol=1e-11,
            atol=1e-13,
        )
        return sol.y[:, -1]

    expected = np.linalg.norm(final_state(A_N, B / 2) - final_state(A, B))
    assert smooth_input_distance(Lambda, V, B_t, time=T) == pytest.approx(expected, rel=1e-6)


def test_halved_s4d_legs_converges_weakly_but_not_uniformly():
    smooth = [smooth_input_distance(*legs_system(N, 0.5)) for N in (8, 16, 32)]
    worst = [transfer_distance(*legs_system(N, 0.5)) for N in (8, 16, 32)]
    assert smooth[0] > 5 * smooth[1] > 25 * smooth[2]
    assert worst[0] < worst[1] < worst[2]
    assert smooth_input_distance(*legs_system(32, 1.0)) > 0.5  # unhalved B does not converge
