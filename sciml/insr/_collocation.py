r"""Which points a per-step solve sees: the collocation settings of both step solvers.

A point set is `n_points` random interior points (the problem's
`sample_interior`), plus an optional fixed set (the problem's quadrature grid,
`n_grid` points of an [`AbstractGridProblem`][sciml.insr.AbstractGridProblem],
or the given `quadrature` points), plus `n_boundary` random boundary points.
[`LeastSquaresSolver`][sciml.insr.LeastSquaresSolver] draws `rounds` such sets
per solve and one held-out interior set to detect overfitting;
[`AdamSolver`][sciml.insr.AdamSolver] draws a fresh set every iteration.

**Sampling.** A solver minimises the objective *on its points*. With `N·k`
residual rows for `P` weights and `N·k` not much larger than `P` the network
can lower the sampled loss below the true minimum by letting the residual grow
*between* the points: overfitting, which more iterations on the same points
make worse. Use at least ten interior points per weight, redraw them
(`rounds`), or both. To detect it the least-squares solver evaluates the
interior part of the objective (the per-step energy) on `n_heldout` points
drawn apart from the training points and compares it with the training-point
value: `overfit_rtol` turns a held-out energy above `(1 + overfit_rtol)` times
the training energy, beyond three standard errors of the difference of the two
sample means when both come from the same field (the training points' spread),
into `RESULTS.insr_overfitted`.
"""

from __future__ import annotations

from typing import Any

import equinox as eqx
import jax
import jax.numpy as jnp
from jaxtyping import Array, Float, PRNGKeyArray

from .._checks import check_int, check_positive_int
from ._problem import AbstractGridProblem, AbstractProblem


# `fold_in` data for the held-out points' key: a stream apart from every split
_HELDOUT_STREAM = 0x5EED


def check_fraction(name: str, value: Any, upper: float | None) -> None:
    """Raises `ValueError` unless `value` is `None` or a number in `(0, upper)`."""
    if value is None:
        return
    ok = isinstance(value, int | float) and value > 0 and (upper is None or value < upper)
    if not ok:
        bound = f"in (0, {upper})" if upper is not None else "> 0"
        raise ValueError(f"`{name}` must be {bound} or None, got {value!r}.")


class Collocation(eqx.Module):
    """The points of a per-step solve (module docstring).

    **Arguments:**

    - `n_points`: random interior points per point set (default 2000); use at
      least ten per weight where the objective has derivatives of the field
      (0 with `n_grid > 0` or `quadrature`: the fixed points alone, as for a mesh).
    - `n_boundary`: boundary points per point set (default 50, the paper's).
    - `n_grid`: points of the problem's fixed quadrature grid
      (an [`AbstractGridProblem`][sciml.insr.AbstractGridProblem]'s
      `grid_interior`) added to the random ones (default 0: none).
    - `quadrature`: optional fixed interior points `(m, d)` added to the random
      ones instead of the problem's grid, e.g. a mesh field's Gauss points
      (`solvers.mesh_fields.quadrature_points`), on which the mean is the
      integral (default `None`; not with `n_grid`).
    - `rounds`: point sets per least-squares solve (default 1); its iterations
      are split evenly between them, each set drawn fresh.
    - `n_heldout`: interior points, apart from the training ones, on which the
      least-squares solver also evaluates the interior part of the objective
      (default `None`: `n_points`, or the grid's or `quadrature`'s size when
      `n_points` is 0).
    - `overfit_rtol`: optional: a held-out interior loss above
      `(1 + overfit_rtol)` times the training-point one (beyond three standard
      errors of sampling) is reported as `RESULTS.insr_overfitted` (e.g. 0.05).
    """

    n_points: int = eqx.field(static=True, default=2000)
    n_boundary: int = eqx.field(static=True, default=50)
    n_grid: int = eqx.field(static=True, default=0)
    quadrature: Any = None
    rounds: int = eqx.field(static=True, default=1)
    n_heldout: int | None = eqx.field(static=True, default=None)
    overfit_rtol: float | None = eqx.field(static=True, default=None)

    def __check_init__(self):
        check_int("n_points", self.n_points, minimum=0)
        check_positive_int("n_boundary", self.n_boundary)
        check_int("n_grid", self.n_grid, minimum=0)
        check_positive_int("rounds", self.rounds)
        check_positive_int("n_heldout", self.n_heldout, allow_none=True)
        if self.quadrature is not None:
            shape = jnp.shape(self.quadrature)
            if len(shape) != 2 or shape[0] == 0:
                raise ValueError(f"`quadrature` must be points of shape (m, d), got {shape}.")
            if self.n_grid:
                raise ValueError("`quadrature` replaces the problem's grid: pass n_grid=0 with it.")
        if self.n_points == 0 and self.n_grid == 0 and self.quadrature is None:
            raise ValueError(
                "`n_points` and `n_grid` are both 0 and no `quadrature`: a solve needs "
                "interior points."
            )
        check_fraction("overfit_rtol", self.overfit_rtol, None)

    def fixed(self, problem: AbstractProblem, dtype: Any) -> Float[Array, "m d"] | None:
        """The fixed interior points (`quadrature` or the problem's grid), or `None`."""
        if self.quadrature is not None:
            return jnp.asarray(self.quadrature, dtype)
        if not self.n_grid:
            return None
        if not isinstance(problem, AbstractGridProblem):
            raise ValueError(
                f"`n_grid` > 0 needs a problem with a quadrature grid (an AbstractGridProblem); "
                f"{type(problem).__name__} is not one. Use n_grid=0."
            )
        return problem.grid_interior(self.n_grid, dtype)

    def draw(
        self, problem: AbstractProblem, key: PRNGKeyArray, dtype: Any
    ) -> tuple[Float[Array, "n d"], Float[Array, "m d"]]:
        """One point set from `key`: `(interior (n_points + fixed, d), boundary (m, d))`."""
        key_in, key_bd = jax.random.split(key)
        x_in = problem.sample_interior(key_in, self.n_points, dtype)
        grid = self.fixed(problem, dtype)
        if grid is not None:
            x_in = jnp.concatenate([x_in, grid])
        return x_in, problem.sample_boundary(key_bd, self.n_boundary, dtype)

    def point_sets(
        self, problem: AbstractProblem, key: PRNGKeyArray, dtype: Any
    ) -> tuple[Array, Array, Array]:
        """The points of one least-squares solve from its `key`: `(held-out
        (n_heldout, d), interior (rounds, n_points + fixed, d), boundary
        (rounds, m, d))`, every set drawn from its own key, so the held-out
        points are apart from the training ones."""
        # one round draws its points from `key` itself, so that a step's
        # training points do not depend on the held-out check
        round_keys = [key] if self.rounds == 1 else jax.random.split(key, self.rounds)
        n_fixed = self.n_grid if self.quadrature is None else jnp.shape(self.quadrature)[0]
        n_heldout = self.n_heldout or self.n_points or n_fixed
        x_heldout = problem.sample_interior(
            jax.random.fold_in(key, _HELDOUT_STREAM), n_heldout, dtype
        )
        interior, boundary = zip(*(self.draw(problem, k, dtype) for k in round_keys))
        return x_heldout, jnp.stack(interior), jnp.stack(boundary)
