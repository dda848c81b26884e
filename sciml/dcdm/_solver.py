"""`DCDM(...)`: the settings of the deep conjugate direction iteration, as a module.

One object holds how the iteration runs (tolerances, step cap, how many
previous directions each new one is made A-orthogonal to, how often the
residual is recomputed), checked once when it is built, and nothing else: the
problem travels beside it. Pass it to [`solve`][sciml.dcdm.solve]
(`solve(apply_A, b, f, DCDM(rtol=1e-8))`) or to lineax with the direction
generator in `options`
(`lx.linear_solve(operator, b, DCDM(rtol=1e-8), options={"direction_fn": f})`,
as lineax's `CG` reads `options["preconditioner"]`): the same iteration
either way.
"""

from __future__ import annotations

import math
import numbers
from typing import Any

import equinox as eqx
import jax
import lineax as lx
import numpy as np
from jax.flatten_util import ravel_pytree

from .._checks import check_positive_int
from .._deprecated import refuse_direction_fn
from ..solution import RESULTS
from ._iteration import check_inputs, iterate
from ._precision import check_tolerance


def _as_float(value: Any) -> Any:
    """A real number (or a concrete 0-d array) as a `float`, so that it hashes
    as a static field; anything else unchanged, for `__check_init__` to refuse."""
    if isinstance(value, bool):
        return value
    if isinstance(value, numbers.Real):
        return float(value)
    if isinstance(value, (np.ndarray, jax.Array)) and value.shape == ():
        if not isinstance(value, jax.core.Tracer) and (
            np.issubdtype(value.dtype, np.floating) or np.issubdtype(value.dtype, np.integer)
        ):
            return float(value)
    return value


def _check_tolerances(rtol: Any, atol: Any) -> None:
    for name, value in (("rtol", rtol), ("atol", atol)):
        if isinstance(value, bool) or not isinstance(value, numbers.Real):
            raise TypeError(f"`{name}` must be a real number >= 0, got {value!r}.")
    if not (rtol >= 0 and atol >= 0):
        raise ValueError(
            f"`rtol` and `atol` must be >= 0 (both 0: run max_steps), got rtol={rtol}, atol={atol}."
        )
    if not (math.isfinite(rtol) and math.isfinite(atol)):
        raise ValueError(
            f"`rtol` and `atol` must be finite, got rtol={rtol}, atol={atol} (an infinite "
            "tolerance would report success whatever the residual)."
        )


def _to_lineax(result: RESULTS) -> lx.RESULTS:
    """Our result as lineax's: an operator found not positive definite is
    `singular` (whose message names an operator that does not have the
    positive definiteness it is declared to have); lineax has no `nonfinite`
    or `nonfinite_direction`: reported as `breakdown`."""
    pairs = (
        (RESULTS.successful, lx.RESULTS.successful),
        (RESULTS.max_steps_reached, lx.RESULTS.max_steps_reached),
        (RESULTS.nonfinite_input, lx.RESULTS.nonfinite_input),
        (RESULTS.not_positive_definite, lx.RESULTS.singular),
    )
    out = lx.RESULTS.breakdown
    for ours, theirs in pairs:
        out = lx.RESULTS.where(result == ours, theirs, out)
    return out


def _flattened(mv, vector, direction_fn, y0):
    """A pytree system as one of flat vectors (`jax.flatten_util.ravel_pytree`):
    `(mv, b, direction_fn, y0, unravel)` on the flat vector."""
    b, unravel = ravel_pytree(vector)

    def flat(function):
        return lambda x: ravel_pytree(function(unravel(x)))[0]

    y0 = None if y0 is None else ravel_pytree(y0)[0]
    return flat(mv), b, flat(direction_fn), y0, unravel


