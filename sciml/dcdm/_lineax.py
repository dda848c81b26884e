"""The DCDM iteration as a lineax solver: `lx.linear_solve(operator, b, DCDM(f))`.

The same iteration as [`solve`][sciml.dcdm.solve] (one implementation: this
class calls it), for code that already speaks lineax — the operator, the
`throw`/`result` handling, `options={"y0": x0}` for the initial guess, and
differentiation through the solve (the operator is symmetric, so the
transposed solve is another DCDM solve with the same directions).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import equinox as eqx
import jax
import lineax as lx
from jaxtyping import Array

from .._custom_types import Real
from ..solution import RESULTS
from ._iteration import solve


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
    """The deep conjugate direction method as a lineax solver.

    **Arguments:** as [`solve`][sciml.dcdm.solve]: `direction_fn`, `rtol`,
    `atol`, `max_steps`, `n_orthogonal`, `refresh_every`. The operator must be
    symmetric positive (semi-)definite with one array as input and output
    (a grid, any shape); `options={"y0": x0}` sets the initial guess.

    `stats` of the lineax `Solution` hold `num_steps`, `residual_norm` and
    `residual_history` as in `solve`. lineax's results cannot carry ours: a
    `nonfinite` iteration, an operator that is `not_positive_definite` and a
    `nonfinite_direction` are all reported as lineax's `breakdown`; call
    [`solve`][sciml.dcdm.solve] for the named cause.

    ```python
    import jax

    jax.config.update("jax_enable_x64", True)  # rtol 1e-6 needs float64

    import jax.numpy as jnp
    import lineax as lx
    from sciml.dcdm import DCDM, Identity


    def apply_A(x):  # the 1-D Dirichlet Laplacian, symmetric positive definite
        xp = jnp.pad(x, 1)
        return 2 * x - xp[:-2] - xp[2:]


    b = jnp.ones(64)
    op = lx.FunctionLinearOperator(
        apply_A, jax.ShapeDtypeStruct(b.shape, b.dtype), lx.positive_semidefinite_tag
    )
    direction = Identity()  # or a trained network: sciml.dcdm.direction_fn(net, fluid)
    sol = lx.linear_solve(op, b, DCDM(direction, rtol=1e-6, max_steps=500))
    ```
    """

    direction_fn: Callable[[Array], Array]
    rtol: Real = 1e-6
    atol: Real = 0.0
    max_steps: int = 100
    n_orthogonal: int = eqx.field(static=True, default=2)
    refresh_every: int | None = eqx.field(static=True, default=None)

    def init(self, operator: lx.AbstractLinearOperator, options: dict[str, Any]):
        del options
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
        operator = state
        sol = solve(
            operator.mv,
            vector,
            self.direction_fn,
            x0=options.get("y0"),
            rtol=self.rtol,
            atol=self.atol,
            max_steps=self.max_steps,
            n_orthogonal=self.n_orthogonal,
            refresh_every=self.refresh_every,
            throw=False,
        )
        return sol.value, _to_lineax(sol.result), dict(sol.stats)

    def transpose(self, state, options: dict[str, Any]):
        # Symmetric operator: the transposed system is the same system.
        return state, options

    def conj(self, state, options: dict[str, Any]):
        # Real symmetric operator: conjugation changes nothing.
        return state, options

    def assume_full_rank(self):
        return True
