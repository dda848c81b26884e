"""Choices and comparisons an experiment's reading is decided by: a setting
chosen on a grid (and whether the grid held the choice), and paired
comparisons over seeds.

Two models trained with the same seeds (initialisation and batch order) give
paired results; their differences `d_s = baseline_s − candidate_s` remove what
the seeds share, and the Student t-interval of the mean difference says
whether the direction is more than seed noise.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from jaxtyping import ArrayLike


def paired_difference(
    baseline: Sequence[float] | ArrayLike,
    candidate: Sequence[float] | ArrayLike,
    confidence: float = 0.95,
) -> dict[str, float]:
    """Mean of the paired differences `d_s = baseline_s − candidate_s` over
    seeds and its t-interval `mean ± t_{(1+confidence)/2, n−1} · sd(d) / √n`
    (`sd` with `n − 1`).

    **Arguments:** `baseline`, `candidate`: one value per seed, in the same
    seed order; `confidence` in (0, 1).

    **Returns:** `{"mean", "low", "high"}`.

    **Raises:** `ValueError` for fewer than two seeds, unequal lengths or a
    confidence outside (0, 1).
    """
    from scipy import stats

    if not 0 < confidence < 1:
        raise ValueError(f"`confidence` must lie in (0, 1), got {confidence!r}.")
    b, c = np.asarray(baseline, np.float64), np.asarray(candidate, np.float64)
    if b.shape != c.shape:
        raise ValueError(
            f"`baseline` and `candidate` need one value per seed each, got {b.size} and {c.size}."
        )
    d = b - c
    if d.ndim != 1 or d.size < 2:
        raise ValueError(f"a paired interval needs two or more seeds, got {d.size}.")
    half = stats.t.ppf((1 + confidence) / 2, d.size - 1) * d.std(ddof=1) / np.sqrt(d.size)
    return {"mean": float(d.mean()), "low": float(d.mean() - half), "high": float(d.mean() + half)}


def choose_on_grid(errors: dict[float, float]) -> tuple[float, bool]:
    """The grid value of lowest error in `{value: error}` (e.g. learning rates
    scored on a validation split), and whether it is the smallest or largest
    value tried: a choice at the edge may lie outside the grid, which should
    then be widened.

    **Raises:** `ValueError` for fewer than three values (no inside to choose).
    """
    if len(errors) < 3:
        raise ValueError(f"a grid needs three or more values to choose inside, got {len(errors)}.")
    best = min(errors, key=errors.get)
    return best, best in (min(errors), max(errors))
