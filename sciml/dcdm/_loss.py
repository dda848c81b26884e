r"""The training losses of DCDM: the paper's scale-free residual loss and the
A-norm loss.

For a unit-norm right-hand side `b` and the network's direction `q = f(b)`,
the best multiple of `q` as an approximate solution is the exact line search
`α* = qᵀb / qᵀAq`: one DCDM step from `x₀ = 0`. The paper scores it by the
residual it leaves,

$$\mathcal{L}(b) = \lVert b - \alpha^* A q \rVert_2^2
= \lVert x^* - \alpha^* q \rVert_{A^2}^2 ,$$

the A²-norm of the one-step error (`x* = A⁻¹ b`). The iteration, however,
minimises the A-norm of the error, where the lowest modes (which set the
iteration count) weigh `1/θ` instead of `θ`. The A-norm loss scores that:

$$\mathcal{L}_A(b) = \frac{\lVert x^* - \alpha^* q\rVert_A^2}{\lVert x^*\rVert_A^2}
= 1 - \frac{(q^\top b)^2}{(q^\top A q)\,(b^\top x^*)} ,$$

(expand `‖x* − α q‖²_A = bᵀx* − 2α qᵀb + α² qᵀAq` at `α = α*`). It needs
`x*` for each training right-hand side (stored beside the Ritz data by
[`ritz_dataset`][sciml.dcdm.ritz_dataset] with `solve_A`). It lies in
`[0, 1]`, is 1 for a direction A-orthogonal to the error and 0 iff
`q ∝ A⁻¹ b`. Both losses are unchanged when `q` is scaled, so the network only
learns the direction of `A⁻¹ b`.
"""

from __future__ import annotations

from collections.abc import Callable

import jax
import jax.numpy as jnp
from jaxtyping import Array, Float


def _line_search(b, q, Aq):
    """`(qᵀAq, qᵀb, safe)`: a direction with `qᵀAq ≤ 0` (e.g. `q = 0`) is not
    moved along (`safe` False)."""
    qAq = jnp.vdot(q, Aq).real
    return qAq, jnp.vdot(q, b).real, qAq > 0


def scale_free_loss(
    b: Float[Array, "*grid"], q: Float[Array, "*grid"], Aq: Float[Array, "*grid"]
) -> Float[Array, ""]:
    """`‖b − α* A q‖²` with `α* = qᵀb / qᵀAq` for one sample (`Aq = A q` given).

    A direction with `qᵀAq = 0` (e.g. `q = 0`) scores `‖b‖²`, the loss of not
    moving.
    """
    qAq, qb, safe = _line_search(b, q, Aq)
    alpha = jnp.where(safe, qb / jnp.where(safe, qAq, 1), 0)
    return jnp.sum((b - alpha * Aq) ** 2)


def a_norm_loss(
    b: Float[Array, "*grid"],
    q: Float[Array, "*grid"],
    Aq: Float[Array, "*grid"],
    x_star: Float[Array, "*grid"],
) -> Float[Array, ""]:
    """`1 − (qᵀb)² / ((qᵀAq)(bᵀx*))` for one sample (`Aq = A q`, `x* = A⁻¹ b`
    given): the relative A-norm error `‖x* − α* q‖²_A / ‖x*‖²_A` after one
    step. A direction with `qᵀAq = 0` scores 1, the loss of not moving."""
    qAq, qb, safe = _line_search(b, q, Aq)
    bx = jnp.vdot(b, x_star).real
    return 1 - jnp.where(safe, qb**2 / jnp.where(safe, qAq * bx, 1), 0)


def _traces(fns: tuple[Callable, ...], shape: tuple[int, ...], dtype) -> Exception | None:
    """The error raised when tracing each of `fns` on one array of `shape`, or None."""
    try:
        for fn in fns:
            jax.eval_shape(fn, jax.ShapeDtypeStruct(shape, dtype))
    except Exception as error:  # noqa: BLE001 - reported by the caller, with the argument
        return error
    return None


def _check_batch(direction_fn: Callable, apply_A: Callable, b: Array) -> None:
    """Raises `ValueError` naming `b` unless `apply_A` and `direction_fn` take
    one sample `b[i]`: a `b` without its batch axis is said to be one."""
    shape, dtype = jnp.shape(b), jnp.result_type(b)
    if len(shape) < 2:
        raise ValueError(
            f"`b` must be a batch of right-hand sides (batch, *grid), got shape {shape}."
        )
    error = _traces((apply_A, direction_fn), shape[1:], dtype)
    if error is None:
        return
    if _traces((apply_A, direction_fn), shape, dtype) is None:
        raise ValueError(
            f"`b` must be a batch of right-hand sides (batch, *grid), got shape {shape}, which is "
            f"one right-hand side of `apply_A` and `direction_fn`: add the batch axis, `b[None]`."
        )
    raise ValueError(
        f"`b` must be a batch of right-hand sides (batch, *grid) whose samples {shape[1:]} "
        f"`apply_A` and `direction_fn` take, but calling them on one raised "
        f"{type(error).__name__}: {error}"
    ) from error


def dcdm_loss(
    direction_fn: Callable[[Array], Array],
    apply_A: Callable[[Array], Array],
    b: Float[Array, " batch *grid"],
    x_star: Float[Array, " batch *grid"] | None = None,
) -> Float[Array, ""]:
    """The batch mean of [`scale_free_loss`][sciml.dcdm.scale_free_loss], or of
    [`a_norm_loss`][sciml.dcdm.a_norm_loss] when `x_star` is given.

    **Arguments:**

    - `direction_fn`: `b ↦ q` for one sample (e.g. from
      [`direction_fn`][sciml.dcdm.direction_fn]); its output is cast to the
      dtype of `b`.
    - `apply_A`: `x ↦ A x` on one sample.
    - `b`: a batch of (unit-norm) right-hand sides, `(batch, *grid)`; a
      `b` whose samples `b[i]` `apply_A` or `direction_fn` cannot take (one
      right-hand side without its batch axis) is a `ValueError`.
    - `x_star`: the exact solutions `A⁻¹ b` of the batch (same shape as `b`),
      for the A-norm loss; None for the paper's loss.

    **Returns:** the mean loss, a scalar.
    """
    _check_batch(direction_fn, apply_A, b)
    if x_star is not None and jnp.shape(x_star) != jnp.shape(b):
        raise ValueError(
            f"`x_star` must have the shape of `b` {jnp.shape(b)}, got {jnp.shape(x_star)}."
        )

    def one(bi, xi):
        q = jnp.asarray(direction_fn(bi)).astype(bi.dtype)
        Aq = apply_A(q)
        if xi is None:
            return scale_free_loss(bi, q, Aq)
        return a_norm_loss(bi, q, Aq, xi.astype(bi.dtype))

    if x_star is None:
        return jnp.mean(jax.vmap(lambda bi: one(bi, None))(b))
    return jnp.mean(jax.vmap(one)(b, x_star))
