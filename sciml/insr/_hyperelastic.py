r"""The incremental potential of 2-D elastodynamics as per-sample residuals.

The paper's implicit-Euler step minimises over the new deformation `q(X)`

$$E(q) = \frac{k}{\Delta t^2}\sum_i \lVert q_i - \tilde q_i\rVert^2
+ \sum_i \psi(F_i) - \sum_i (q_i - q^n_i)\cdot f
+ \sum_i \tfrac{k_c}{2}\,\max(0, -d_i)^2,\qquad
\tilde q = 2q^n - q^{n-1},$$

with `F = ∂q/∂X`, `ψ(F) = a Σⱼ(σⱼ − 1)² + b (det F − 1)²` (ARAP plus a
volume term; `σⱼ` the singular values of `F`), mass `2k` per sample
(kinetic energy `k‖q̇‖²`), force `f` per sample and the signed distance `d`
to a floor. Every term is a square once written right:

- kinetic + external `= (k/Δt²)‖q − q̃ − (Δt²/2k) f‖² + const` (complete the square);
- `Σⱼ(σⱼ − 1)² = ‖F − R(F)‖²_F` with `R` the rotation of the polar
  decomposition (for `det F > 0`; otherwise `R` still minimises `‖F − R‖` over
  rotations, the ARAP energy). In 2-D `R` is closed-form from
  `(F₀₀ + F₁₁, F₁₀ − F₀₁)` and smooth wherever that pair is non-zero (`F = I`
  included), whereas a singular-value formula has a NaN gradient at isotropic `F`;
- contact `= (√(k_c/2) max(0, −d))²`, whose gradient is exactly the penalty
  force `k_c max(0, −d) n`. (The reference code's contact "penalty work"
  `−Δt Σ q̇·(k_c d n)` is not the gradient of any energy of `q`.)

So `E = ‖r‖² + const` for the stacked per-sample residuals below, and a
Gauss–Newton / Levenberg–Marquardt solver applies.
"""

from __future__ import annotations

from typing import Any

import jax.numpy as jnp
from jaxtyping import Array, Float


def polar_rotation(F: Float[Array, "2 2"]) -> Float[Array, "2 2"]:
    """The rotation `R` of the polar decomposition `F = R S` of a 2×2 matrix:
    `R = [[c, −s], [s, c]]/√(c² + s²)` with `c = F₀₀ + F₁₁`, `s = F₁₀ − F₀₁`
    (the rotation maximising `tr(RᵀF)`); the identity where `c = s = 0`."""
    c = F[0, 0] + F[1, 1]
    s = F[1, 0] - F[0, 1]
    r2 = c * c + s * s
    ok = r2 > 0
    r = jnp.sqrt(jnp.where(ok, r2, 1.0))
    cos = jnp.where(ok, c / r, 1.0)
    sin = jnp.where(ok, s / r, 0.0)
    return jnp.stack([jnp.stack([cos, -sin]), jnp.stack([sin, cos])])


def arap_residual(F: Float[Array, "2 2"]) -> Float[Array, " 4"]:
    """`vec(F − R(F))`, whose squared norm is `Σⱼ(σⱼ − 1)²` when `det F > 0`."""
    return (F - polar_rotation(F)).reshape(-1)


def elastic_residual(F: Float[Array, "2 2"], a: Any, b: Any) -> Float[Array, " 5"]:
    """`[√a vec(F − R), √b (det F − 1)]`: its squared norm is `ψ(F)`."""
    det = F[0, 0] * F[1, 1] - F[0, 1] * F[1, 0]
    return jnp.concatenate([jnp.sqrt(a) * arap_residual(F), jnp.sqrt(b) * (det - 1)[None]])


def energy_density(F: Float[Array, "2 2"], a: Any, b: Any) -> Float[Array, ""]:
    """`ψ(F) = a‖F − R(F)‖² + b (det F − 1)²`."""
    return jnp.sum(elastic_residual(F, a, b) ** 2)


def inertia_residual(
    u: Float[Array, " 2"],
    u_n: Float[Array, " 2"],
    u_nm1: Float[Array, " 2"],
    force: Float[Array, " 2"],
    mass: Any,
    dt: Any,
) -> Float[Array, " 2"]:
    """`√k/Δt · (u − 2uⁿ + uⁿ⁻¹ − (Δt²/2k) f)` (displacements; `X` cancels):
    kinetic plus external terms after completing the square."""
    return jnp.sqrt(mass) / dt * (u - 2 * u_n + u_nm1 - dt**2 / (2 * mass) * force)


def contact_residual(q: Float[Array, " 2"], floor: Any, stiffness: Any) -> Float[Array, " 1"]:
    """`√(k_c/2) max(0, y_floor − q_y)`: squared, the penalty `k_c d²/2` of a
    point `d` below the floor `y = y_floor`."""
    return (jnp.sqrt(stiffness / 2) * jnp.maximum(0.0, floor - q[1]))[None]
