"""Parameter spaces and the samplers that draw a study's runs from them.

A study's run `i` solves for the `i`-th row of a deterministic sequence of
parameter sets. The sequence is a pure function of the sampler's seed: row `i`
is the same whether drawn in one go or after a restart, so the sampler's whole
state is the number of rows drawn, which the run table already holds. Rows
`0 … n_runs − 1` are the planned runs; a run that fails for good is redrawn
from the rows after them.

The unit-cube points come from `scipy.stats.qmc` (Latin hypercube, Halton,
Sobol; scrambled and seeded) or a seeded uniform generator (Monte Carlo, which
the online-learning paper recommends for an unbiased stream); each coordinate
is then mapped to its parameter's range, linearly or on a log scale. A Latin
hypercube is stratified per block: rows are drawn `block` at a time (the
planned number of runs by default), each block a Latin hypercube of its own.
"""

from __future__ import annotations

import abc
import math
from collections.abc import Mapping

import equinox as eqx
import numpy as np
from scipy.stats import qmc

from .._checks import check_choice, check_positive_int


_SCALES = ("linear", "log")


class ParameterSpace(eqx.Module):
    """Named parameters, each a range `[low, high]` on a linear or log scale.

    **Arguments:**

    - `ranges`: `{name: (low, high)}` or `{name: (low, high, scale)}` with
      `low < high` finite and `scale` `"linear"` (default) or `"log"` (then
      `low > 0`; the parameter is uniform in its logarithm).
    """

    names: tuple[str, ...] = eqx.field(static=True)
    lows: tuple[float, ...] = eqx.field(static=True)
    highs: tuple[float, ...] = eqx.field(static=True)
    scales: tuple[str, ...] = eqx.field(static=True)

    def __init__(self, ranges: Mapping[str, tuple]):
        if not isinstance(ranges, Mapping) or not ranges:
            raise ValueError(
                f"`ranges` must be a non-empty dict {{name: (low, high[, scale])}}, got {ranges!r}."
            )
        names, lows, highs, scales = [], [], [], []
        for name, spec in ranges.items():
            spec = tuple(spec)
            if len(spec) not in (2, 3):
                raise ValueError(
                    f"parameter {name!r}: expected (low, high) or (low, high, scale), got {spec!r}."
                )
            low, high = float(spec[0]), float(spec[1])
            scale = spec[2] if len(spec) == 3 else "linear"
            check_choice(f"scale of parameter {name!r}", scale, _SCALES)
            if not (math.isfinite(low) and math.isfinite(high) and low < high):
                raise ValueError(
                    f"parameter {name!r}: need finite low < high, got ({low}, {high})."
                )
            if scale == "log" and low <= 0:
                raise ValueError(f"parameter {name!r}: a log scale needs low > 0, got low = {low}.")
            names.append(str(name))
            lows.append(low)
            highs.append(high)
            scales.append(scale)
        self.names, self.lows, self.highs = tuple(names), tuple(lows), tuple(highs)
        self.scales = tuple(scales)

    @property
    def dim(self) -> int:
        return len(self.names)

    def from_unit(self, u: np.ndarray) -> np.ndarray:
        """Maps points of the unit cube `(n, dim)` to parameter values `(n, dim)`."""
        u = np.asarray(u, np.float64)
        low, high = np.array(self.lows), np.array(self.highs)
        log = np.array([s == "log" for s in self.scales])
        linear = low + u * (high - low)
        safe_low = np.where(log, low, 1.0)  # log scales have low > 0
        safe_high = np.where(log, high, 1.0)
        logged = safe_low * np.exp(u * np.log(safe_high / safe_low))
        return np.where(log, logged, linear)

    def as_dict(self, row: np.ndarray) -> dict[str, float]:
        """One row of parameter values as `{name: value}`."""
        return {name: float(v) for name, v in zip(self.names, row)}


class AbstractSampler(eqx.Module):
    """Draws points of the unit cube; row `i` depends only on the seed and `i`."""

    seed: eqx.AbstractVar[int]

    @abc.abstractmethod
    def unit(self, n: int, dim: int) -> np.ndarray:
        """The first `n` rows `(n, dim)` of this sampler's sequence in `[0, 1)^dim`."""

    def draw(self, space: ParameterSpace, n: int) -> np.ndarray:
        """The first `n` parameter sets of `space`, `(n, space.dim)` float64."""
        n = check_positive_int("n", n) if n else 0
        if n == 0:
            return np.zeros((0, space.dim))
        return space.from_unit(self.unit(n, space.dim))


class MonteCarlo(AbstractSampler):
    """Independent uniform points (the default: an unbiased stream of runs)."""

    seed: int = eqx.field(static=True, default=0)

    def unit(self, n: int, dim: int) -> np.ndarray:
        return np.random.default_rng(self.seed).random((n, dim))


class _QMC(AbstractSampler):
    seed: eqx.AbstractVar[int]

    @abc.abstractmethod
    def engine(self, dim: int) -> qmc.QMCEngine: ...

    def unit(self, n: int, dim: int) -> np.ndarray:
        return self.engine(dim).random(n)


class Halton(_QMC):
    """A scrambled Halton sequence (`scipy.stats.qmc.Halton`)."""

    seed: int = eqx.field(static=True, default=0)

    def engine(self, dim: int) -> qmc.QMCEngine:
        return qmc.Halton(d=dim, scramble=True, seed=self.seed)


class Sobol(_QMC):
    """A scrambled Sobol sequence (`scipy.stats.qmc.Sobol`); balanced at powers of 2."""

    seed: int = eqx.field(static=True, default=0)

    def engine(self, dim: int) -> qmc.QMCEngine:
        return qmc.Sobol(d=dim, scramble=True, seed=self.seed)

    def unit(self, n: int, dim: int) -> np.ndarray:
        # Drawing a whole power of two and keeping the first n avoids scipy's
        # balance warning without changing the rows.
        return self.engine(dim).random(1 << max(n - 1, 0).bit_length())[:n]


class LatinHypercube(AbstractSampler):
    """Latin hypercubes of `block` rows each (`scipy.stats.qmc.LatinHypercube`).

    Each block of `block` consecutive rows is stratified: every coordinate has
    exactly one point in each of its `block` equal intervals. The study sets
    `block` to its planned number of runs, so the planned runs form one Latin
    hypercube and redrawn runs come from the next blocks.
    """

    block: int = eqx.field(static=True)
    seed: int = eqx.field(static=True, default=0)

    def __init__(self, block: int, seed: int = 0):
        self.block = check_positive_int("block", block)
        self.seed = int(seed)

    def unit(self, n: int, dim: int) -> np.ndarray:
        engine = qmc.LatinHypercube(d=dim, seed=self.seed)
        blocks = -(-n // self.block)
        return np.concatenate([engine.random(self.block) for _ in range(blocks)])[:n]
