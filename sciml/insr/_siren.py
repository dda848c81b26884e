r"""SIREN: a sine-activated MLP on one point (Sitzmann et al. 2020), as INSR uses it.

$$h_0 = x,\qquad h_{l} = \sin\!\big(\omega_0 (W_l h_{l-1} + b_l)\big)\ (l = 1..L),
\qquad f(x) = W_{L+1} h_L + b_{L+1}.$$

Initialisation (the INSR reference code): first layer `W ~ U(±1/fan_in)`, every
later layer including the output `W ~ U(±√(6/fan_in)/ω₀)`, all biases
`U(±1/√fan_in)` (the framework default, multiplied by `ω₀` inside the sine).
`ω₀ = 30` in every layer. With `width = 20`, `hidden_layers = 2` a 1-D scalar
field has the paper's 901 parameters.
"""

from __future__ import annotations

import math

import equinox as eqx
import jax
import jax.numpy as jnp
from jaxtyping import Array, Float, PRNGKeyArray

from .._checks import check_float_dtype, check_positive_finite, check_positive_int


def siren_weight_bound(fan_in: int, omega0: float, *, first: bool) -> float:
    """The half-width of the uniform weight initialisation of a SIREN layer:
    `1/fan_in` for the first layer, `√(6/fan_in)/ω₀` for the others."""
    return 1.0 / fan_in if first else math.sqrt(6.0 / fan_in) / omega0


class SIREN(eqx.Module):
    """A SIREN field `(in_size,) -> (out_size,)` with the paper's initialisation.

    **Arguments:**

    - `in_size`, `out_size`: the point and field dimensions.
    - `width`: hidden width (20 for the paper's 1-D advection).
    - `hidden_layers`: number of hidden `width × width` layers (2 in 1-D); the
      network has `hidden_layers + 2` linear layers.
    - `omega0`: the frequency factor `ω₀` of every sine (30).
    - `dtype`: parameter dtype (default: float64 with `jax_enable_x64`, else float32).
    - `key`: PRNG key.
    """

    layers: tuple[eqx.nn.Linear, ...]
    omega0: float = eqx.field(static=True)

    def __init__(
        self,
        in_size: int,
        out_size: int,
        *,
        width: int = 20,
        hidden_layers: int = 2,
        omega0: float = 30.0,
        dtype=None,
        key: PRNGKeyArray,
    ):
        in_size = check_positive_int("in_size", in_size)
        out_size = check_positive_int("out_size", out_size)
        width = check_positive_int("width", width)
        if (
            isinstance(hidden_layers, bool)
            or not isinstance(hidden_layers, int)
            or hidden_layers < 0
        ):
            raise ValueError(f"`hidden_layers` must be an integer >= 0, got {hidden_layers!r}.")
        check_positive_finite("omega0", omega0)
        dtype = check_float_dtype("dtype", dtype)
        sizes = [in_size] + [width] * (hidden_layers + 1) + [out_size]
        keys = jax.random.split(key, 2 * (len(sizes) - 1))
        layers = []
        for i, (fan_in, fan_out) in enumerate(zip(sizes[:-1], sizes[1:])):
            linear = eqx.nn.Linear(fan_in, fan_out, key=keys[2 * i], dtype=dtype)
            bound = siren_weight_bound(fan_in, omega0, first=i == 0)
            weight = jax.random.uniform(
                keys[2 * i + 1], (fan_out, fan_in), dtype, minval=-bound, maxval=bound
            )
            layers.append(eqx.tree_at(lambda lin: lin.weight, linear, weight))
        self.layers = tuple(layers)
        self.omega0 = float(omega0)

    @property
    def in_size(self) -> int:
        return self.layers[0].in_features

    @property
    def out_size(self) -> int:
        return self.layers[-1].out_features

    def __call__(self, x: Float[Array, " in_size"]) -> Float[Array, " out_size"]:
        """The field at one point `x` `(in_size,)`; returns `(out_size,)`."""
        h = x
        for layer in self.layers[:-1]:
            h = jnp.sin(self.omega0 * layer(h))
        return self.layers[-1](h)