class DCDM(lx.AbstractLinearSolver):
    """The deep conjugate direction method: its settings, and a lineax solver.

    Stops when the true residual satisfies `‖b − A x‖₂ ≤ max(atol, rtol·‖r₀‖₂)`
    (relative to the **initial** residual `r₀ = b − A x₀`, as in the paper),
    or after `max_steps` steps. Every setting is checked when the module is
    built, with an error that names it.

    **Arguments:**

    - `rtol`, `atol`: the stopping rule above (`>= 0`, finite). Both 0: run
      `max_steps` steps (stopping early only at an exactly zero residual) and
      report `successful`, as lineax's `CG` does.
      An `rtol` below what the dtype of `b` can reach (`100 ε`: 1.2e-5 in
      float32) with `atol=0` warns at the start of a solve (a
      `PrecisionWarning` naming the two remedies: float64, or a looser
      `rtol`), since the true residual stalls on round-off near `ε·cond(A)`.
    - `max_steps`: the step cap (a positive integer).
    - `n_orthogonal`: how many previous directions each new one is made
      A-orthogonal to (`2` in the paper; `0` is steepest descent along the
      network's direction).
    - `refresh_every`: replace the recurrence residual by `b − A x` every this
      many steps (`None`: only when checking convergence).

    ```python
    import jax

    jax.config.update("jax_enable_x64", True)  # rtol 1e-6 needs float64

    import jax.numpy as jnp
    import lineax as lx
    from sciml.dcdm import DCDM, Identity, solve


    def apply_A(x):  # the 1-D Dirichlet Laplacian, symmetric positive definite
        xp = jnp.pad(x, 1)
        return 2 * x - xp[:-2] - xp[2:]


    b = jnp.ones(64)
    direction = Identity()  # or a trained network: sciml.dcdm.direction_fn(net, fluid)
    sol = solve(apply_A, b, direction, DCDM(rtol=1e-6, max_steps=500))

    op = lx.FunctionLinearOperator(
        apply_A, jax.ShapeDtypeStruct(b.shape, b.dtype), lx.positive_semidefinite_tag
    )
    lx_sol = lx.linear_solve(
        op, b, DCDM(rtol=1e-6, max_steps=500), options={"direction_fn": direction}
    )
    ```

    As a lineax solver the operator must be symmetric positive
    (semi-)definite, square, on one array (a grid, any shape) or on a pytree
    of arrays (solved as their flat concatenation, `ravel_pytree`: the
    direction generator then takes and returns that pytree); an operator
    tagged negative semidefinite is refused, naming the negated system to
    solve instead. `options` holds the direction generator, `"direction_fn":
    f` (required), and the initial guess, `"y0": x0` (optional); gradients
    through the solve are another DCDM solve (the operator is symmetric). A
    generator passed to `DCDM` itself (`DCDM(f, ...)`, `DCDM(direction_fn=f)`)
    is a `TypeError` that shows these two calls. `stats` hold `num_steps`,
    `residual_norm` and `residual_history` as in `solve`. lineax's results
    cannot carry all of ours: an operator found `not_positive_definite`
    during the solve is lineax's `singular` (its message names an operator
    without the positive definiteness it is declared to have); a
    `nonfinite` iteration and a `nonfinite_direction` are lineax's
    `breakdown`. Call `solve` for the named cause.
    """

    # `rtol` and `atol` are checked in __check_init__, with messages that name them (a
    # float annotation would be checked first, less clearly)
    rtol: Any = eqx.field(static=True, default=1e-6, converter=_as_float)
    atol: Any = eqx.field(static=True, default=0.0, converter=_as_float)
    max_steps: int = eqx.field(static=True, default=100)
    n_orthogonal: int = eqx.field(static=True, default=2)
    refresh_every: int | None = eqx.field(static=True, default=None)

    def __new__(cls, *args: Any, **kwargs: Any):
        refuse_direction_fn(args, kwargs)
        return super().__new__(cls)

    def __check_init__(self):
        _check_tolerances(self.rtol, self.atol)
        check_positive_int("max_steps", self.max_steps)
        check_positive_int("refresh_every", self.refresh_every, allow_none=True)
        n_orthogonal = self.n_orthogonal
        if isinstance(n_orthogonal, bool) or not isinstance(n_orthogonal, int) or n_orthogonal < 0:
            raise ValueError(f"`n_orthogonal` must be an integer >= 0, got {n_orthogonal!r}.")

    def init(self, operator: lx.AbstractLinearOperator, options: dict[str, Any]):
        if not callable(options.get("direction_fn")):
            raise ValueError(
                "DCDM needs the direction generator in `options` under lx.linear_solve: "
                "lx.linear_solve(operator, b, DCDM(rtol=...), options={'direction_fn': f}), "
                "f a function r -> q (a trained network bound with sciml.dcdm.direction_fn, "
                f"or a preconditioner); got options {sorted(options)}."
            )
        structure = operator.in_structure()
        if structure != operator.out_structure():
            raise ValueError(
                "DCDM needs a square operator (same input and output structure), got "
                f"{structure} -> {operator.out_structure()}."
            )
        if lx.is_negative_semidefinite(operator) and not lx.is_positive_semidefinite(operator):
            raise ValueError(
                "DCDM needs a positive (semi-)definite operator; this one is tagged negative "
                "semidefinite: solve the negated system, "
                "`lx.linear_solve(-operator, -b, DCDM(...), options=...)`, which has the "
                "same solution."
            )
        if not (lx.is_symmetric(operator) or lx.is_positive_semidefinite(operator)):
            raise ValueError(
                "DCDM needs a symmetric positive (semi-)definite operator: tag it, e.g. "
                "`lx.FunctionLinearOperator(apply_A, structure, lx.positive_semidefinite_tag)`."
            )
        return lx.linearise(operator)

    def compute(self, state, vector, options: dict[str, Any]):
        mv, direction_fn, y0 = state.mv, options["direction_fn"], options.get("y0")
        unravel = None
        if not isinstance(state.in_structure(), jax.ShapeDtypeStruct):  # a pytree
            mv, vector, direction_fn, y0, unravel = _flattened(mv, vector, direction_fn, y0)
        b, x0 = check_inputs(vector, y0)
        check_tolerance("sciml.dcdm.DCDM", self.rtol, self.atol, b.dtype)
        x, result, stats = iterate(mv, b, direction_fn, x0, self)
        return (x if unravel is None else unravel(x)), _to_lineax(result), stats

    def transpose(self, state, options: dict[str, Any]):
        # Symmetric operator: the transposed system is the same system.
        return state, options

    def conj(self, state, options: dict[str, Any]):
        # Real symmetric operator: conjugation changes nothing.
        return state, options

    def assume_full_rank(self):
        return True
