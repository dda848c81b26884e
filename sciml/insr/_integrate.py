r"""Time stepping of a neural field: fit the initial condition, then `integrate`.

`integrate` runs `n = (t1 − t0)/Δt` steps of an integrator in compiled chunks
of `steps_per_chunk` steps (one `lax.scan` each, every chunk the same compiled
function; by default one chunk of all steps). Each step warm-starts from the
previous weights, and its `Solution` result and losses are recorded. Between
chunks a `monitor` (`sciml.training.ChunkedRun`) shows progress, checkpoints
the run and resumes it from its last checkpoint. A step that misses its
tolerance or increases its objective is never silently accepted: its result is
kept per step in `stats["step_result"]`, the first failing step's result
becomes the overall `result`, and `throw=True` raises its message.
"""

from __future__ import annotations

import hashlib
import math
from typing import Any

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jax import lax
from jaxtyping import PRNGKeyArray

from .._checks import check_key, check_positive_finite, check_positive_int
from .._custom_types import Real
from .._monitor import AbstractMonitor
from ..solution import RESULTS, Solution, make_solution
from ._integrators import check_supported
from ._objective import InitialObjective
from ._problem import AbstractProblem, check_finite_weights
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
    check_finite_weights(field, "field")
    check_key("key", key)
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
    steps_per_chunk: int | None = None,
    monitor: Any = None,
) -> Solution:
    """Steps `field0` from `t0` to `t1` with steps of `dt`.

    **Arguments:**

    - `field0`: the field at `t0` (a module or any callable pytree on one
      point `(d,) -> (C,)`); its floating-point arrays are the unknowns.
    - `integrator`: [`ExplicitEuler`][sciml.insr.ExplicitEuler],
      [`ImplicitEuler`][sciml.insr.ImplicitEuler],
      [`Midpoint`][sciml.insr.Midpoint], [`Splitting`][sciml.insr.Splitting] or
      [`IncrementalPotential`][sciml.insr.IncrementalPotential], holding its
      per-step solver.
    - `problem`: e.g. [`Advection1D`][sciml.insr.Advection1D].
    - `t0`, `t1`, `dt`: Python numbers; `(t1 − t0)/dt` must be a whole number.
    - `key`: PRNG key (one per step is split from it for the points).
    - `saveat`: [`SaveAt`][sciml.insr.SaveAt] (default `SaveAt()`: initial and final fields).
    - `throw`: raise if any step failed; with `False` read `result` and `stats`.
    - `steps_per_chunk`: the steps of one compiled chunk (default: all of
      them, one `lax.scan`). Every chunk is the same compiled function, the
      last one skipping the steps past `t1`.
    - `monitor`: what runs between the chunks, an
      [`AbstractMonitor`][sciml.insr.AbstractMonitor] such as
      [`sciml.training.ChunkedRun`][sciml.training.ChunkedRun]`(directory)`:
      progress (step, time, loss, seconds per step), a checkpoint of the
      field, the integrator's state and the per-step records after every
      chunk and on Ctrl-C / SIGTERM, and resume from the folder's latest
      checkpoint. A resumed run ends bit-identical to an uninterrupted one
      with the same `steps_per_chunk`. Call `integrate` outside `jit` when
      you pass one.

    **Returns:** a [`Solution`][sciml.solution.Solution]: `value` the saved
    fields stacked along a leading time axis (use
    [`field_at`][sciml.insr.field_at]); `result` the first failing step's
    result (or `successful`); `stats`: `ts` (saved times), `step_result`
    (`(n,)` `RESULTS` indices per step), `loss_initial`, `loss`, `iterations`
    (`(n,)` each), `num_failed_steps`, `state` (the integrator's final
    state, e.g. the pressure field of a splitting scheme; `None` for the
    one-step integrators), `resumed_from` (the step a monitor's checkpoint
    resumed this call from; 0 otherwise).
    """
    _check_problem(problem)
    check_supported(integrator, problem)
    problem.check_field(field0, "field0")
    check_finite_weights(field0, "field0")
    check_key("key", key)
    saveat = SaveAt() if saveat is None else saveat
    if not isinstance(saveat, SaveAt):
        raise ValueError(f"`saveat` must be a SaveAt, got {type(saveat).__name__}.")
    n = number_of_steps(float(t0), float(t1), float(dt))
    chunk = n if steps_per_chunk is None else check_positive_int("steps_per_chunk", steps_per_chunk)
    chunk = min(chunk, n)
    if monitor is not None and not isinstance(monitor, AbstractMonitor):
        raise ValueError(
            "`monitor` must be an AbstractMonitor such as sciml.training.ChunkedRun(directory), "
            f"got {type(monitor).__name__}."
        )
    params0, static = eqx.partition(field0, eqx.is_inexact_array)
    state0, state_static = eqx.partition(
        integrator.init(field0, problem, t0, dt), eqx.is_inexact_array
    )
    fixed = _Fixed(integrator, problem, static, state_static, t0, dt, n, chunk, saveat.steps)
    run0 = _initial_run(fixed, params0, state0, key)
    keys = jax.random.split(key, n)

    def advance(run: _Run, step: int) -> tuple[_Run, int, dict[str, Any]]:
        run = _chunk(fixed, run, jnp.asarray(step, jnp.int32), keys)
        last = min(step + chunk, n)
        info = {"t": t0 + last * dt, "loss": run.per_step["loss"][last - 1]}
        return run, last, info

    if monitor is None:
        run, step = run0, 0
        while step < n:
            run, step, _ = advance(run, step)
        resumed_from = 0
    else:
        if any(isinstance(x, jax.core.Tracer) for x in jax.tree_util.tree_leaves((run0, key))):
            raise ValueError("call `integrate` outside `jit` when you pass a `monitor`.")
        fingerprint = _fingerprint(integrator, problem, params0, key, t0, dt, n)
        run, resumed_from = monitor.run(run0, key, advance, total=n, fingerprint=fingerprint)
    return _solution(fixed, run, params0, resumed_from, saveat, throw)


