"""Argument checks shared across sciml: integers, real numbers, finite arrays,
choices, pairs and PRNG keys, plus the default floating dtype. Each raises with
one message format, "`name` must be EXPECTED, got VALUE.", naming the argument,
what was given and what is accepted.

This module imports no JAX: solver processes and the online worker, which run
without it, use the same checks. The array checks recognise JAX values only
when JAX is already imported (a value cannot be a JAX array otherwise);
`default_float_dtype` and `default_complex_dtype` import it when called.

Non-finite policy (one for the whole package): arrays that reach a public
entry point as concrete values (eager calls) are checked with `check_finite`;
inside `jit`/`vmap` the check is skipped, so compiled layers carry no
host callback. `sciml.training.fit` checks each batch once, outside the
compiled step. The state-space layers (`sciml.ssm.S4D`, `S5`) opt in to a
compiled check with one flag, `check_finite="always"` (an `eqx.error_if`)."""

from __future__ import annotations

import math
import numbers
import reprlib
import sys
import warnings
from collections.abc import Iterable
from typing import Any

import numpy as np


def _fail(name: str, expected: str, value: Any, error: type[Exception] = ValueError):
    raise error(f"`{name}` must be {expected}, got {value!r}.")


def _bounds(minimum: Any, maximum: Any, *, strict: bool = False) -> str:
    if minimum is not None and maximum is not None:
        return f" in [{minimum}, {maximum}]"
    if minimum is not None:
        return f" {'>' if strict else '>='} {minimum}"
    if maximum is not None:
        return f" <= {maximum}"
    return ""


def _jax():
    """The JAX module if it is imported, else None (then no value is a JAX value)."""
    return sys.modules.get("jax")


def is_int(value: Any) -> bool:
    """Whether `value` is an integer (Python or numpy), not a bool."""
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


def check_choice(name: str, value: Any, accepted: Iterable[Any]) -> Any:
    """Returns `value` if it is one of `accepted`; raises naming `name` otherwise."""
    accepted = tuple(accepted)
    if value not in accepted:
        _fail(name, f"one of {accepted}", value)
    return value


def check_int(
    name: str,
    value: Any,
    *,
    minimum: int | None = None,
    maximum: int | None = None,
    allow_none: bool = False,
) -> int | None:
    """Returns `value` as an `int` if it is an integer (not a bool, not a float
    such as `2.0`) in `[minimum, maximum]` (either bound may be None); `None`
    passes when `allow_none`."""
    if value is None and allow_none:
        return None
    if (
        not is_int(value)
        or (minimum is not None and value < minimum)
        or (maximum is not None and value > maximum)
    ):
        _fail(name, "an integer" + _bounds(minimum, maximum) + " or None" * allow_none, value)
    return int(value)


def check_positive_int(name: str, value: Any, *, allow_none: bool = False) -> int | None:
    """Returns `value` as an `int` if it is an integer >= 1 (not a bool, not a
    float such as `2.5` or `2.0`); `None` passes when `allow_none`."""
    if value is None and allow_none:
        return None
    if not is_int(value) or value < 1:
        _fail(name, "a positive integer" + " or None" * allow_none, value)
    return int(value)


def _real_bound(minimum: numbers.Real | None, positive: bool) -> tuple[numbers.Real | None, str]:
    if positive and minimum is not None:
        raise ValueError("give `minimum` or `positive`, not both.")
    bound = 0 if positive else minimum
    return bound, _bounds(bound, None, strict=positive)


def _as_real(value: Any) -> float | None:
    """`value` as a float if it is a real scalar (Python, numpy, or a 0-d
    integer or floating array; not a bool), else None."""
    if isinstance(value, bool) or isinstance(value, np.bool_):
        return None
    if isinstance(value, numbers.Real):
        return float(value)
    dtype = getattr(value, "dtype", None)
    if getattr(value, "shape", None) == () and dtype is not None and dtype.kind in "iuf":
        return float(value)
    return None


def _is_real(value: Any, bound: numbers.Real | None, positive: bool) -> bool:
    value = _as_real(value)
    return (
        value is not None
        and math.isfinite(value)
        and (bound is None or (value > bound if positive else value >= bound))
    )


def check_real(
    name: str,
    value: Any,
    *,
    minimum: numbers.Real | None = None,
    positive: bool = False,
    allow_none: bool = False,
) -> float | None:
    """Returns `value` as a `float` if it is a finite real number (Python or
    numpy scalar, not a bool), `>= minimum` when given and `> 0` when
    `positive`; `None` passes when `allow_none`."""
    if value is None and allow_none:
        return None
    bound, text = _real_bound(minimum, positive)
    if not _is_real(value, bound, positive):
        _fail(name, "a finite number" + text + " or None" * allow_none, value)
    return _as_real(value)


def check_pair(
    name: str, value: Any, *, minimum: numbers.Real | None = None, positive: bool = False
) -> tuple[float, float]:
    """Returns `value` as a pair of `float`s if it holds exactly two finite real
    numbers (each `>= minimum` when given, `> 0` when `positive`)."""
    bound, text = _real_bound(minimum, positive)
    try:
        pair = tuple(value)
    except TypeError:
        pair = ()
    if len(pair) != 2 or not all(_is_real(item, bound, positive) for item in pair):
        _fail(name, "a pair of finite numbers" + text, value)
    return _as_real(pair[0]), _as_real(pair[1])


