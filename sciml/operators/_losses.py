"""Operator-learning losses: relative Lp and relative H1 (neuraloperator's `LpLoss`, `H1Loss`).

**Layout contract.** Inputs are batches `(batch, channels, *grid)`, channel
first, as the operators return them under `jax.vmap`. The caller states the
number of grid axes `d` (required, as neuraloperator's `d`), so the array must
have exactly `d + 2` axes: one sample `(channels, *grid)` or a batch without a
channel axis is refused (add the missing axis with `x[None]` or
`x[:, None]`). A channel-last batch `(batch, *grid, channels)` has the same
number of axes, so pass `channels=` to have it refused as well (the error says
how to move the axis). Without `channels=`, `h1_loss` still refuses the usual
case, one to two channels last, on periodic grids: its central differences need
at least 3 points per grid axis, so a last "grid" axis of 1 or 2 points is an
error (3 or more channels last pass unnoticed; `channels=` catches those).
The relative error is taken per (sample, channel) over
the `d` grid axes, then reduced over samples and channels (`"sum"`, `"mean"`
or `"none"`).
"""

from collections.abc import Sequence

import jax.numpy as jnp
from jaxtyping import Array, Float

from .._checks import check_choice, check_positive_int
from .._custom_types import Real


REDUCTIONS = ("sum", "mean", "none")
EDGE_ORDERS = (1, 3)


def _prepare(pred, true, d, channels, reduction, name):
    if pred.shape != true.shape:
        raise ValueError(f"{name}: `pred` {pred.shape} and `true` {true.shape} differ in shape.")
    check_choice("reduction", reduction, REDUCTIONS)
    if isinstance(d, bool) or not isinstance(d, int) or d < 1:
        raise ValueError(
            f"{name}: inputs (batch, channels, *grid) need d >= 1 grid axes; `d` must be an "
            f"int >= 1, got d={d!r}."
        )
    if pred.ndim != d + 2:
        hint = ""
        if pred.ndim == d + 1:
            hint = (
                " It looks like one sample `(channels, *grid)` or a batch without a channel "
                "axis: add the missing axis (`x[None]` for one sample, `x[:, None]` for one "
                "channel)."
            )
        raise ValueError(
            f"{name}: inputs must be `(batch, channels, *grid)` with d={d} grid axes, i.e. "
            f"{d + 2} axes, got shape {pred.shape}.{hint}"
        )
    if channels is not None:
        check_positive_int("channels", channels)
        if pred.shape[1] != channels:
            hint = (
                " The channel axis looks last: move it with `jnp.moveaxis(x, -1, 1)`."
                if pred.shape[-1] == channels
                else ""
            )
            raise ValueError(
                f"{name}: `channels={channels}` but axis 1 of `(batch, channels, *grid)` has "
                f"size {pred.shape[1]} (shape {pred.shape}).{hint}"
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
    d: int,
    p: Real = 2.0,
    channels: int | None = None,
    reduction: str = "sum",
    eps: Real = 1e-8,
) -> Float[Array, " ..."]:
    """Relative Lp error `‖pred − true‖_p / (‖true‖_p + eps)` per (sample, channel).

    **Arguments:** `pred`, `true` of equal shape `(batch, channels, *grid)`
    (see the layout contract in the module docstring); `d` the number of grid
    axes (required: `pred.ndim` must be `d + 2`); `p` the norm order;
    `channels` (optional) the expected size of axis 1, which also catches a
    channel-last batch; `reduction` `"sum"` (neuraloperator's default), `"mean"` or `"none"`;
    `eps` guards zero targets.

    **Returns:** a scalar, or the errors `(batch, channels)` for `"none"`.
    (The grid spacing cancels in the ratio.)
    """
    d = _prepare(pred, true, d, channels, reduction, "relative_lp_loss")
    if not p > 0:
        raise ValueError(f"relative_lp_loss: `p` must be > 0, got {p}.")
    axes = tuple(range(pred.ndim - d, pred.ndim))

    def norm(x):
        return jnp.sum(jnp.abs(x) ** p, axis=axes) ** (1.0 / p)

    return _reduce(norm(pred - true) / (norm(true) + eps), reduction)


