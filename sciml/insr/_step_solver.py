"""The per-step solver interface and what both solvers share: the unknowns
(`eqx.partition` of the field's floating-point arrays), dtype casts, and the
acceptance check of a step.

A step is accepted only if the solver met its own tolerance **and** the
objective did not grow: its value after the solve, on the step's check points,
must not exceed `(1 + 1e-3)` times its value at the warm start (the previous
weights) plus `eps²` of the dtype; otherwise the step is reported as
`RESULTS.insr_objective_increased` (`RESULTS.nonfinite` for NaN / Inf).
"""

from __future__ import annotations

import abc
from typing import Any

import equinox as eqx
import jax
import jax.numpy as jnp
from jaxtyping import PRNGKeyArray

from ..solution import RESULTS, Solution, make_solution


INCREASE_RTOL = 1e-3


class AbstractStepSolver(eqx.Module):
    """Base of the per-step solvers: `solve(objective, field, key=...)` returns
    a [`Solution`][sciml.solution.Solution] whose `value` is the new field."""

    @abc.abstractmethod
    def solve(self, objective: Any, field: Any, *, key: PRNGKeyArray) -> Solution:
        """Minimises `objective` over the weights of `field`, warm-started at `field`.

        **Returns:** `Solution(value=new field, result, stats)` with `stats`
        `loss_initial` (objective at the warm start), `loss` (after) and
        `iterations`; never raises (the caller decides with `throw`).
        """


def check_module(name: str, value: Any, cls: type) -> None:
    """Raises `ValueError` naming `name` unless `value` is a `cls`."""
    if not isinstance(value, cls):
        raise ValueError(
            f"`{name}` must be an insr.{cls.__name__}(...), got {type(value).__name__}."
        )


def float_dtype_of(tree: Any) -> Any:
    """The dtype of the first floating-point array in `tree`."""
    for leaf in jax.tree_util.tree_leaves(tree):
        if eqx.is_inexact_array(leaf):
            return leaf.dtype
    raise ValueError("the field has no floating-point arrays to optimise.")


def cast_floats(tree: Any, dtype: Any) -> Any:
    """`tree` with every floating-point array cast to `dtype`."""
    return jax.tree_util.tree_map(lambda a: a.astype(dtype) if eqx.is_inexact_array(a) else a, tree)


def accept(result: Any, loss_initial: Any, loss: Any) -> Any:
    """The step's result after the acceptance check of the module docstring."""
    eps = jnp.finfo(jnp.result_type(loss)).eps
    increased = loss > (1 + INCREASE_RTOL) * loss_initial + eps**2
    result = RESULTS.promote(result) if not isinstance(result, RESULTS) else result
    result = RESULTS.where(increased, RESULTS.insr_objective_increased, result)
    return RESULTS.where(jnp.isfinite(loss), result, RESULTS.nonfinite)


def finish(
    field: Any, result: Any, loss_initial: Any, loss: Any, iterations: Any, **extra: Any
) -> Solution:
    """The step's `Solution` (never throws); `extra` are further `stats`."""
    stats = {"loss_initial": loss_initial, "loss": loss, "iterations": jnp.asarray(iterations)}
    stats.update(extra)
    return make_solution(field, accept(result, loss_initial, loss), stats, throw=False)
