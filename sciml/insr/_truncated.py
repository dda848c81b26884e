"""An iterative linear solve whose step cap yields its last iterate (inexact Gauss–Newton)."""

from __future__ import annotations

from typing import Any

import lineax as lx


class Truncated(lx.AbstractLinearSolver):
    """Wraps an iterative `lineax` solver (e.g. `lx.CG(rtol, atol, max_steps)`)
    so that reaching its `max_steps` returns the last iterate as a success.

    Inside `optimistix.LevenbergMarquardt` a failed linear solve ends the whole
    nonlinear solve after that iteration; with `lx.Normal(lx.CG(...))` on an
    ill-conditioned `JᵀJ + μI` the cap is the rule, not the exception. A
    truncated CG step is still a descent direction for the damped model (CG
    from zero lowers the quadratic at every step), which is what an inexact
    (truncated) Gauss–Newton step needs. Use as
    `lx.Normal(Truncated(lx.CG(rtol, atol, max_steps)))`.
    """

    inner: lx.AbstractLinearSolver

    def init(self, operator: Any, options: dict[str, Any]) -> Any:
        return self.inner.init(operator, options)

    def compute(self, state: Any, vector: Any, options: dict[str, Any]) -> Any:
        solution, result, stats = self.inner.compute(state, vector, options)
        capped = result == lx.RESULTS.max_steps_reached
        return solution, lx.RESULTS.where(capped, lx.RESULTS.successful, result), stats

    def transpose(self, state: Any, options: dict[str, Any]) -> Any:
        return self.inner.transpose(state, options)

    def conj(self, state: Any, options: dict[str, Any]) -> Any:
        return self.inner.conj(state, options)

    def assume_full_rank(self) -> bool:
        return self.inner.assume_full_rank()
