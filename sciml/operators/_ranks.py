"""Rank rules for CP, Tucker and tensor-train weights (tensorly's conventions).

**The `rank` contract.** The type of `rank` says what it means:

- a float ρ in (0, 1] is a fraction of the dense parameter count (`rank=1.0`
  is 100%, `rank=0.1` is 10%); a float > 1 (an over-complete weight), ≤ 0 or
  not finite raises a `ValueError`;
- an int r >= 2 is the rank itself;
- a sequence of ints (a tuple or list, never a string) gives the ranks mode
  by mode (for CP: one int, `(R,)`).

A bare int `rank=1` is refused: it is the one value whose int and float
spellings mean opposite extremes (rank one against 100%), so a slip between
them is easy to make and gives a working model of the wrong size. Write
`rank=1.0` for the full size, or rank one explicitly as a sequence: `(1, 1,
1)` per mode for Tucker, `(1, 1)` inner ranks for TT, `(1,)` for CP.
neuraloperator calls (a float fraction, an int rank >= 2) are unchanged.

Anything else (a string, a bool, a float inside a sequence) raises a
`ValueError` naming `rank`. The float rules reproduce
`tensorly.decomposition` `validate_cp_rank`, `validate_tucker_rank` and
`validate_tt_rank` (rounding "round", i.e. round-half-to-even like numpy), so
parameter counts match `tensorly-torch` / `neuraloperator` models.
"""

import math
from collections.abc import Sequence

import numpy as np
from scipy.optimize import brentq

from .._checks import is_int


FACTORIZATIONS = ("dense", "cp", "tucker", "tt")


def _check_shape(shape: Sequence[int]) -> tuple[int, ...]:
    shape = tuple(int(s) for s in shape)
    if len(shape) < 2 or any(s < 1 for s in shape):
        raise ValueError(f"tensor shape must have at least 2 positive dims, got {shape}.")
    return shape


def _check_float_rank(rank: float) -> float:
    if not (0 < rank <= 1 and math.isfinite(rank)):
        raise ValueError(
            f"`rank` as a float is a fraction of the dense parameter count and must be > 0 "
            f"and <= 1, i.e. in (0, 1], got {rank!r}; for explicit ranks pass an int (e.g. `rank=2`) or one int "
            "per mode."
        )
    return float(rank)


def _refuse_bare_one(rank, who: str, rank_one: str) -> None:
    """Refuses `rank=1` (an int): see the module docstring."""
    if is_int(rank) and rank == 1:
        raise ValueError(
            f"{who} `rank=1` (an int) is ambiguous: an int is the rank itself (rank one), while "
            "`rank=1.0` (a float) is 100% of the dense parameter count. Pass `rank=1.0` for "
            f"the full size, or `rank={rank_one}` for rank one."
        )


def _check_rank_type(rank, who: str, accepted: str) -> None:
    """Refuses what the contract does not define: strings, bools, floats in lists."""
    if isinstance(rank, float | np.floating) or is_int(rank):
        return
    if isinstance(rank, Sequence | np.ndarray) and not isinstance(rank, str | bytes):
        if all(is_int(r) for r in rank):
            return
    raise ValueError(f"{who} `rank` must be {accepted}, got {rank!r}.")


def cp_rank(shape: Sequence[int], rank: float | int | Sequence[int]) -> int:
    """CP rank `R`. A float `rank` ρ gives `R = round(ρ·∏shape / Σshape)`; an
    int R >= 2 or a one-int sequence `(R,)` is the rank (`rank=1` is refused:
    see the module docstring).

    **Raises:** `ValueError` when the rank is not positive (e.g. ρ so small that
    `R` rounds to 0).
    """
    shape = _check_shape(shape)
    _refuse_bare_one(rank, "CP", "(1,)")
    if (
        isinstance(rank, Sequence | np.ndarray)
        and not isinstance(rank, str | bytes)
        and len(rank) == 1
        and is_int(rank[0])
    ):
        rank = int(rank[0])  # `(R,)`: the rank, spelled explicitly
    elif not (isinstance(rank, float | np.floating) or is_int(rank)):
        raise ValueError(
            f"CP `rank` must be a float fraction in (0, 1], an int >= 2 or one int `(R,)`, "
            f"got {rank!r}."
        )
    if isinstance(rank, float | np.floating):
        fraction = _check_float_rank(rank)
        rank = int(np.round(np.prod(shape) * fraction / np.sum(shape)))
        if rank < 1:
            raise ValueError(
                f"`rank`={fraction} gives a CP rank of 0 for a weight of shape {shape} "
                f"(zero parameters); use a fraction >= {0.5 * np.sum(shape) / np.prod(shape):.3g} "
                "or an int rank >= 1."
            )
    rank = int(rank)
    if rank < 1:
        raise ValueError(f"CP `rank` must be >= 1, got {rank}.")
    return rank