def check_key(name: str, value: Any) -> Any:
    """Returns `value` if it is a JAX PRNG key: a typed key of shape `()`
    (`jax.random.key(0)`) or a raw `uint32` array of shape `(2,)`
    (`jax.random.PRNGKey(0)`); raises a `TypeError` naming `name` otherwise."""
    jax = _jax()
    arrays = (np.ndarray,) if jax is None else (np.ndarray, jax.Array)
    ok = False
    if isinstance(value, arrays):
        if jax is not None and jax.dtypes.issubdtype(value.dtype, jax.dtypes.prng_key):
            ok = value.shape == ()
        else:
            ok = value.dtype == np.uint32 and value.shape == (2,)
    if not ok:
        _fail(name, "a JAX PRNG key such as `jax.random.key(0)`", value, TypeError)
    return value


def default_float_dtype(dtype: Any = None) -> np.dtype:
    """`dtype` if given, else `float64` when `jax_enable_x64` is on and
    `float32` otherwise."""
    import jax.numpy as jnp

    if dtype is not None:
        return jnp.dtype(dtype)
    return jnp.dtype(jnp.float64 if _jax().config.jax_enable_x64 else jnp.float32)


def _caller_level() -> int:
    """The `stacklevel` of the first caller outside sciml and equinox (a
    module's constructor runs inside equinox's metaclass)."""
    frame, level = sys._getframe(2), 2
    while frame is not None and frame.f_globals.get("__name__", "").split(".")[0] in (
        "sciml",
        "equinox",
    ):
        frame, level = frame.f_back, level + 1
    return level


def check_float_dtype(name: str, dtype: Any = None) -> np.dtype:
    """`default_float_dtype(dtype)` if it is a real floating dtype; a `TypeError`
    naming `name` otherwise (an int, bool or complex parameter dtype).

    A 64-bit float while `jax_enable_x64` is off warns once, in these words,
    and gives `float32` (what JAX would build, with a warning per array).
    """
    import jax.numpy as jnp

    try:
        resolved = default_float_dtype(dtype)
    except TypeError:
        resolved = None
    if resolved is None or not jnp.issubdtype(resolved, jnp.floating):
        shown = dtype if resolved is None else resolved
        _fail(
            name, "a real floating dtype such as `jnp.float32` or `jnp.float64`", shown, TypeError
        )
    if resolved.itemsize == 8 and not _jax().config.jax_enable_x64:
        warnings.warn(
            f"`{name}={resolved}` needs 64-bit JAX: call "
            "`jax.config.update('jax_enable_x64', True)` at startup (or set "
            "JAX_ENABLE_X64=1); without it the parameters are float32.",
            UserWarning,
            stacklevel=_caller_level(),
        )
        resolved = jnp.dtype(jnp.float32)
    return resolved


def default_complex_dtype() -> np.dtype:
    """`complex128` when `jax_enable_x64` is on, `complex64` otherwise."""
    import jax.numpy as jnp

    return jnp.dtype(jnp.complex128 if _jax().config.jax_enable_x64 else jnp.complex64)


def _is_inexact(dtype: Any) -> bool:
    jax = _jax()
    if jax is None:
        return np.issubdtype(dtype, np.inexact)
    return jax.numpy.issubdtype(dtype, jax.numpy.inexact)  # includes bfloat16


def _is_tracer(value: Any) -> bool:
    jax = _jax()
    return jax is not None and isinstance(value, jax.core.Tracer)


def check_finite(name: str, value: Any) -> Any:
    """Returns `value` if every entry is finite; raises a `ValueError` naming
    `name` (with the count of NaN and Inf entries) otherwise.

    Traced values (inside `jit`, `vmap`, `grad`) pass unchecked: see the
    module docstring for the policy. Integer and boolean arrays always pass;
    any other dtype (object, string) raises a `TypeError` naming `name`.
    """
    if _is_tracer(value):
        return value
    dtype = getattr(value, "dtype", None)
    if dtype is None:
        dtype = np.asarray(value).dtype
    if not _is_inexact(dtype):
        if getattr(dtype, "kind", "O") not in "biu":  # `[1.0, None]`: dtype object
            raise TypeError(
                f"`{name}` must be a numeric array (floats, integers or booleans), got an "
                f"array of dtype {dtype}: {reprlib.repr(value)}."
            )
        return value
    jax = _jax()
    if jax is None or isinstance(value, np.ndarray | np.generic | float | complex):
        finite = np.isfinite(value)
        if bool(finite.all()):
            return value
        n_nan, n_bad = int(np.isnan(value).sum()), int((~finite).sum())
    else:
        # a concrete array met while tracing (a constant inside `jit`) is checked
        # now, not staged into the traced computation
        with jax.ensure_compile_time_eval():
            finite = jax.numpy.isfinite(value)
            if bool(finite.all()):
                return value
            n_nan, n_bad = int(jax.numpy.isnan(value).sum()), int((~finite).sum())
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
    if _is_tracer(value):
        return value
    array = np.asarray(value)
    if array.dtype == object or not (
        np.issubdtype(array.dtype, np.floating) or np.issubdtype(array.dtype, np.integer)
    ):
        raise TypeError(f"`{name}` must be a positive real number, got {value!r}.")
    if array.dtype == bool or not bool(np.all(np.isfinite(array) & (array > 0))):
        shown = value if array.size == 1 else f"an array with min {float(np.nanmin(array))}"
        raise ValueError(f"`{name}` must be finite and > 0, got {shown}.")
    return value
