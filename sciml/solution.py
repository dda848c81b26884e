"""One result type for every iterative routine in sciml.

Newton's method over a sequence (`sciml.pararnn`), the deep conjugate-direction
iteration (`sciml.dcdm`) and the per-step solves of neural-field time stepping
(`sciml.insr`) return a [`Solution`][sciml.solution.Solution]: the value, a
[`RESULTS`][sciml.solution.RESULTS] item saying how the routine ended, and a
dict of statistics.

`RESULTS` extends optimistix's enumeration (which extends lineax's), so a
result from `lineax.linear_solve` or `optimistix.least_squares` converts with
`RESULTS.promote(result)` and keeps its message. With `throw=True` a routine
raises through `result.error_if` (a runtime error inside `jit`, carrying the
item's message); with `throw=False` the caller reads `solution.result`.

Online training (`sciml.online`) returns no `Solution`: its statuses cross a
process boundary into solver processes that do not import JAX, so they are
standard-library enumerations shared by trainer and worker
(`sciml.online.RunState`, `CloseStatus`, `JobEnd`), and `train_online`
returns an `OnlineResult`.
"""

from __future__ import annotations

import warnings
from typing import Any

import equinox as eqx
import jax
import numpy as np
import optimistix as optx
from jaxtyping import PyTree


# lineax's `successful` has an empty message, so `print(RESULTS.successful)`
# showed `RESULTS<>`; ours names it. Equinox warns when a subclass gives an
# inherited item a new message, which is the intent here.
with warnings.catch_warnings():
    warnings.filterwarnings("ignore", "Enumeration has duplicate incompatible values")

    class RESULTS(optx.RESULTS):  # pyright: ignore[reportGeneralTypeIssues]
        """How an iterative routine ended. `RESULTS.successful` is the only success.

        Inherited from lineax / optimistix: `max_steps_reached`, `singular`,
        `breakdown`, `stagnation`, `conlim`, `nonfinite_input`,
        `nonlinear_max_steps_reached`, `nonlinear_divergence`, `nonfinite`.
        Conjugate-direction solves (`sciml.dcdm.solve`) add
        `not_positive_definite` and `nonfinite_direction`. An item prints as its message (`RESULTS<successful>` on success);
        [`result_name`][sciml.solution.result_name] gives its name.
        """

        successful = "successful"
        recurrence_max_steps_reached = (
            "solve_recurrence: the residual did not reach the tolerance within the step cap "
            "(Newton and its fallback). The recurrence may be non-contractive; use "
            "Fallback(Newton(), Sequential()), raise max_steps, or pass throw=False and read "
            "solution.stats."
        )
        recurrence_nonfinite = (
            "solve_recurrence: non-finite values (NaN or Inf) in the returned states, or in "
            "Newton iterates that no fallback recovered from. With a Sequential() fallback this "
            "means the recurrence itself is not finite on this input."
        )
        not_positive_definite = (
            "a conjugate-direction solve (sciml.dcdm.solve) met a search direction p with "
            "pᵀAp <= 0: the operator is not positive definite (a sign error in apply_A, a "
            "non-symmetric stencil, or boundary rows that break symmetry; check apply_A on "
            "random vectors: xᵀAx must be > 0), or, if A is singular (a pure-Neumann or "
            "periodic Poisson problem, a closed fluid region), b has a part outside its range: "
            "pass null_space= (e.g. solvers.poisson.null_space(labels)) to project it; or the "
            "system sits at round-off."
        )
        nonfinite_direction = (
            "sciml.dcdm.solve: the direction generator (argument `direction_fn`) returned NaN "
            "or Inf for a finite residual: a network with non-finite weights or a "
            "preconditioner that divides by zero. Evaluate direction_fn on the residual to see."
        )
        insr_objective_increased = (
            "sciml.insr: a time step (or the initial fit) ended with a larger objective than at "
            "its warm start, the previous weights; the per-step solver diverged. Lower "
            "AdamSolver's learning_rate, or use LeastSquaresSolver; read solution.stats "
            "'loss_initial' and 'loss' per step."
        )
        insr_overfitted = (
            "sciml.insr: a time step (or the initial fit) lowered its objective on the training "
            "points but not between them: the energy on held-out points exceeds the "
            "training-point energy by more than LeastSquaresSolver's overfit_rtol. Use more "
            "interior points per weight (n_points, n_grid) or redraw them (rounds); read "
            "solution.stats 'energy' and 'energy_heldout' per step."
        )


