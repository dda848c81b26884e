"""Stream solvers: the heat runs against exact per-mode factors and a dense reference."""

import numpy as np
import pytest

from solvers.streams import HEAT_PARAMS, heat_fields
from tests.solvers._heat_reference import dense_heat_records


def _params(values):
    return dict(zip(HEAT_PARAMS, map(float, values)))


def _dst(m):
    """The orthonormal sine basis of m interior nodes and the eigenvalues
    `4 sin²(kπh/2) + 4 sin²(lπh/2)` of the h²-scaled Dirichlet Laplacian."""
    j = np.arange(1, m + 1)
    basis = np.sqrt(2 / (m + 1)) * np.sin(np.pi * np.outer(j, j) / (m + 1))
    lam = 4 * np.sin(np.pi * j / (2 * (m + 1))) ** 2
    return basis, lam[:, None] + lam[None, :]


def test_heat_modes_decay_by_exact_explicit_factor():
    # Zero sides, T0 inside: the interior is a sum of the discrete modes
    # sin(kπx)sin(lπy), each multiplied per step by exactly 1 − r·λ_kl.
    s, dt, interval, n = 17, 5e-4, 2e-3, 6  # r = 0.128, 4 substeps per field
    out = list(
        heat_fields(
            _params([0.8, 0, 0, 0, 0]),
            seed=0,
            resolution=s,
            n_steps=n,
            interval=interval,
            dt=dt,
            dtype="float64",
        )
    )
    basis, lam = _dst(s - 2)
    r = dt * (s - 1) ** 2
    coefficients = basis @ np.full((s - 2, s - 2), 0.8) @ basis
    for k, step in enumerate(out, start=1):
        expected = basis @ (coefficients * (1 - r * lam) ** (4 * k)) @ basis
        # Measured max error 1.1e-15 (9x headroom).
        np.testing.assert_allclose(step["temperature"][0, 1:-1, 1:-1], expected, rtol=0, atol=1e-14)
        np.testing.assert_allclose(step["t"], [k * interval], rtol=1e-15)


def test_heat_matches_dense_explicit_reference_with_boundaries():
    s, dt, n = 9, 3e-3, 5  # r = 0.192
    theta = np.array([0.3, 1.0, -0.5, 0.2, 0.7])
    records = dense_heat_records(s, theta, dt * (s - 1) ** 2, n, implicit=False)
    out = np.stack(
        [
            f["temperature"][0]
            for f in heat_fields(
                _params(theta), seed=1, resolution=s, n_steps=n, interval=dt, dt=dt, dtype="float64"
            )
        ]
    )
    err = np.abs(out[:, 1:-1, 1:-1] - records).max()
    assert err < 1e-14, err  # measured 1.1e-16
    np.testing.assert_array_equal(out[:, 0, 1:-1], theta[1])
    np.testing.assert_array_equal(out[:, -1, 1:-1], theta[2])
    np.testing.assert_array_equal(out[:, 1:-1, 0], theta[3])
    np.testing.assert_array_equal(out[:, 1:-1, -1], theta[4])
    np.testing.assert_array_equal(out[:, 0, 0], 0.5 * (theta[1] + theta[3]))


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_heat_constant_stays_constant(dtype):
    out = list(heat_fields(_params([0.37] * 5), seed=0, resolution=17, n_steps=20, dtype=dtype))
    fields = np.stack([f["temperature"] for f in out])
    assert fields.dtype == np.dtype(dtype) and fields.shape == (20, 1, 17, 17)
    # Measured max deviation: 0 in float64; in float32 every value is float32(0.37)
    # (5e-9 from 0.37).
    np.testing.assert_allclose(fields, 0.37, rtol=0, atol=1e-15 if dtype == "float64" else 1e-8)


def test_heat_float32_follows_float64():
    kwargs = dict(seed=0, resolution=17, n_steps=10, interval=1e-3, dt=2.5e-4)
    p = _params([0.3, 1.0, 0.0, 0.2, 0.7])
    f64 = np.stack([f["temperature"] for f in heat_fields(p, dtype="float64", **kwargs)])
    f32 = np.stack([f["temperature"] for f in heat_fields(p, dtype="float32", **kwargs)])
    # Measured max difference 8.9e-8 (11x headroom).
    np.testing.assert_allclose(f32, f64, rtol=0, atol=1e-6)


def test_heat_stability_bound_and_bad_input():
    p = _params([0.0, 1, 1, 1, 1])
    # r = dt (s-1)^2 = 1/4 exactly is stable and accepted; just above is refused.
    next(heat_fields(p, seed=0, resolution=17, interval=1 / 1024, dt=1 / 1024))
    with pytest.raises(ValueError, match=r"`dt` .* r = .* > 1/4; use dt <= 0.0009766"):
        next(heat_fields(p, seed=0, resolution=17, interval=1.1 / 1024, dt=1.1 / 1024))
    with pytest.raises(ValueError, match="`params` must be a dict with exactly the keys"):
        next(heat_fields({"T0": 1.0}, seed=0))
    with pytest.raises(ValueError, match=r"params\['T_top'\] must be a finite number"):
        next(heat_fields({**p, "T_top": float("nan")}, seed=0))
    with pytest.raises(ValueError, match="resolution"):
        next(heat_fields(p, seed=0, resolution=2))
    with pytest.raises(ValueError, match="interval"):
        next(heat_fields(p, seed=0, interval=3e-4, dt=2e-4))
    with pytest.raises(ValueError, match="diffusivity"):
        next(heat_fields(p, seed=0, diffusivity=0.0))
    with pytest.raises(ValueError, match="dtype"):
        next(heat_fields(p, seed=0, dtype="float16"))
