r"""Time stepping of a neural field: fit the initial condition, then `integrate`.

`integrate` runs `n = (t1 − t0)/Δt` steps of an integrator in one `lax.scan`;
each step warm-starts from the previous weights, and its `Solution` result and
losses are recorded. A step that misses its tolerance or increases its
objective is never silently accepted: its result is kept per step in
`stats["step_result"]`, the first failing step's result becomes the overall
`result`, and `throw=True` raises its message.
"""

from __future__ import annotations

import math
from typing import Any

import equinox as eqx
import jax
import jax.numpy as jnp
from jax import lax
from jaxtyping import PRNGKeyArray

from .._checks import check_positive_finite
from .._custom_types import Real
from ..solution import RESULTS, Solution, make_solution
from ._integrators import AbstractIntegrator
from ._objective import InitialObjective
from ._problem import AbstractProblem
from ._step_solver import AbstractStepSolver


class SaveAt(eqx.Module):
    """Which fields `integrate` returns (the final one always).

    **Arguments:** `t0` (default True): include the initial field; `steps`
    (default False): include the field after every step.
    """

    t0: bool = eqx.field(static=True, default=True)
    steps: bool = eqx.field(static=True, default=False)


def _check_problem(problem: Any) -> None:
    if not isinstance(problem, AbstractProblem):
        raise ValueError(
            "`problem` must be an AbstractProblem such as sciml.insr.Advection1D(), "
            f"got {type(problem).__name__}."
        )


def number_of_steps(t0: Real, t1: Real, dt: Real) -> int:
    """`(t1 − t0)/dt` as an integer; raises `ValueError` if `dt ≤ 0`, `t1 ≤ t0`
    or the interval is not a whole number of steps."""
    check_positive_finite("dt", dt)
    if not (math.isfinite(t0) and math.isfinite(t1) and t1 > t0):
        raise ValueError(f"need finite `t0` < `t1`, got t0={t0!r}, t1={t1!r}.")
    n = round((t1 - t0) / dt)
    if n < 1 or abs(n * dt - (t1 - t0)) > 1e-9 * max(1.0, abs(t1 - t0)):
        raise ValueError(
            f"`t1 - t0` = {t1 - t0!r} must be a whole number of steps of `dt` = {dt!r}."
        )
    return int(n)


def field_at(fields: Any, index: Any) -> Any:
    """One field of a stacked `integrate(...).value` (its arrays have a leading
    time axis): `field_at(solution.value, -1)` is the final field."""
    return jax.tree_util.tree_map(lambda a: a[index] if eqx.is_inexact_array(a) else a, fields)


def fit_initial(
    field: Any,
    problem: Any,
    solver: Any,
    *,
    key: PRNGKeyArray,
    throw: bool = True,
) -> Solution:
    """Fits `field` to the problem's initial condition by the same per-step
    machinery (objective `f_θ(x) − u₀(x)` on random points).

    **Returns:** a [`Solution`][sciml.solution.Solution] whose `value` is the
    fitted field; `stats` `loss_initial`, `loss` (mean squared misfit),
    `iterations`.
    """
    _check_problem(problem)
    problem.check_field(field)
    if not isinstance(solver, AbstractStepSolver):
        raise ValueError(
            f"`solver` must be a LeastSquaresSolver() or AdamSolver(), got {type(solver).__name__}."
        )
    sol = solver.solve(InitialObjective(problem), field, key=key)
    return make_solution(sol.value, sol.result, sol.stats, throw=throw)


def integrate(
    field0: Any,
    integrator: Any,
    problem: Any,
    t0: Real,
    t1: Real,
    dt: Real,
    *,
    key: PRNGKeyArray,
    saveat: SaveAt | None = None,
    throw: bool = True,
) -> Solution:
    """Steps `field0` from `t0` to `t1` with steps of `dt`.

    **Arguments:**

    - `field0`: the field at `t0` (a module or any callable pytree on one
      point `(d,) -> (C,)`); its floating-point arrays are the unknowns.
    - `integrator`: [`ExplicitEuler`][sciml.insr.ExplicitEuler],
      [`ImplicitEuler`][sciml.insr.ImplicitEuler] or
      [`Midpoint`][sciml.insr.Midpoint], holding its per-step solver.
    - `problem`: e.g. [`Advection1D`][sciml.insr.Advection1D].
    - `t0`, `t1`, `dt`: Python numbers; `(t1 − t0)/dt` must be a whole number.
    - `key`: PRNG key (one per step is split from it for the points).
    - `saveat`: [`SaveAt`][sciml.insr.SaveAt] (default `SaveAt()`: initial and final fields).
    - `throw`: raise if any step failed; with `False` read `result` and `stats`.

    **Returns:** a [`Solution`][sciml.solution.Solution]: `value` the saved
    fields stacked along a leading time axis (use
    [`field_at`][sciml.insr.field_at]); `result` the first failing step's
    result (or `successful`); `stats`: `ts` (saved times), `step_result`
    (`(n,)` `RESULTS` indices per step), `loss_initial`, `loss`, `iterations`
    (`(n,)` each), `num_failed_steps`, `state` (the integrator's final
    state, e.g. the pressure field of a splitting scheme; `None` for the
    one-step integrators).
    """
    if not isinstance(integrator, AbstractIntegrator):
        raise ValueError(
            "`integrator` must be ExplicitEuler(), ImplicitEuler() or Midpoint() "
            f"(an AbstractIntegrator), got {type(integrator).__name__}."
        )
    _check_problem(problem)
    problem.check_field(field0, "field0")
    saveat = SaveAt() if saveat is None else saveat
    if not isinstance(saveat, SaveAt):
        raise ValueError(f"`saveat` must be a SaveAt, got {type(saveat).__name__}.")
    n = number_of_steps(float(t0), float(t1), float(dt))
    params0, static = eqx.partition(field0, eqx.is_inexact_array)
    state0, state_static = eqx.partition(
        integrator.init(field0, problem, t0, dt), eqx.is_inexact_array
    )

    def body(carry, inputs):
        params, state, result = carry
        i, k = inputs
        t = t0 + i * dt
        sol, state = integrator.step(
            eqx.combine(params, static), problem, t, dt, eqx.combine(state, state_static), key=k
        )
        new = eqx.partition(sol.value, eqx.is_inexact_array)[0]
        state = eqx.partition(state, eqx.is_inexact_array)[0]
        result = RESULTS.where(result == RESULTS.successful, sol.result, result)
        out = dict(sol.stats, step_result=sol.result._value)
        return (new, state, result), (out, new if saveat.steps else None)

    init = (params0, state0, RESULTS.successful)
    (final, state, result), (per_step, saved) = lax.scan(
        body, init, (jnp.arange(n), jax.random.split(key, n))
    )
    times = t0 + dt * jnp.arange(n + 1)
    if saveat.steps:
        stacked, ts = saved, times[1:]
    else:
        stacked, ts = jax.tree_util.tree_map(lambda a: a[None], final), times[-1:]
    if saveat.t0:
        stacked = jax.tree_util.tree_map(
            lambda a0, a: jnp.concatenate([a0[None], a]), params0, stacked
        )
        ts = jnp.concatenate([times[:1], ts])
    stats = dict(
        per_step,
        ts=ts,
        num_failed_steps=jnp.sum(per_step["step_result"] != 0),
        state=eqx.combine(state, state_static),
    )
    return make_solution(eqx.combine(stacked, static), result, stats, throw=throw)
