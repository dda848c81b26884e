r"""The scale-free training loss of DCDM.

For a unit-norm right-hand side `b` and the network's direction `q = f(b)`,
the best multiple of `q` as an approximate solution is the exact line search

$$\alpha^* = \frac{q^\top b}{q^\top A q},\qquad
\mathcal{L}(b) = \lVert b - \alpha^* A q \rVert_2^2 ,$$

exactly the squared residual left by one DCDM step from `x₀ = 0`. It does not
change when `q` is scaled, so the network only learns the direction of
`A⁻¹ b`, and it is zero iff `q ∝ A⁻¹ b` (for SPD `A`; for a singular `A`, up
to the null space).
"""

from __future__ import annotations

from collections.abc import Callable

import jax
import jax.numpy as jnp
from jaxtyping import Array, Float


def scale_free_loss(
    b: Float[Array, "*grid"], q: Float[Array, "*grid"], Aq: Float[Array, "*grid"]
) -> Float[Array, ""]:
    """`‖b − α* A q‖²` with `α* = qᵀb / qᵀAq` for one sample (`Aq = A q` given).

    A direction with `qᵀAq = 0` (e.g. `q = 0`) scores `‖b‖²`, the loss of not
    moving.
    """
    qAq = jnp.vdot(q, Aq).real
    safe = qAq > 0
    alpha = jnp.where(safe, jnp.vdot(q, b).real / jnp.where(safe, qAq, 1), 0)
    return jnp.sum((b - alpha * Aq) ** 2)


def dcdm_loss(
    direction_fn: Callable[[Array], Array],
    apply_A: Callable[[Array], Array],
    b: Float[Array, " batch *grid"],
) -> Float[Array, ""]:
    """The batch mean of [`scale_free_loss`][sciml.dcdm.scale_free_loss].

    **Arguments:**

    - `direction_fn`: `b ↦ q` for one sample (e.g. from
      [`direction_fn`][sciml.dcdm.direction_fn]); its output is cast to the
      dtype of `b`.
    - `apply_A`: `x ↦ A x` on one sample.
    - `b`: a batch of (unit-norm) right-hand sides.

    **Returns:** the mean loss, a scalar.
    """

    def one(bi):
        q = jnp.asarray(direction_fn(bi)).astype(bi.dtype)
        return scale_free_loss(bi, q, apply_A(q))

    return jnp.mean(jax.vmap(one)(b))
