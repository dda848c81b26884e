r"""When a per-step solve stops: the stopping settings of both step solvers.

[`Stopping`][sciml.insr.Stopping] holds the iteration cap and the tolerances.
[`LeastSquaresSolver`][sciml.insr.LeastSquaresSolver] applies them inside the
optimistix loop through `ToleranceStop`, a Gauss–Newton-type solver that also
stops on them: a solve stops, converged, at the first accepted iterate where
`L ≤ loss_tol`, `L ≤ loss_rtol · L₀` or `‖JᵀR‖ ≤ grad_rtol · ‖JᵀR₀‖`
(`L = ‖R‖²`, `R₀` at the solve's warm start on the same points), or where the
optimiser's own test (a Cauchy test on the weights, which rarely triggers for
networks with flat directions) holds; a solve that meets none runs to its cap
and reports `RESULTS.nonlinear_max_steps_reached`.
[`AdamSolver`][sciml.insr.AdamSolver] stops on its learning-rate plateau rule
or at the cap.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import equinox as eqx
import jax.numpy as jnp
import jax.tree_util as jtu
import optimistix as optx
from jaxtyping import Array, Bool, Int, Scalar

from .._checks import check_positive_int
from ._collocation import check_fraction


def _sum_squares(tree: Any) -> Scalar:
    return sum(jnp.sum(jnp.abs(leaf) ** 2) for leaf in jtu.tree_leaves(tree))


class Stopping(eqx.Module):
    """When a per-step solve stops (module docstring).

    **Arguments:**

    - `max_steps`: iterations in all (default 100); hitting the cap is
      reported as `RESULTS.nonlinear_max_steps_reached`. With
      `Collocation(rounds=r)` each round runs at most `max_steps // r`.
    - `loss_tol`, `loss_rtol`: optional absolute / relative (to `L₀`, the
      objective at the warm start on the same points) tolerances on the
      objective `L`; meeting one stops the solve (or round), converged.
    - `grad_rtol`: optional: `‖JᵀR‖ ≤ grad_rtol · ‖JᵀR₀‖` stops the solve
      (or round), converged.
    """

    max_steps: int = eqx.field(static=True, default=100)
    loss_tol: float | None = eqx.field(static=True, default=None)
    loss_rtol: float | None = eqx.field(static=True, default=None)
    grad_rtol: float | None = eqx.field(static=True, default=None)

    def __check_init__(self):
        check_positive_int("max_steps", self.max_steps)
        check_fraction("loss_tol", self.loss_tol, None)
        check_fraction("loss_rtol", self.loss_rtol, 1.0)
        check_fraction("grad_rtol", self.grad_rtol, 1.0)

    @property
    def has_tolerances(self) -> bool:
        """Whether any of `loss_tol`, `loss_rtol`, `grad_rtol` is set."""
        return any(tol is not None for tol in (self.loss_tol, self.loss_rtol, self.grad_rtol))

    def wrap(self, optimiser: optx.AbstractGaussNewton) -> ToleranceStop:
        """`optimiser` stopping also on the tolerances (`ToleranceStop`)."""
        return ToleranceStop(optimiser, self.loss_tol, self.loss_rtol, self.grad_rtol)


class ToleranceStopState(eqx.Module):
    """The wrapped solver's state and the tolerance test's quantities, all at
    the last accepted iterate except the `*_initial` ones (at the warm start)."""

    inner: Any
    steps: Int[Array, ""]
    loss_initial: Scalar
    grad_initial: Scalar
    loss: Scalar
    grad: Scalar


class ToleranceStop(optx.AbstractLeastSquaresSolver):
    r"""Wraps an `optx.AbstractGaussNewton` (`GaussNewton`, `LevenbergMarquardt`,
    `Dogleg`) so that the solve also ends, as a success, at the first accepted
    iterate where

    - `L ≤ loss_tol`, or
    - `L ≤ loss_rtol · L₀`, or
    - `‖JᵀR‖ ≤ grad_rtol · ‖JᵀR₀‖`,

    with `L = ‖R‖²` the objective and `R₀` the residual at the warm start (the
    same points: `fn` and `args` do not change within a solve). The wrapped
    solver's own test (a Cauchy test on the iterates) still applies.

    `R` and `J` come from the wrapped solver's state, which holds them at the
    accepted iterate: the test costs one product `JᵀR` per iteration (a VJP
    through the linearisation), no extra evaluation of `fn`. The first step
    evaluates the warm start, so `L₀` and `‖JᵀR₀‖` are known after it, and a
    warm start already below `loss_tol` ends the solve after that step with
    the warm start as the answer. `None` turns a rule off.
    """

    solver: optx.AbstractGaussNewton
    loss_tol: float | None = eqx.field(static=True, default=None)
    loss_rtol: float | None = eqx.field(static=True, default=None)
    grad_rtol: float | None = eqx.field(static=True, default=None)

    def __check_init__(self):
        if not isinstance(self.solver, optx.AbstractGaussNewton):
            raise ValueError(
                "`solver` must be a Gauss–Newton-type optimistix solver (GaussNewton, "
                f"LevenbergMarquardt, Dogleg), got {type(self.solver).__name__}."
            )

    @property
    def rtol(self) -> float:
        return self.solver.rtol

    @property
    def atol(self) -> float:
        return self.solver.atol

    @property
    def norm(self) -> Callable[[Any], Scalar]:
        return self.solver.norm

    def init(self, fn, y, args, options, f_struct, aux_struct, tags) -> ToleranceStopState:
        inner = self.solver.init(fn, y, args, options, f_struct, aux_struct, tags)
        dtype = jnp.result_type(*[s.dtype for s in jtu.tree_leaves(f_struct)])
        zero = jnp.zeros((), jnp.finfo(dtype).dtype)
        return ToleranceStopState(inner, jnp.array(0), zero, zero, zero, zero)

    def step(self, fn, y, args, options, state, tags):
        y, inner, aux = self.solver.step(fn, y, args, options, state.inner, tags)
        # the residual and Jacobian at the accepted iterate `y`; after the first
        # step (always accepted) that is the warm start
        f_info = inner.f_info
        loss = _sum_squares(f_info.residual)
        grad = jnp.sqrt(_sum_squares(f_info.compute_grad()))
        first = state.steps == 0
        state = ToleranceStopState(
            inner=inner,
            steps=state.steps + 1,
            loss_initial=jnp.where(first, loss, state.loss_initial),
            grad_initial=jnp.where(first, grad, state.grad_initial),
            loss=loss,
            grad=grad,
        )
        return y, state, aux

    def tolerance_met(self, state: ToleranceStopState) -> Bool[Array, ""]:
        """Whether a tolerance holds at the accepted iterate (never before the first step)."""
        met = jnp.array(False)
        if self.loss_tol is not None:
            met = met | (state.loss <= self.loss_tol)
        if self.loss_rtol is not None:
            met = met | (state.loss <= self.loss_rtol * state.loss_initial)
        if self.grad_rtol is not None:
            met = met | (state.grad <= self.grad_rtol * state.grad_initial)
        return met & (state.steps > 0)

    def terminate(self, fn, y, args, options, state, tags):
        terminate, result = self.solver.terminate(fn, y, args, options, state.inner, tags)
        met = self.tolerance_met(state)
        return terminate | met, optx.RESULTS.where(met, optx.RESULTS.successful, result)

    def postprocess(self, fn, y, aux, args, options, state, tags, result):
        return self.solver.postprocess(fn, y, aux, args, options, state.inner, tags, result)
