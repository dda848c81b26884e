r"""The paper's per-step loop: Adam with plateau learning-rate decay.

Warm start from the previous weights; a **fresh** optax Adam every step (its
moments start at zero); **fresh uniform random points every iteration**; the
learning rate is multiplied by `factor` when the interior loss (not the
boundary term) has not improved by a relative `1e-4` for `patience`
iterations (`optax.contrib.reduce_on_plateau`, stepped on the noisy resampled
loss as PyTorch's `ReduceLROnPlateau` in the reference code), down to
`min_lr`; the step stops when the learning rate is `≤ stop_lr` (four plateaus
from 1e-4) — then it counts as converged — or after `stopping.max_steps`
iterations (reported as `RESULTS.nonlinear_max_steps_reached`).

Written as a `lax.while_loop` rather than `optimistix.OptaxMinimiser`: the
objective of `optimistix.minimise` is a fixed function `fn(y, args)` that
cannot draw new points per iteration, and its Cauchy stopping rule is not the
paper's learning-rate plateau rule.

The acceptance check compares the objective at the warm start and at the end
on one extra, fixed point set drawn as every iteration's.
"""

from __future__ import annotations

from typing import Any

import equinox as eqx
import jax
import jax.numpy as jnp
import optax
from jax import lax
from jaxtyping import PRNGKeyArray

from .._checks import check_positive_int
from ..solution import RESULTS, Solution
from ._collocation import Collocation
from ._step_solver import AbstractStepSolver, check_module, finish, float_dtype_of
from ._stopping import Stopping


class AdamSolver(AbstractStepSolver):
    """The INSR reference per-step optimiser (defaults are the paper's).

    **Arguments:**

    - `learning_rate`: 1e-4.
    - `collocation`: the points drawn every iteration
      ([`Collocation`][sciml.insr.Collocation]; default
      `Collocation(n_points=5000)`, 50 boundary points). Its `n_points`,
      `n_boundary`, `n_grid` and `quadrature` apply; `rounds`, `n_heldout` and
      `overfit_rtol` belong to `LeastSquaresSolver` and are refused.
    - `stopping`: [`Stopping`][sciml.insr.Stopping]`(max_steps=20000)` by
      default: the iteration cap. The loop stops on its learning-rate plateau
      rule, so the loss and gradient tolerances are refused.
    - `patience` (500), `factor` (0.1), `min_lr` (1e-8), `stop_lr` (1.1e-8):
      the plateau rule (module docstring).
    """

    learning_rate: float = eqx.field(static=True, default=1e-4)
    # `Any`: `__check_init__` checks the types, with a message that names the fix
    collocation: Any = eqx.field(default_factory=lambda: Collocation(n_points=5000))
    stopping: Any = eqx.field(default_factory=lambda: Stopping(max_steps=20000))
    patience: int = eqx.field(static=True, default=500)
    factor: float = eqx.field(static=True, default=0.1)
    min_lr: float = eqx.field(static=True, default=1e-8)
    stop_lr: float = eqx.field(static=True, default=1.1e-8)

    def __check_init__(self):
        check_module("collocation", self.collocation, Collocation)
        check_module("stopping", self.stopping, Stopping)
        points = self.collocation
        if points.rounds != 1 or points.n_heldout is not None or points.overfit_rtol is not None:
            raise ValueError(
                "AdamSolver draws fresh points every iteration: `collocation` must keep "
                "rounds=1, n_heldout=None and overfit_rtol=None (LeastSquaresSolver's), got "
                f"{points.rounds}, {points.n_heldout}, {points.overfit_rtol}."
            )
        if self.stopping.has_tolerances:
            raise ValueError(
                "AdamSolver stops on its learning-rate plateau (`stop_lr`) or at "
                "`stopping.max_steps`: `stopping` must not set loss_tol, loss_rtol or grad_rtol "
                "(LeastSquaresSolver's)."
            )
        check_positive_int("patience", self.patience)
        if not self.learning_rate > 0:
            raise ValueError(f"`learning_rate` must be > 0, got {self.learning_rate!r}.")
        if not 0 < self.factor < 1:
            raise ValueError(f"`factor` must be in (0, 1), got {self.factor!r}.")
        if not 0 < self.min_lr <= self.learning_rate:
            raise ValueError(
                f"`min_lr` must be in (0, learning_rate={self.learning_rate}], got {self.min_lr!r}."
            )

    def solve(self, objective, field, *, key: PRNGKeyArray) -> Solution:
        dtype = float_dtype_of(field)
        params, static = eqx.partition(field, eqx.is_inexact_array)
        problem = objective.problem
        max_steps = self.stopping.max_steps
        optimiser = optax.chain(
            optax.adam(self.learning_rate),
            optax.contrib.reduce_on_plateau(
                factor=self.factor,
                patience=self.patience,
                rtol=1e-4,
                min_scale=self.min_lr / self.learning_rate,
            ),
        )

        def sample(k):
            return self.collocation.draw(problem, k, dtype)

        def losses(p, points):
            return objective.losses(eqx.combine(p, static), *points)

        key_check, key_loop = jax.random.split(key)
        check = sample(key_check)
        loss_initial = losses(params, check)[0]

        def lr(opt_state):
            return self.learning_rate * opt_state[1].scale

        def cond(state):
            _, opt_state, it, _ = state
            return (it < max_steps) & (lr(opt_state) > self.stop_lr)

        def body(state):
            p, opt_state, it, k = state
            k, sub = jax.random.split(k)
            (_, main), grads = jax.value_and_grad(lambda q: losses(q, sample(sub)), has_aux=True)(p)
            updates, opt_state = optimiser.update(grads, opt_state, p, value=main)
            return eqx.apply_updates(p, updates), opt_state, it + 1, k

        init = (params, optimiser.init(params), jnp.array(0), key_loop)
        params, opt_state, iterations, _ = lax.while_loop(cond, body, init)
        loss = losses(params, check)[0]
        converged = lr(opt_state) <= self.stop_lr
        result = RESULTS.where(converged, RESULTS.successful, RESULTS.nonlinear_max_steps_reached)
        return finish(eqx.combine(params, static), result, loss_initial, loss, iterations)
