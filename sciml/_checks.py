"""Argument checks shared across sciml: one idiom each for choices, positive
integers, finite arrays and the default floating dtype. Each raises a
`ValueError` that names the argument, the accepted values and what was given.

Non-finite policy (one for the whole package): arrays that reach a public
entry point as concrete values (eager calls) are checked with `check_finite`;
inside `jit`/`vmap` the check is skipped, so compiled layers carry no
host callback. `sciml.training.fit` checks each batch once, outside the
compiled step."""

from __future__ import annotations

import numbers
from collections.abc import Iterable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np


def check_choice(name: str, value: Any, accepted: Iterable[Any]) -> Any:
    """Returns `value` if it is one of `accepted`; raises naming `name` otherwise."""
    accepted = tuple(accepted)
    if value not in accepted:
        raise ValueError(f"`{name}` must be one of {accepted}, got {value!r}.")
    return value


def check_positive_int(name: str, value: Any, *, allow_none: bool = False) -> int | None:
    """Returns `value` as an `int` if it is an integer >= 1 (not a bool, not a
    float such as `2.5` or `2.0`); `None` passes when `allow_none`."""
    if value is None and allow_none:
        return None
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < 1:
        expected = "a positive integer" + (" or None" if allow_none else "")
        raise ValueError(f"`{name}` must be {expected}, got {value!r}.")
    return int(value)


def default_float_dtype(dtype: Any = None) -> jnp.dtype:
    """`dtype` if given, else `float64` when `jax_enable_x64` is on and
    `float32` otherwise."""
    if dtype is not None:
        return jnp.dtype(dtype)
    return jnp.dtype(jnp.float64 if jax.config.jax_enable_x64 else jnp.float32)


def default_complex_dtype() -> jnp.dtype:
    """`complex128` when `jax_enable_x64` is on, `complex64` otherwise."""
    return jnp.dtype(jnp.complex128 if jax.config.jax_enable_x64 else jnp.complex64)


def check_finite(name: str, value: Any) -> Any:
    """Returns `value` if every entry is finite; raises a `ValueError` naming
    `name` (with the count of NaN and Inf entries) otherwise.

    Traced values (inside `jit`, `vmap`, `grad`) pass unchecked: see the
    module docstring for the policy. Integer and boolean arrays always pass.
    """
    if isinstance(value, jax.core.Tracer):
        return value
    dtype = getattr(value, "dtype", None)
    if dtype is None:
        dtype = np.asarray(value).dtype
    if not (jnp.issubdtype(dtype, jnp.floating) or jnp.issubdtype(dtype, jnp.complexfloating)):
        return value
    xp = np if isinstance(value, np.ndarray | np.generic | float | complex) else jnp
    # a concrete array met while tracing (a constant inside `jit`) is checked now,
    # not staged into the traced computation
    with jax.ensure_compile_time_eval():
        finite = xp.isfinite(value)
        if bool(finite.all()):
            return value
        n_nan = int(xp.isnan(value).sum())
        n_bad = int((~finite).sum())
    raise ValueError(
        f"`{name}` must be finite, got {n_nan} NaN and {n_bad - n_nan} infinite "
        f"entries (of {int(np.prod(np.shape(value)))})."
    )


def check_positive_finite(name: str, value: Any) -> Any:
    """Returns `value` if every entry is finite and `> 0` (a scalar or an array,
    e.g. a time step); raises a `ValueError` naming `name` otherwise.

    Traced values (inside `jit`, `vmap`, `grad`) pass unchecked, as in
    `check_finite`.
    """
    if isinstance(value, jax.core.Tracer):
        return value
    array = np.asarray(value)
    if array.dtype == object or not (
        np.issubdtype(array.dtype, np.floating) or np.issubdtype(array.dtype, np.integer)
    ):
        raise TypeError(f"`{name}` must be a positive real number, got {value!r}.")
    if array.dtype == bool or not bool(np.all(np.isfinite(array) & (array > 0))):
        shown = value if array.size == 1 else f"an array with min {np.nanmin(array)!r}"
        raise ValueError(f"`{name}` must be finite and > 0, got {shown}.")
    return value