def tucker_rank(shape: Sequence[int], rank: float | int | Sequence[int]) -> tuple[int, ...]:
    """Tucker ranks, one per mode.

    A float ρ solves `c^N ∏shape + c Σ shape_k² = ρ ∏shape` for `c` (Brent's
    method, as tensorly) and takes `r_k = max(round(c·shape_k), 1)`; an int is
    used for every mode; a sequence gives the ranks mode by mode (see the
    module docstring for the contract).
    """
    shape = _check_shape(shape)
    _refuse_bare_one(rank, "Tucker", str((1,) * len(shape)))
    _check_rank_type(
        rank,
        "Tucker",
        f"a float fraction in (0, 1], an int >= 2 or {len(shape)} ints (one per mode)",
    )
    if isinstance(rank, float | np.floating):
        fraction = _check_float_rank(rank)
        n_param = float(np.prod(shape))
        squared = float(np.sum([s**2 for s in shape]))
        order = len(shape)

        def excess(c):
            return n_param * c**order + squared * c - fraction * n_param

        c = brentq(excess, 0.0, max(fraction, 1.0))
        return tuple(max(int(np.round(s * c)), 1) for s in shape)
    if isinstance(rank, int | np.integer) and not isinstance(rank, bool):
        ranks = (int(rank),) * len(shape)
    elif len(rank) == len(shape):
        ranks = tuple(int(r) for r in rank)
    else:
        raise ValueError(
            f"Tucker `rank` must be a float fraction, an int or {len(shape)} ints "
            f"(one per mode of {shape}), got {rank!r}."
        )
    if any(r < 1 for r in ranks):
        raise ValueError(f"Tucker ranks must be >= 1, got {ranks}.")
    return ranks


def tt_rank(shape: Sequence[int], rank: float | int | Sequence[int]) -> tuple[int, ...]:
    """Tensor-train ranks `(1, r_1, ..., r_{N-1}, 1)`.

    A float ρ takes ranks proportional to the mean of adjacent dims,
    `r_k = max(round(c·(n_k + n_{k+1})/2), 1)`, with `c` the positive root of the
    quadratic that makes the cores hold ρ·∏shape parameters (tensorly's rule).
    An int is used for every inner rank; a sequence gives either the N+1 ranks
    (boundary ranks 1) or the N−1 inner ones.
    """
    shape = _check_shape(shape)
    order = len(shape)
    _refuse_bare_one(rank, "TT", str((1,) * (order - 1)))
    _check_rank_type(
        rank,
        "TT",
        f"a float fraction in (0, 1], an int >= 2, {order + 1} ints (boundary 1s) or {order - 1} "
        "inner ranks",
    )
    if isinstance(rank, float | np.floating):
        fraction = _check_float_rank(rank)
        avg = [(shape[i] + shape[i + 1]) / 2 for i in range(order - 1)]
        if len(avg) > 1:
            a = sum(avg[i - 1] * shape[i] * avg[i] for i in range(1, order - 1))
        else:
            a = avg[0] ** 2 * shape[0]
        b = shape[0] * avg[0] + shape[-1] * avg[-1]
        c = -np.prod(shape) * fraction
        root = (-b + np.sqrt(b**2 - 4 * a * c)) / (2 * a)
        return (1, *(max(int(np.round(d * root)), 1) for d in avg), 1)
    if isinstance(rank, int | np.integer) and not isinstance(rank, bool):
        ranks = (1,) + (int(rank),) * (order - 1) + (1,)
    elif len(rank) == order + 1:
        ranks = tuple(int(r) for r in rank)
        if ranks[0] != 1 or ranks[-1] != 1:
            raise ValueError(f"TT boundary ranks must be 1, got {ranks}.")
    elif len(rank) == order - 1:
        ranks = (1, *(int(r) for r in rank), 1)
    else:
        raise ValueError(
            f"TT `rank` must be a float fraction, an int, {order + 1} ranks (boundary 1s) "
            f"or {order - 1} inner ranks for shape {shape}, got {rank!r}."
        )
    if any(r < 1 for r in ranks):
        raise ValueError(f"TT ranks must be >= 1, got {ranks}.")
    return ranks


def factorized_size(factorization: str, shape: Sequence[int], rank) -> int:
    """Number of complex entries of a weight of `shape` stored with `factorization`."""
    shape = _check_shape(shape)
    if factorization == "dense":
        return int(np.prod(shape))
    if factorization == "cp":
        r = cp_rank(shape, rank)
        return r * (sum(shape) + 1)
    if factorization == "tucker":
        ranks = tucker_rank(shape, rank)
        return int(np.prod(ranks)) + sum(s * r for s, r in zip(shape, ranks))
    if factorization == "tt":
        ranks = tt_rank(shape, rank)
        return sum(ranks[k] * shape[k] * ranks[k + 1] for k in range(len(shape)))
    raise ValueError(f"`factorization` must be one of {FACTORIZATIONS}, got {factorization!r}.")
