"""What a dtype can reach, and what a failed solve most likely means.

A Krylov solve in finite precision cannot push the **true** residual
`‖b − A x‖` much below `ε · κ(A) · ‖b‖` (ε the machine epsilon of the dtype,
κ the condition number): the recurrence residual keeps shrinking, but the
true one stalls on round-off. In float32 (ε ≈ 1.2e-7) that floor is around
1e-6 – 1e-5 for a Poisson matrix of a few thousand cells, so plain CG at the
default `rtol=1e-6` runs to `max_steps` (measured: a 16² scene stalls at
2.2e-6, a 64² scene at 1.1e-5; float64 reaches 1e-6 in tens of steps). `solve`
therefore warns at the start when `rtol` is below `REACHABLE_EPS · ε` of the
input's dtype, and its failure messages name the likely cause (precision, an
operator that is not SPD, a bad direction) rather than "increase max_steps".
"""

from __future__ import annotations

import warnings

import jax
import jax.numpy as jnp

from ..solution import RESULTS


REACHABLE_EPS = 100  # a relative residual below this many ε of the dtype is not promised


class PrecisionWarning(UserWarning):
    """A tolerance below what the input's floating-point type can reach."""


def reachable_rtol(dtype) -> float:
    """The smallest relative residual a solve in `dtype` is expected to reach: `100 ε`."""
    return REACHABLE_EPS * float(jnp.finfo(dtype).eps)


def _remedies(dtype, rtol) -> str:
    loosen = f"loosen `rtol` to {reachable_rtol(dtype):.1e} or more (got {rtol:g})"
    if jnp.dtype(dtype).itemsize >= 8:
        return loosen + ", or give an `atol`"
    return (
        "enable float64 (`jax.config.update('jax_enable_x64', True)` before creating arrays, "
        f"and pass a float64 `b`), or {loosen}"
    )


def check_tolerance(routine: str, rtol, atol, dtype, *, stacklevel: int = 3) -> None:
    """Warns (`PrecisionWarning`) when `rtol` is below `reachable_rtol(dtype)` and
    `atol` does not stop the solve first; names the dtype and the two remedies.
    `stacklevel` as `warnings.warn`'s, counted from here (3: the routine's caller)."""
    try:
        rtol, atol = float(rtol), float(atol)
    except (TypeError, jax.errors.ConcretizationTypeError):  # traced: nothing to say now
        return
    if atol > 0 or not 0 < rtol:
        return
    if rtol < reachable_rtol(dtype):
        warnings.warn(
            f"{routine}: rtol={rtol:g} is below what {jnp.dtype(dtype).name} can reach "
            f"(about {reachable_rtol(dtype):.1e}: the true residual stalls on round-off near "
            f"eps·cond(A)), so the solve will likely run to max_steps. To fix: "
            f"{_remedies(dtype, rtol)}.",
            PrecisionWarning,
            stacklevel=stacklevel,
        )


def failure_messages(routine: str, rtol, max_steps: int, dtype) -> tuple[str, ...]:
    """`RESULTS`' messages, with `max_steps_reached` and `breakdown` saying what
    most likely went wrong in a conjugate-direction solve in `dtype`."""
    messages = list(RESULTS._index_to_message)
    dtype = jnp.dtype(dtype)
    causes = []
    if rtol < 10 * reachable_rtol(dtype):  # near the floor of the dtype
        causes.append(
            f"precision: in {dtype.name} the true residual stalls near eps·cond(A) (about "
            f"{reachable_rtol(dtype):.1e} relative at best); if stats['residual_history'] "
            f"flattens out above rtol, {_remedies(dtype, rtol)}"
        )
    causes += [
        "a poor direction generator for this system (a network trained at another "
        "resolution or on other scenes): compare with direction_fn=lambda r: r (plain CG)",
        "a singular A with b outside its range: pass null_space",
        "only when stats['residual_history'] is still falling steadily: too few steps, "
        "raise max_steps",
    ]
    listed = "; ".join(f"({i}) {cause}" for i, cause in enumerate(causes, start=1))
    messages[RESULTS.max_steps_reached._value] = (
        f"{routine}: the maximum number of solver steps (max_steps={max_steps}) was reached "
        f"before the residual met rtol={rtol:g}. Likely causes: {listed}. Pass throw=False "
        "to read solution.stats."
    )
    messages[RESULTS.breakdown._value] = (
        f"{routine}: breakdown: the search direction is zero or orthogonal to the residual "
        "(pᵀr = 0). Likely causes: (1) a bad direction: an untrained or wrongly scaled "
        "network, a preconditioner that is not SPD, a direction_fn that returns zeros; "
        f"(2) precision: the residual already sits at round-off for {dtype.name}."
    )
    messages[RESULTS.nonfinite_input._value] = (
        f"{routine}: `b` or `x0` contains NaN or Inf; the solve needs finite input."
    )
    return tuple(messages)
