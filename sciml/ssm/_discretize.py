r"""Discretisation of diagonal systems `x' = Λx + Bu` with step `Δ`, mode by mode.

- ZOH: `λ̄ = e^{Δλ}`, `B̄ = (e^{Δλ} − 1)/λ · B` (exact for piecewise-constant input);
- bilinear: `λ̄ = (1 + Δλ/2)/(1 − Δλ/2)`, `B̄ = Δ/(1 − Δλ/2) · B`.

Both preserve the DC gain `−C Λ⁻¹ B`. The kernel uses `log λ̄` (for ZOH exactly
`Δλ`, so `λ̄ˡ = e^{lΔλ}` never takes the log of an underflowed `λ̄`; for
bilinear `λ̄ = 0` at `Δλ = −2` is replaced by `eps²`).
"""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Complex, Float

from .._checks import check_choice, check_positive_finite
from .._custom_types import Real


DISCRETIZATIONS = ("zoh", "bilinear")


def check_discretization(method: str) -> str:
    """Raises `ValueError` unless `method` is one of `DISCRETIZATIONS`."""
    return check_choice("discretization", method, DISCRETIZATIONS)


def discrete_log_eigenvalues(
    Lambda: Complex[Array, " *modes"],
    dt: Float[Array | np.ndarray, "..."] | Real,
    method: str = "zoh",
) -> tuple[Complex[Array, "..."], Complex[Array, "..."]]:
    """`(log λ̄, γ)` with `λ̄ = exp(log λ̄)` and `B̄ = γ B`, elementwise.

    **Arguments:**

    - `Lambda`: continuous eigenvalues (any shape).
    - `dt`: steps `Δ > 0` (finite), broadcastable against `Lambda`. A concrete
      `dt ≤ 0` or non-finite `dt` raises `ValueError` (a negative step turns
      the decaying `e^{Δλ}` into a growing one); traced values are not checked.
    - `method`: `"zoh"` or `"bilinear"`.

    **Returns:** `(log_Lambda_bar, gamma)`, both of the broadcast shape.
    """
    check_positive_finite("dt", dt)
    dt_Lambda = dt * Lambda
    if check_discretization(method) == "zoh":
        return dt_Lambda, jnp.expm1(dt_Lambda) / Lambda
    denominator = 1.0 - dt_Lambda / 2
    # Δλ = −2 maps to λ̄ = 0; keep its logarithm finite (λ̄ˡ ≈ eps^(2l) for l ≥ 1)
    numerator = 1.0 + dt_Lambda / 2
    numerator = jnp.where(numerator == 0, jnp.finfo(numerator.dtype).eps ** 2, numerator)
    return jnp.log(numerator / denominator), dt / denominator


def discretize(
    Lambda: Complex[Array, " *modes"],
    B: Complex[Array, " *modes ..."],
    dt: Float[Array | np.ndarray, "..."] | Real,
    method: str = "zoh",
) -> tuple[Complex[Array, " *modes"], Complex[Array, " *modes ..."]]:
    """`(Λ̄, B̄)` of the diagonal system `(Λ, B)` with steps `dt`.

    **Arguments:**

    - `Lambda`: eigenvalues `(..., P)`.
    - `B`: `Lambda`'s shape (one input per mode, S4D) or that shape plus
      trailing axes (rows of a MIMO input matrix, S5: `(P, H)`); the factor
      `γ` multiplies along the leading axes.
    - `dt`: steps `Δ > 0` (finite), broadcastable against `Lambda`; checked
      when concrete, as in [`discrete_log_eigenvalues`][sciml.ssm.discrete_log_eigenvalues].
    - `method`: `"zoh"` or `"bilinear"`.

    **Returns:** `(Lambda_bar, B_bar)`.
    """
    log_Lambda_bar, gamma = discrete_log_eigenvalues(Lambda, dt, method)
    gamma = gamma.reshape(gamma.shape + (1,) * (B.ndim - gamma.ndim))
    return jnp.exp(log_Lambda_bar), gamma * B
