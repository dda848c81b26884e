"""`DCDM(...)`: the settings of the deep conjugate direction iteration, as a module.

One object holds how the iteration runs (tolerances, step cap, how many
previous directions each new one is made A-orthogonal to, how often the
residual is recomputed), checked once when it is built. Pass it to
[`solve`][sciml.dcdm.solve] (`solve(apply_A, b, f, DCDM(rtol=1e-8))`) or, with
the direction generator inside, to lineax
(`lx.linear_solve(operator, b, DCDM(f, rtol=1e-8))`): the same iteration
either way, as lineax's `CG(rtol, atol)` is passed to `linear_solve`.

`solve` also accepts the settings as keywords (`solve(apply_A, b, f, rtol=1e-8)`):
`settings_from` builds the module from them, with a did-you-mean error for a
misspelt name.
"""

from __future__ import annotations

import difflib
import math
import numbers
from collections.abc import Callable
from typing import Any

import equinox as eqx
import jax
import lineax as lx
import numpy as np
from jaxtyping import Array

from .._checks import check_positive_int
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
    if not (rtol >= 0 and atol >= 0) or rtol == atol == 0:
        raise ValueError(
            f"`rtol` and `atol` must be >= 0 and not both 0, got rtol={rtol}, atol={atol}."
        )
    if not (math.isfinite(rtol) and math.isfinite(atol)):
        raise ValueError(
            f"`rtol` and `atol` must be finite, got rtol={rtol}, atol={atol} (an infinite "
            "tolerance would report success whatever the residual)."
        )


def _to_lineax(result: RESULTS) -> lx.RESULTS:
    """Our result as lineax's (which has no `nonfinite`: reported as `breakdown`)."""
    return lx.RESULTS.where(
        result == RESULTS.successful,
        lx.RESULTS.successful,
        lx.RESULTS.where(
            result == RESULTS.max_steps_reached,
            lx.RESULTS.max_steps_reached,
            lx.RESULTS.where(
                result == RESULTS.nonfinite_input,
                lx.RESULTS.nonfinite_input,
                lx.RESULTS.breakdown,
            ),
        ),
    )


