"""Operator-learning losses: relative Lp and relative H1 (neuraloperator's `LpLoss`, `H1Loss`).

Inputs are batches `(batch, channels, *grid)`; the relative error is taken per
(sample, channel) over the `d` grid axes, then reduced over samples and
channels (`"sum"`, `"mean"` or `"none"`).
"""

from collections.abc import Sequence

import jax.numpy as jnp
from jaxtyping import Array, Float

from .._checks import check_choice
from .._custom_types import Real


REDUCTIONS = ("sum", "mean", "none")


def _prepare(pred, true, d, reduction, name):
    if pred.shape != true.shape:
        raise ValueError(f"{name}: `pred` {pred.shape} and `true` {true.shape} differ in shape.")
    check_choice("reduction", reduction, REDUCTIONS)
    if d is None:
        d = pred.ndim - 2
    if not isinstance(d, int) or d < 1 or d > pred.ndim:
        raise ValueError(
            f"{name}: inputs (batch, channels, *grid) need d >= 1 grid axes; got shape "
            f"{pred.shape} with d={d!r}."
        )
    return d


def _reduce(values, reduction):
    if reduction == "sum":
        return jnp.sum(values)
    if reduction == "mean":
        return jnp.mean(values)
    return values


def relative_lp_loss(
    pred: Float[Array, "..."],
    true: Float[Array, "..."],
    *,
    p: Real = 2.0,
    d: int | None = None,
    reduction: str = "sum",
    eps: Real = 1e-8,
) -> Float[Array, " ..."]:
    """Relative Lp error `‖pred − true‖_p / (‖true‖_p + eps)` per (sample, channel).

    **Arguments:** `pred`, `true` of equal shape `(batch, channels, *grid)`;
    `p` the norm order; `d` the number of grid axes (default `ndim − 2`);
    `reduction` `"sum"` (neuraloperator's default), `"mean"` or `"none"`;
    `eps` guards zero targets.

    **Returns:** a scalar, or the errors `(batch, channels)` for `"none"`.
    (The grid spacing cancels in the ratio.)
    """
    d = _prepare(pred, true, d, reduction, "relative_lp_loss")
    if not p > 0:
        raise ValueError(f"relative_lp_loss: `p` must be > 0, got {p}.")
    axes = tuple(range(pred.ndim - d, pred.ndim))

    def norm(x):
        return jnp.sum(jnp.abs(x) ** p, axis=axes) ** (1.0 / p)

    return _reduce(norm(pred - true) / (norm(true) + eps), reduction)


def finite_difference(
    x: Float[Array, " ... n"], axis: int, h: Real, periodic: bool = True
) -> Float[Array, " ... n"]:
    """Central difference `(x[i+1] − x[i−1]) / 2h` along `axis`.

    Periodic: neighbours wrap around. Otherwise the first and last points use
    the one-sided differences `(x[1] − x[0]) / h` and `(x[-1] − x[-2]) / h`.
    """
    if periodic:
        return (jnp.roll(x, -1, axis) - jnp.roll(x, 1, axis)) / (2 * h)
    x = jnp.moveaxis(x, axis, -1)
    inner = (x[..., 2:] - x[..., :-2]) / (2 * h)
    first = (x[..., 1:2] - x[..., :1]) / h
    last = (x[..., -1:] - x[..., -2:-1]) / h
    return jnp.moveaxis(jnp.concatenate([first, inner, last], axis=-1), -1, axis)


def h1_loss(
    pred: Float[Array, "..."],
    true: Float[Array, "..."],
    *,
    d: int | None = None,
    periodic: bool = True,
    domain_length: Real | Sequence[Real] = 1.0,
    reduction: str = "sum",
    eps: Real = 1e-8,
) -> Float[Array, " ..."]:
    """Relative H1 error per (sample, channel):
    `sqrt(Σ e² + Σ_j |∂_j e|²) / (sqrt(Σ y² + Σ_j |∂_j y|²) + eps)`, `e = pred − true`.

    Derivatives are central differences with `h_j = domain_length_j / N_j`,
    periodic by default (set `periodic=False` for non-periodic data such as
    Darcy flow; the boundary then uses one-sided differences). The terms are not
    weighted, so at high resolution the gradient term dominates.

    **Arguments:** as `relative_lp_loss`, plus `periodic` and `domain_length`
    (one length, or one per grid axis).

    **Returns:** a scalar, or `(batch, channels)` for `"none"`.
    """
    d = _prepare(pred, true, d, reduction, "h1_loss")
    grid = pred.shape[pred.ndim - d :]
    lengths = (
        (float(domain_length),) * d
        if isinstance(domain_length, int | float)
        else tuple(float(v) for v in domain_length)
    )
    if len(lengths) != d:
        raise ValueError(f"h1_loss: `domain_length` needs 1 or {d} values, got {domain_length!r}.")
    if not periodic and min(grid) < 2:
        raise ValueError(
            f"h1_loss: non-periodic differences need >= 2 points per axis, got {grid}."
        )
    axes = tuple(range(pred.ndim - d, pred.ndim))
    err = pred - true

    def sq(x):
        total = jnp.sum(x**2, axis=axes)
        for j, axis in enumerate(axes):
            total = total + jnp.sum(
                finite_difference(x, axis, lengths[j] / grid[j], periodic) ** 2, axis=axes
            )
        return total

    return _reduce(jnp.sqrt(sq(err)) / (jnp.sqrt(sq(true)) + eps), reduction)
