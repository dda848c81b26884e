r"""Damped (Levenberg–Marquardt) quasi-Newton steps evaluated by a Kalman filter: quasi-ELK.

One step from the iterate `s` (Gonzalez et al., NeurIPS 2024) treats the
linearised recurrence as the dynamics of a linear-Gaussian state-space model and
the current iterate as noisy observations of it:
$$z_t = a_t z_{t-1} + b_t + w_t,\quad w_t \sim N(0, 1),\qquad
  s_t = z_t + v_t,\quad v_t \sim N(0, \sigma^2),$$
with `a_t` the diagonal of `∂f/∂h` at `s_{t-1}` and
`b_t = f(s_{t-1}, x_t) − a_t s_{t-1}`; the next iterate is the filtered mean
`E[z_t | s_1..s_t]`. This is a Levenberg–Marquardt step with damping
`λ = 1/σ²`: `σ² → ∞` gives the undamped (quasi-)Newton step, `σ² → 0` no
step, and the fixed point is the same as Newton's. The Kalman gain shrinks the
linearised dynamics to `(1 − K_t) a_t`, so the step stays bounded where the
undamped one explodes (`|a_t| > 1`).

The filter is the parallel-in-time Kalman filter of Särkkä and
García-Fernández (2021): each step is an element `(A, b, C, η, J)` of an
associative operation, evaluated with `lax.associative_scan`. Everything is
elementwise because the dynamics are diagonal.
"""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np
from jax import lax
from jaxtyping import Array, Float

from .._checks import check_positive_finite


def _combine(earlier, later):
    a1, b1, c1, eta1, j1 = earlier
    a2, b2, c2, eta2, j2 = later
    denom = 1 + c1 * j2
    return (
        a2 * a1 / denom,
        a2 * (b1 + c1 * eta2) / denom + b2,
        a2 * a2 * c1 / denom + c2,
        a1 * (eta2 - j2 * b1) / denom + eta1,
        a1 * a1 * j2 / denom + j1,
    )


def kalman_filter_means(
    a: Float[Array | np.ndarray, "length n"],
    b: Float[Array | np.ndarray, "length n"],
    observations: Float[Array | np.ndarray, "length n"],
    sigma2: float,
) -> Float[Array, "length n"]:
    """Filtered means of `z_t = a_t z_{t-1} + b_t + N(0, 1)`, `s_t = z_t + N(0, σ²)`.

    Independently per state element; `z_0 = 0` exactly (fold a known initial
    state into `b_1`), so `z_1 ~ N(b_1, 1)` a priori.

    **Arguments:** `a`, `b`, `observations` of one shape `(length, n)`;
    `sigma2`, the observation variance `σ² > 0` (finite; `1/σ²` is the damping
    of [`DampedNewton`][sciml.pararnn.DampedNewton]). A concrete `sigma2 ≤ 0`
    or non-finite one raises `ValueError` (a variance cannot be negative, and
    `σ² = −1` divides by zero); traced values are not checked.

    **Returns:** the filtered means `(length, n)`.
    """
    check_positive_finite("sigma2", sigma2)
    gain = 1 / (1 + sigma2)
    a = jnp.asarray(a).at[0].set(0)
    innovation = observations - b
    elements = (
        (1 - gain) * a,
        b + gain * innovation,
        jnp.full_like(b, 1 - gain),
        a * gain * innovation,
        a * a * gain,
    )
    return lax.associative_scan(_combine, elements)[1]