def finite_difference(
    x: Float[Array, " ... n"], axis: int, h: Real, periodic: bool = True, edge_order: int = 1
) -> Float[Array, " ... n"]:
    """Central difference `(x[i+1] − x[i−1]) / 2h` along `axis`.

    Periodic: neighbours wrap around. Otherwise the first and last points use
    one-sided differences of order `edge_order`:

    - `1` (neuraloperator 1.0's `central_diff_*` with `fix_x_bnd=True`):
      `(x[1] − x[0]) / h` and `(x[-1] − x[-2]) / h`;
    - `3` (neuraloperator 2.0's `FiniteDiff`): `(−11x[0] + 18x[1] − 9x[2] + 2x[3]) / 6h`
      and `(11x[-1] − 18x[-2] + 9x[-3] − 2x[-4]) / 6h` (needs 4 points).
    """
    check_choice("edge_order", edge_order, EDGE_ORDERS)
    if periodic:
        return (jnp.roll(x, -1, axis) - jnp.roll(x, 1, axis)) / (2 * h)
    x = jnp.moveaxis(x, axis, -1)
    if x.shape[-1] < edge_order + 1:
        raise ValueError(
            f"finite_difference: non-periodic differences with `edge_order={edge_order}` need "
            f">= {edge_order + 1} points along axis {axis}, got {x.shape[-1]}."
        )
    inner = (x[..., 2:] - x[..., :-2]) / (2 * h)
    if edge_order == 1:
        first = (x[..., 1:2] - x[..., :1]) / h
        last = (x[..., -1:] - x[..., -2:-1]) / h
    else:
        first = (-11 * x[..., :1] + 18 * x[..., 1:2] - 9 * x[..., 2:3] + 2 * x[..., 3:4]) / (6 * h)
        last = (11 * x[..., -1:] - 18 * x[..., -2:-1] + 9 * x[..., -3:-2] - 2 * x[..., -4:-3]) / (
            6 * h
        )
    return jnp.moveaxis(jnp.concatenate([first, inner, last], axis=-1), -1, axis)


def h1_loss(
    pred: Float[Array, "..."],
    true: Float[Array, "..."],
    *,
    d: int,
    periodic: bool = True,
    domain_length: Real | Sequence[Real] = 1.0,
    edge_order: int = 1,
    channels: int | None = None,
    reduction: str = "sum",
    eps: Real = 1e-8,
) -> Float[Array, " ..."]:
    """Relative H1 error per (sample, channel):
    `sqrt(Σ e² + Σ_j |∂_j e|²) / (sqrt(Σ y² + Σ_j |∂_j y|²) + eps)`, `e = pred − true`.

    Derivatives are central differences with `h_j = domain_length_j / N_j`,
    periodic by default (set `periodic=False` for non-periodic data such as
    Darcy flow; the boundary then uses one-sided differences). Periodic grid
    axes need >= 3 points (on fewer the difference is identically zero), which
    also refuses a channel-last batch with 1 or 2 channels. The terms are not
    weighted, so at high resolution the gradient term dominates.

    Matches neuraloperator's `H1Loss` of version 1.0 (`neuralop` 1.0.x, whose
    non-periodic edges use first-order one-sided differences) with the default
    `edge_order=1`, and of version 2.0 (`neuralop` 2.0.0, `FiniteDiff` with
    third-order one-sided edges) with `edge_order=3`; periodic axes agree in
    both. See [`finite_difference`][sciml.operators.finite_difference].

    **Arguments:** as `relative_lp_loss` (with `d` required), plus `periodic`,
    `domain_length` (one length, or one per grid axis) and `edge_order` (1 or 3,
    for non-periodic edges).

    **Returns:** a scalar, or `(batch, channels)` for `"none"`.
    """
    d = _prepare(pred, true, d, channels, reduction, "h1_loss")
    check_choice("edge_order", edge_order, EDGE_ORDERS)
    grid = pred.shape[pred.ndim - d :]
    lengths = (
        (float(domain_length),) * d
        if isinstance(domain_length, int | float)
        else tuple(float(v) for v in domain_length)
    )
    if len(lengths) != d:
        raise ValueError(f"h1_loss: `domain_length` needs 1 or {d} values, got {domain_length!r}.")
    if not periodic and min(grid) < edge_order + 1:
        raise ValueError(
            f"h1_loss: non-periodic differences with `edge_order={edge_order}` need "
            f">= {edge_order + 1} points per axis, got {grid}."
        )
    if periodic and min(grid) < 3:
        # on 1 or 2 points the two neighbours coincide and the derivative is 0
        hint = (
            " The channel axis looks last: move it with `jnp.moveaxis(x, -1, 1)`."
            if grid[-1] < 3
            else ""
        )
        raise ValueError(
            f"h1_loss: periodic central differences need >= 3 points per grid axis, got "
            f"grid {grid} of `(batch, channels, *grid)` shape {pred.shape}.{hint}"
        )
    axes = tuple(range(pred.ndim - d, pred.ndim))
    err = pred - true

    def sq(x):
        total = jnp.sum(x**2, axis=axes)
        for j, axis in enumerate(axes):
            total = total + jnp.sum(
                finite_difference(x, axis, lengths[j] / grid[j], periodic, edge_order) ** 2,
                axis=axes,
            )
        return total

    return _reduce(jnp.sqrt(sq(err)) / (jnp.sqrt(sq(true)) + eps), reduction)