class DCDM(lx.AbstractLinearSolver):
    """The deep conjugate direction method: its settings, and a lineax solver.

    Stops when the true residual satisfies `‖b − A x‖₂ ≤ max(atol, rtol·‖r₀‖₂)`
    (relative to the **initial** residual `r₀ = b − A x₀`, as in the paper),
    or after `max_steps` steps. Every setting is checked when the module is
    built, with an error that names it.

    **Arguments:**

    - `direction_fn`: the direction generator, for `lx.linear_solve` only
      (lineax passes no other way to give it); leave it out for
      [`solve`][sciml.dcdm.solve], which takes the generator as an argument.
    - `rtol`, `atol`: the stopping rule above (`>= 0`, finite, not both 0).
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
    lx_sol = lx.linear_solve(op, b, DCDM(direction, rtol=1e-6, max_steps=500))
    ```

    As a lineax solver the operator must be symmetric positive
    (semi-)definite with one array as input and output (a grid, any shape);
    `options={"y0": x0}` sets the initial guess, and gradients through the
    solve are another DCDM solve (the operator is symmetric). `stats` hold
    `num_steps`, `residual_norm` and `residual_history` as in `solve`.
    lineax's results cannot carry ours: a `nonfinite` iteration, an operator
    that is `not_positive_definite` and a `nonfinite_direction` are all
    reported as lineax's `breakdown`; call `solve` for the named cause.
    """

    # `direction_fn`, `rtol` and `atol` are checked in __check_init__, with messages that
    # name them (a Callable / float annotation would be checked first, less clearly)
    direction_fn: Any = None
    rtol: Any = eqx.field(static=True, default=1e-6, converter=_as_float)
    atol: Any = eqx.field(static=True, default=0.0, converter=_as_float)
    max_steps: int = eqx.field(static=True, default=100)
    n_orthogonal: int = eqx.field(static=True, default=2)
    refresh_every: int | None = eqx.field(static=True, default=None)

    def __check_init__(self):
        if self.direction_fn is not None and not callable(self.direction_fn):
            raise TypeError(
                "`direction_fn` must be a function r -> q (a trained network bound with "
                f"sciml.dcdm.direction_fn, or a preconditioner) or None, got {self.direction_fn!r}."
            )
        _check_tolerances(self.rtol, self.atol)
        check_positive_int("max_steps", self.max_steps)
        check_positive_int("refresh_every", self.refresh_every, allow_none=True)
        n_orthogonal = self.n_orthogonal
        if isinstance(n_orthogonal, bool) or not isinstance(n_orthogonal, int) or n_orthogonal < 0:
            raise ValueError(f"`n_orthogonal` must be an integer >= 0, got {n_orthogonal!r}.")

    def init(self, operator: lx.AbstractLinearOperator, options: dict[str, Any]):
        del options
        if self.direction_fn is None:
            raise ValueError(
                "DCDM needs a `direction_fn` under lx.linear_solve: DCDM(direction_fn, rtol=...)."
            )
        structure = operator.in_structure()
        if not isinstance(structure, jax.ShapeDtypeStruct):
            raise ValueError(
                f"DCDM needs an operator on one array (a grid), got input structure {structure}."
            )
        if structure != operator.out_structure():
            raise ValueError(
                "DCDM needs a square operator (same input and output structure), got "
                f"{structure} -> {operator.out_structure()}."
            )
        if not (lx.is_symmetric(operator) or lx.is_positive_semidefinite(operator)):
            raise ValueError(
                "DCDM needs a symmetric positive (semi-)definite operator: tag it, e.g. "
                "`lx.FunctionLinearOperator(apply_A, structure, lx.positive_semidefinite_tag)`."
            )
        return lx.linearise(operator)

    def compute(self, state, vector, options: dict[str, Any]):
        b, x0 = check_inputs(vector, options.get("y0"))
        check_tolerance("sciml.dcdm.DCDM", self.rtol, self.atol, b.dtype)
        x, result, stats = iterate(state.mv, b, self.direction_fn, x0, self)
        return x, _to_lineax(result), stats

    def transpose(self, state, options: dict[str, Any]):
        # Symmetric operator: the transposed system is the same system.
        return state, options

    def conj(self, state, options: dict[str, Any]):
        # Real symmetric operator: conjugation changes nothing.
        return state, options

    def assume_full_rank(self):
        return True


SETTINGS = ("rtol", "atol", "max_steps", "n_orthogonal", "refresh_every")
_ARGUMENTS = ("x0", "null_space", "inconsistent", "throw")  # the other keywords of solve


def settings_from(
    solver: Any, options: dict[str, Any], direction_fn: Callable[[Array], Array]
) -> DCDM:
    """The settings of one `solve`: `solver` (a [`DCDM`][sciml.dcdm.DCDM]), or
    one built from the keyword `options` (names of its fields), never both.

    Raises a `TypeError` for an option that is not a setting (naming the
    closest one), for both forms at once, or for a `solver` that is not a
    `DCDM`; a `ValueError` for a `solver` holding another `direction_fn` than
    the one `solve` was given.
    """
    for name in options:
        if name not in SETTINGS:
            close = difflib.get_close_matches(name, SETTINGS + _ARGUMENTS, n=1)
            hint = f" Did you mean `{close[0]}`?" if close else ""
            raise TypeError(
                f"`{name}` is not a setting of sciml.dcdm.solve.{hint} The settings are: "
                f"{', '.join(SETTINGS)} (or solver=DCDM(...)); the other keywords of solve are "
                f"{', '.join(_ARGUMENTS)}."
            )
    if solver is None:
        return DCDM(**options)
    if not isinstance(solver, DCDM):
        raise TypeError(
            f"`solver` must be a sciml.dcdm.DCDM (e.g. DCDM(rtol=1e-6, max_steps=500)) or None, "
            f"got {type(solver).__name__}."
        )
    if options:
        raise TypeError(
            f"Give the settings either as `solver` or as keywords, not both: got a solver and "
            f"{', '.join(f'`{name}`' for name in options)}. To change a setting of a solver: "
            "dataclasses.replace(solver, rtol=...)."
        )
    if solver.direction_fn is not None and solver.direction_fn is not direction_fn:
        raise ValueError(
            "`solver` holds a `direction_fn` other than the one given to solve, which uses its "
            "argument: build the solver without one (DCDM(rtol=...)), as solve takes the "
            "generator as its third argument."
        )
    return solver
