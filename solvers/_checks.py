"""The non-finite policy of `solvers` (the same as `sciml`'s, which this package
must not import): arrays reaching a public entry point (`solve`, `advance`, a
stepper called eagerly) as concrete values are checked here, and a NaN or an
infinity raises a `ValueError` naming the argument. Traced values (inside
`jit`, `vmap`, `grad`) pass unchecked, so the compiled time loops carry no host
callback: a check costs one reduction over the input, once per call.
"""

from __future__ import annotations

import reprlib
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np


def check_finite(name: str, value: Any) -> Any:
    """Returns `value` if every entry is finite; raises a `ValueError` naming
    `name` (with the count of NaN and infinite entries) otherwise.

    Traced values pass unchecked; integer and boolean arrays always pass; any
    other dtype (object, string) raises a `TypeError` naming `name`.
    """
    if isinstance(value, jax.core.Tracer):
        return value
    dtype = getattr(value, "dtype", None)
    if dtype is None:
        value = np.asarray(value)
        dtype = value.dtype
    if not (jnp.issubdtype(dtype, jnp.floating) or jnp.issubdtype(dtype, jnp.complexfloating)):
        if getattr(dtype, "kind", "O") not in "biu":  # `[1.0, None]`: dtype object
            raise TypeError(
                f"`{name}` must be a numeric array (floats, integers or booleans), got an "
                f"array of dtype {dtype}: {reprlib.repr(value)}."
            )
        return value
    xp = np if isinstance(value, np.ndarray | np.generic) else jnp
    finite = xp.isfinite(value)
    if bool(finite.all()):
        return value
    n_nan = int(xp.isnan(value).sum())
    n_bad = int((~finite).sum())
    raise ValueError(
        f"`{name}` must be finite, got {n_nan} NaN and {n_bad - n_nan} infinite "
        f"entries (of {int(np.prod(np.shape(value)))}); check the data that built it."
    )