class _Fixed(eqx.Module):
    """What every chunk of one `integrate` call shares (its static parts
    decide the compiled chunk)."""

    integrator: Any
    problem: Any
    static: Any
    state_static: Any
    t0: float = eqx.field(static=True)
    dt: float = eqx.field(static=True)
    n: int = eqx.field(static=True)
    chunk: int = eqx.field(static=True)
    save_steps: bool = eqx.field(static=True)

    def step(self, params, state, i, k):
        t = self.t0 + i * self.dt
        sol, state = self.integrator.step(
            eqx.combine(params, self.static),
            self.problem,
            t,
            self.dt,
            eqx.combine(state, self.state_static),
            key=k,
        )
        new = eqx.partition(sol.value, eqx.is_inexact_array)[0]
        state = eqx.partition(state, eqx.is_inexact_array)[0]
        return new, state, sol.result, dict(sol.stats, step_result=sol.result._value)


class _Run(eqx.Module):
    """The state carried from chunk to chunk (what a checkpoint holds): the
    field's and the integrator's arrays, the first failing result, and the
    per-step records and saved fields, `(n, ...)` each, filled up to the step."""

    params: Any
    state: Any
    result: RESULTS
    per_step: dict[str, Any]
    saved: Any


def _initial_run(fixed: _Fixed, params0, state0, key) -> _Run:
    shapes = eqx.filter_eval_shape(fixed.step, params0, state0, 0, jax.random.split(key, 1)[0])
    per_step = {name: jnp.zeros((fixed.n, *s.shape), s.dtype) for name, s in shapes[3].items()}
    saved = None
    if fixed.save_steps:
        saved = jax.tree_util.tree_map(lambda a: jnp.zeros((fixed.n, *a.shape), a.dtype), params0)
    return _Run(params0, state0, RESULTS.successful, per_step, saved)


@eqx.filter_jit
def _chunk(fixed: _Fixed, run: _Run, start: Any, keys: Any) -> _Run:
    """`fixed.chunk` steps from step `start`; the steps past `fixed.n` are skipped."""

    def active(run: _Run, i: Any) -> _Run:
        params, state, result, out = fixed.step(run.params, run.state, i, keys[i])
        result = RESULTS.where(run.result == RESULTS.successful, result, run.result)
        per_step = {name: run.per_step[name].at[i].set(value) for name, value in out.items()}
        saved = run.saved
        if fixed.save_steps:
            saved = jax.tree_util.tree_map(lambda s, p: s.at[i].set(p), saved, params)
        return _Run(params, state, result, per_step, saved)

    def body(run: _Run, j: Any) -> tuple[_Run, None]:
        i = start + j
        run = lax.cond(i < fixed.n, active, lambda run, i: run, run, jnp.minimum(i, fixed.n - 1))
        return run, None

    return lax.scan(body, run, jnp.arange(fixed.chunk))[0]


def _fingerprint(integrator, problem, params0, key, t0, dt, n) -> dict:
    """What names a run in its checkpoints: the routine, integrator, problem,
    times, and digests of the initial field and the key."""
    digest = hashlib.sha256()
    for leaf in jax.tree_util.tree_leaves(params0):
        digest.update(np.asarray(leaf).tobytes())
    raw = jax.random.key_data(key) if jnp.issubdtype(key.dtype, jax.dtypes.prng_key) else key
    return {
        "routine": "sciml.insr.integrate",
        "integrator": type(integrator).__name__,
        "problem": type(problem).__name__,
        "t0": float(t0),
        "dt": float(dt),
        "n_steps": int(n),
        "field0": digest.hexdigest()[:16],
        "key": hashlib.sha256(np.asarray(raw).tobytes()).hexdigest()[:16],
    }


def _solution(fixed: _Fixed, run: _Run, params0, resumed_from: int, saveat, throw) -> Solution:
    n, t0, dt = fixed.n, fixed.t0, fixed.dt
    times = t0 + dt * jnp.arange(n + 1)
    if saveat.steps:
        stacked, ts = run.saved, times[1:]
    else:
        stacked, ts = jax.tree_util.tree_map(lambda a: a[None], run.params), times[-1:]
    if saveat.t0:
        stacked = jax.tree_util.tree_map(
            lambda a0, a: jnp.concatenate([a0[None], a]), params0, stacked
        )
        ts = jnp.concatenate([times[:1], ts])
    stats = dict(
        run.per_step,
        ts=ts,
        num_failed_steps=jnp.sum(run.per_step["step_result"] != 0),
        state=eqx.combine(run.state, fixed.state_static),
        resumed_from=resumed_from,
    )
    return make_solution(eqx.combine(stacked, fixed.static), run.result, stats, throw=throw)