def result_name(result: RESULTS) -> str:
    """The name of a concrete `RESULTS` item: `"successful"`,
    `"recurrence_max_steps_reached"`, ... (`RESULTS[result]` is its message).

    **Raises:** `ValueError` for a traced or batched item (under `jit` or
    `vmap`), which has no single name.
    """
    if not isinstance(result, RESULTS):
        raise ValueError(f"`result` must be an item of sciml.solution.RESULTS, got {result!r}.")
    index = result._value
    if isinstance(index, jax.core.Tracer) or np.ndim(index) != 0:
        raise ValueError("`result` must be one concrete item, not a traced or batched one.")
    # equinox enumerations map names to items; invert it.
    for name, item in RESULTS._name_to_item.items():
        if int(item._value) == int(index):
            return name
    raise ValueError(f"`result` has no name: index {int(index)} is not in RESULTS.")


def _format_stat(value: Any) -> str:
    if isinstance(value, jax.core.Tracer):
        return "<traced>"
    array = np.asarray(value)
    if array.ndim == 0:
        item = array.item()
        if isinstance(item, bool):
            return str(item)
        if isinstance(item, float):
            return f"{item:.3g}"
        return str(item)
    return f"{array.dtype}{list(array.shape)}"


class Solution(eqx.Module):
    """What an iterative routine returns.

    **Attributes:**

    - `value`: the solution (any pytree of arrays).
    - `result`: a [`RESULTS`][sciml.solution.RESULTS] item;
      `solution.result == RESULTS.successful` when the routine met its
      tolerance, otherwise `RESULTS[solution.result]` is the message that says
      what to change.
    - `stats`: routine-specific statistics (iteration counts, residuals, ...),
      a dict of arrays, each documented by the routine that returns it.

    Prints readably: `Solution(value=float64[128, 8], result=successful,
    iterations=3, residual=6.1e-13)`.
    """

    value: PyTree[Any]
    result: RESULTS
    stats: dict[str, Any]

    @property
    def successful(self) -> jax.Array:
        """A boolean array: did the routine end with `RESULTS.successful`?"""
        return self.result == RESULTS.successful

    def __repr__(self) -> str:
        leaves = jax.tree_util.tree_leaves(self.value)
        if len(leaves) == 1 and hasattr(leaves[0], "shape"):
            value = f"{leaves[0].dtype}{list(leaves[0].shape)}"
        else:
            value = f"<pytree of {len(leaves)} arrays>"
        index = self.result._value
        if isinstance(index, jax.core.Tracer):
            result = "<traced>"
        elif np.ndim(index) == 0:
            result = result_name(self.result)
        else:
            result = f"<batch of {np.size(index)} results>"
        stats = ", ".join(f"{key}={_format_stat(val)}" for key, val in self.stats.items())
        return f"Solution(value={value}, result={result}" + (f", {stats})" if stats else ")")

    __str__ = __repr__


def make_solution(
    value: PyTree[Any], result: Any, stats: dict[str, Any], *, throw: bool
) -> Solution:
    """Builds a [`Solution`][sciml.solution.Solution]; with `throw=True` the
    value carries a runtime check that raises `result`'s message unless it is
    `RESULTS.successful`. `result` may be an item of `RESULTS`, `lineax.RESULTS` or
    `optimistix.RESULTS` (promoted)."""
    result = RESULTS.promote(result) if not isinstance(result, RESULTS) else result
    if throw:
        value = result.error_if(value, result != RESULTS.successful)
    return Solution(value=value, result=result, stats=stats)
