r"""Fourier fields: random Fourier features, exact periodic embeddings, and a
linear Fourier basis.

- [`FourierFeatureMLP`][sciml.insr.FourierFeatureMLP]: `γ(x) = [cos 2πBx, sin 2πBx]`
  with fixed `B ~ N(0, σ²)` (Tancik et al. 2020), then a tanh MLP.
- [`PeriodicEmbedding`][sciml.insr.PeriodicEmbedding]: wraps any field so that
  it is exactly periodic on a box: `x ↦ f([cos 2π(x−lo)/L, sin 2π(x−lo)/L])`.
- [`FourierBasis`][sciml.insr.FourierBasis]: `u(x) = c₀ + Σₘ aₘ cos kₘ(x−lo) +
  bₘ sin kₘ(x−lo)`, `kₘ = 2πm/L`, linear in its coefficients (in `d`
  dimensions: the tensor product of the 1-D features). With it a
  per-step least-squares problem of a linear PDE is linear and exact, so the
  integrators can be tested against closed-form amplification factors.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import equinox as eqx
import jax
import jax.numpy as jnp
from jaxtyping import Array, Float, PRNGKeyArray

from .._checks import check_float_dtype, check_positive_finite, check_positive_int


def fourier_features(
    x: Float[Array, ""], n_modes: int, lower: float, upper: float
) -> Float[Array, " n_features"]:
    """`[1, cos k₁(x−lo), …, cos k_M(x−lo), sin k₁(x−lo), …, sin k_M(x−lo)]`,
    `kₘ = 2πm/(upper − lower)`, for one scalar `x`."""
    k = 2 * jnp.pi * jnp.arange(1, n_modes + 1, dtype=x.dtype) / (upper - lower)
    phase = k * (x - lower)
    return jnp.concatenate([jnp.ones((1,), x.dtype), jnp.cos(phase), jnp.sin(phase)])


def _check_box(lower: float, upper: float) -> None:
    if not (math.isfinite(lower) and math.isfinite(upper) and upper > lower):
        raise ValueError(f"need finite `lower` < `upper`, got lower={lower!r}, upper={upper!r}.")


class FourierBasis(eqx.Module):
    """A field linear in its weights: `(in_size,) -> (out_size,)`,
    `u(x) = coefficients @ φ(x)`, with `φ = fourier_features(x₀)` in 1-D and the
    flattened (row-major) outer product `φ(x₀) ⊗ φ(x₁) ⊗ …` of the 1-D
    features in `d` dimensions (period `upper − lower` in every direction).

    **Arguments:**

    - `n_modes`: the number `M` of cosine / sine pairs per direction
      (`(2M + 1)^d` coefficients per output).
    - `lower`, `upper`: the period is `upper − lower`.
    - `out_size`: field dimension.
    - `in_size`: point dimension `d` (default 1).
    - `coefficients`: `(out_size, (2M+1)^d)` initial coefficients, ordered as
      above (default zeros).
    - `dtype`: dtype of default coefficients.
    """

    coefficients: Float[Array, "out_size n_coefficients"]
    n_modes: int = eqx.field(static=True)
    lower: float = eqx.field(static=True)
    upper: float = eqx.field(static=True)
    in_size: int = eqx.field(static=True)

    def __init__(
        self,
        n_modes: int,
        lower: float,
        upper: float,
        *,
        out_size: int = 1,
        in_size: int = 1,
        coefficients: Any = None,
        dtype=None,
    ):
        self.n_modes = check_positive_int("n_modes", n_modes)
        out_size = check_positive_int("out_size", out_size)
        self.in_size = check_positive_int("in_size", in_size)
        _check_box(lower, upper)
        self.lower, self.upper = float(lower), float(upper)
        shape = (out_size, (2 * self.n_modes + 1) ** self.in_size)
        if coefficients is None:
            coefficients = jnp.zeros(shape, check_float_dtype("dtype", dtype))
        coefficients = jnp.asarray(coefficients)
        if coefficients.shape != shape:
            raise ValueError(f"`coefficients` must have shape {shape}, got {coefficients.shape}.")
        self.coefficients = coefficients

    def __call__(self, x: Float[Array, " in_size"]) -> Float[Array, " out_size"]:
        """The field at one point `x` `(in_size,)`; returns `(out_size,)`."""
        features = fourier_features(x[0], self.n_modes, self.lower, self.upper)
        for i in range(1, self.in_size):
            other = fourier_features(x[i], self.n_modes, self.lower, self.upper)
            features = jnp.outer(features, other).reshape(-1)
        return self.coefficients @ features.astype(self.coefficients.dtype)


class PeriodicEmbedding(eqx.Module):
    """Makes `field` exactly periodic on the box `[lower, upper]^d`:
    `x ↦ field([cos θ, sin θ])`, `θ = 2π(x − lower)/(upper − lower)` (so
    `field` takes `2d` inputs).

    **Arguments:** `field`, any field on `2d` inputs (e.g. a `SIREN(2, C)` for
    `d = 1`); `lower`, `upper`, the box (scalars).
    """

    field: Any
    lower: float = eqx.field(static=True)
    upper: float = eqx.field(static=True)

    def __init__(self, field: Any, lower: float, upper: float):
        _check_box(lower, upper)
        self.field, self.lower, self.upper = field, float(lower), float(upper)

    def __call__(self, x: Float[Array, " d"]) -> Float[Array, " out_size"]:
        """The field at one point `x` `(d,)`."""
        theta = 2 * jnp.pi * (x - self.lower) / (self.upper - self.lower)
        return self.field(jnp.concatenate([jnp.cos(theta), jnp.sin(theta)]))


class FourierFeatureMLP(eqx.Module):
    """An MLP on random Fourier features: `(in_size,) -> (out_size,)`.

    `γ(x) = [cos 2πBx, sin 2πBx]`, `B ~ N(0, scale²)` of shape
    `(n_features, in_size)`, held fixed (outside the gradient, so its Jacobian
    columns are zero), then `eqx.nn.MLP` with tanh activations.

    **Arguments:** `in_size`, `out_size`; `n_features`; `scale` (`σ`, in
    cycles per unit length); `width`, `depth` of the MLP; `dtype`; `key`.
    """

    frequencies: Float[Array, "n_features in_size"]
    mlp: eqx.nn.MLP

    def __init__(
        self,
        in_size: int,
        out_size: int,
        *,
        n_features: int = 16,
        scale: float = 1.0,
        width: int = 32,
        depth: int = 2,
        dtype=None,
        key: PRNGKeyArray,
    ):
        in_size = check_positive_int("in_size", in_size)
        n_features = check_positive_int("n_features", n_features)
        check_positive_finite("scale", scale)
        dtype = check_float_dtype("dtype", dtype)
        kb, km = jax.random.split(key)
        self.frequencies = scale * jax.random.normal(kb, (n_features, in_size), dtype)
        self.mlp = eqx.nn.MLP(
            2 * n_features, out_size, width, depth, activation=jnp.tanh, dtype=dtype, key=km
        )

    def __call__(self, x: Float[Array, " in_size"]) -> Float[Array, " out_size"]:
        """The field at one point `x` `(in_size,)`."""
        z = 2 * jnp.pi * jax.lax.stop_gradient(self.frequencies) @ x
        return self.mlp(jnp.concatenate([jnp.cos(z), jnp.sin(z)]))


class FunctionField(eqx.Module):
    """Any `fn(params, x)` as a field: `x ↦ fn(params, x)`; the unknowns are
    the floating-point arrays in `params`.

    **Arguments:** `fn`, a function `(params, (d,)) -> (C,)`; `params`, a pytree.
    """

    fn: Callable[[Any, Array], Array] = eqx.field(static=True)
    params: Any

    def __call__(self, x: Float[Array, " d"]) -> Float[Array, " out_size"]:
        """The field at one point `x` `(d,)`."""
        return self.fn(self.params, x)
