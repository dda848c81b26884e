"""One-sample time steppers and the one time loop that every solver shares.

A stepper is an Equinox module whose `__call__(u)` advances ONE field
`(channels, *grid)` by one time step `dt` (a field of the module). Batches are
the caller's `jax.vmap`, compilation the caller's `jax.jit`: nothing here jits.

Three loops build on a stepper, all with `lax.scan` / `lax.fori_loop`:

- [`rollout`][solvers.stepping.rollout]`(stepper, n)`: the trajectory of `n`
  steps, `(n, channels, *grid)` (`n + 1` with the initial field);
- [`repeat`][solvers.stepping.repeat]`(stepper, n)`: a new stepper that makes
  `n` steps per call, to stream a long run chunk by chunk (the online-training
  clients advance between saved snapshots this way);
- [`record`][solvers.stepping.record]`(stepper, u0, times)`: the fields at given
  times, each a whole number of steps.

**Internal state.** A spectral solver would waste two FFTs per step if every
step went back to the grid. So a stepper ([`AbstractStepper`][solvers.stepping.AbstractStepper])
splits its step into `to_state(u)` (e.g. the FFT), `step_state(state)` (one step
on that state) and `from_state(state)` (back to the grid), and
`__call__ = from_state ∘ step_state ∘ to_state`. The loops transform once, step
the state, and transform back only for the fields they return, which is exactly
what the hand-written loop of each solver did before. A loop of `__call__`s gives
the same fields up to one transform round trip of rounding per step. Any plain
function `u -> u` (a neural surrogate, say) is accepted too, with state = field.

**Compiling.** `jax.jit(jax.vmap(stepper))` and `jax.jit(rollout(stepper, n))`
compile as usual. A stepper (and `repeat(stepper, n)`, itself a stepper) holds
arrays, so it is not a hashable function: to jit the module itself write
`eqx.filter_jit(stepper)` or `jax.jit(lambda u: stepper(u))`.
"""

from __future__ import annotations

import abc
from collections.abc import Callable, Sequence
from typing import Any

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float


__all__ = ["AbstractStepper", "Repeat", "record", "record_increments", "repeat", "rollout"]


class AbstractStepper(eqx.Module):
    """Base of the one-sample steppers: `__call__(u)` advances `u` by `dt`.

    Subclasses set the field `dt` and implement `check` and `step_state`; they
    override `to_state` / `from_state` when the step runs on a transform of the
    field (the identity by default).
    """

    dt: eqx.AbstractVar[Any]

    @abc.abstractmethod
    def check(self, u: Any) -> None:
        """Raises `ValueError` (at trace time) if `u` is not one field this
        stepper can advance; the message names the argument and the fix."""

    def to_state(self, u: Any) -> Any:
        """The internal state of the field `u` (default: `u` itself)."""
        return u

    def from_state(self, state: Any) -> Any:
        """The field of an internal state (default: the state itself)."""
        return state

    @abc.abstractmethod
    def step_state(self, state: Any) -> Any:
        """One time step on the internal state."""

    def __call__(self, u: Float[Array, " channels *grid"]) -> Float[Array, " channels *grid"]:
        """Advances one field `(channels, *grid)` by one step of `dt`.

        **Arguments:**

        - `u`: one field; for a batch use `jax.vmap(stepper)`.

        **Returns:** the field one step later, same shape and dtype.
        """
        self.check(u)
        return self.from_state(self.step_state(self.to_state(u)))


def _parts(stepper) -> tuple[Callable, Callable, Callable, Callable]:
    """`(check, to_state, step_state, from_state)` of a stepper or plain function."""
    if isinstance(stepper, AbstractStepper):
        return stepper.check, stepper.to_state, stepper.step_state, stepper.from_state
    if not callable(stepper):
        raise ValueError(
            f"stepper must be an AbstractStepper or a function u -> u, got {type(stepper)}."
        )
    identity = lambda x: x  # noqa: E731
    return (lambda u: None), identity, stepper, identity


def _check_count(name: str, n) -> None:
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 0:
        raise ValueError(f"{name} must be a non-negative Python integer, got {n!r}.")


def _fori(step_state: Callable, n, state):
    return jax.lax.fori_loop(0, n, lambda _, x: step_state(x), state)


class Repeat(AbstractStepper):
    """`n` steps of `stepper` per call, as a stepper of step `n · stepper.dt`.

    Built by [`repeat`][solvers.stepping.repeat]; its own `rollout` is the
    trajectory sampled every `n` steps.
    """

    stepper: Any
    n: Any
    dt: Any

    def __init__(self, stepper, n):
        _parts(stepper)
        if not isinstance(n, jax.core.Tracer):
            if isinstance(n, (jax.Array, np.ndarray)):
                if n.shape != () or not jnp.issubdtype(n.dtype, jnp.integer):
                    raise ValueError(f"n must be an integer scalar, got {n.dtype}{n.shape}.")
                if int(n) < 0:
                    raise ValueError(f"n must be >= 0, got {int(n)}.")
            else:
                _check_count("n", n)
        self.stepper = stepper
        self.n = n
        inner_dt = getattr(stepper, "dt", None)
        self.dt = None if inner_dt is None else n * inner_dt

    def check(self, u):
        _parts(self.stepper)[0](u)

    def to_state(self, u):
        return _parts(self.stepper)[1](u)

    def step_state(self, state):
        return _fori(_parts(self.stepper)[2], self.n, state)

    def from_state(self, state):
        return _parts(self.stepper)[3](state)


def repeat(stepper, n) -> Repeat:
    """A stepper that applies `stepper` `n` times per call (by `lax.fori_loop`).

    Streaming a trajectory chunk by chunk: calling `repeat(stepper, m)` k times
    equals `repeat(stepper, k·m)` once, up to one state round trip of rounding
    per chunk. `n` may be a traced integer, so changing it under `jax.jit` does
    not recompile.

    **Arguments:**

    - `stepper`: an [`AbstractStepper`][solvers.stepping.AbstractStepper] or a
      function `u -> u`.
    - `n`: non-negative number of steps (Python int or integer scalar array).

    **Returns:** a [`Repeat`][solvers.stepping.Repeat] stepper, `u -> u`.
    """
    return Repeat(stepper, n)


def rollout(
    stepper, n: int, *, include_init: bool = False
) -> Callable[[Float[Array, " channels *grid"]], Float[Array, "time channels *grid"]]:
    """The trajectory of `n` steps from an initial field, by `lax.scan`.

    **Arguments:**

    - `stepper`: an [`AbstractStepper`][solvers.stepping.AbstractStepper] or a
      function `u -> u`.
    - `n`: number of steps (a non-negative Python int: the scan length).
    - `include_init`: put the initial field first.

    **Returns:** a function `u0 -> trajectory` with `trajectory[i]` the field after
    `i + 1` steps, shape `(n, channels, *grid)` (`(n + 1, …)` with `u0` first if
    `include_init`). Jit and vmap it as you like.
    """
    _check_count("n", n)
    check, to_state, step_state, from_state = _parts(stepper)

    def run(u0):
        check(u0)

        def body(state, _):
            state = step_state(state)
            return state, from_state(state)

        _, trajectory = jax.lax.scan(body, to_state(u0), None, length=n)
        if include_init:
            trajectory = jax.tree_util.tree_map(
                lambda first, rest: jnp.concatenate([jnp.asarray(first)[None], rest]),
                u0,
                trajectory,
            )
        return trajectory

    return run


def record_increments(times: Sequence[float] | np.ndarray, dt: float) -> np.ndarray:
    """Steps between consecutive `times` (from t = 0), checking that each time is
    a whole number of steps of `dt`.

    **Returns:** integer array `(len(times),)`; raises `ValueError` naming
    `times` for empty, negative, decreasing or off-grid times.
    """
    dt = float(dt)
    times = np.asarray(times, dtype=float).reshape(-1)
    if times.size == 0:
        raise ValueError("times must hold at least one time.")
    if np.any(times < 0) or np.any(np.diff(times) < 0):
        raise ValueError(f"times must be non-negative and non-decreasing, got {times}.")
    steps = np.rint(times / dt).astype(np.int64)
    if not np.allclose(steps * dt, times, rtol=1e-9, atol=1e-9 * max(1.0, times.max())):
        raise ValueError(
            f"times must be integer multiples of dt={dt}; got {times}. "
            "Choose dt so that every record time is a whole number of steps."
        )
    return np.diff(np.concatenate([[0], steps]))


def _record(stepper, u0, increments):
    """`record` with the step counts between records given (may be traced)."""
    check, to_state, step_state, from_state = _parts(stepper)
    check(u0)

    def body(state, count):
        state = _fori(step_state, count, state)
        return state, from_state(state)

    return jax.lax.scan(body, to_state(u0), increments)[1]


def record(
    stepper, u0: Float[Array, " channels *grid"], times: Sequence[float] | np.ndarray
) -> Float[Array, "n_times channels *grid"]:
    """The fields at `times` (t = 0 at `u0`), by `lax.scan` over the gaps between
    records and `lax.fori_loop` over the steps of each gap.

    **Arguments:**

    - `stepper`: an [`AbstractStepper`][solvers.stepping.AbstractStepper] (its
      `dt` must be concrete).
    - `u0`: the initial field `(channels, *grid)`.
    - `times`: non-decreasing times, each an integer multiple of `stepper.dt`
      (t = 0 gives `u0` after one state round trip).

    **Returns:** `(len(times), channels, *grid)`.
    """
    dt = getattr(stepper, "dt", None)
    if dt is None or isinstance(dt, jax.core.Tracer):
        raise ValueError(
            "stepper must have a concrete time step `dt` for record (an AbstractStepper, "
            "not a plain function; close over it rather than passing it traced through "
            "jax.jit)."
        )
    increments = record_increments(times, dt)
    return _record(stepper, u0, jnp.asarray(increments))
