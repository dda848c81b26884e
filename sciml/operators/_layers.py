"""Pointwise layers of FNO: 1×1 convolutions, channel MLPs, skips, norms, embedding.

All act on one sample `(channels, *grid)`, or `(*grid, channels)` when called
with `channels_last=True` (the layout `FNO` computes in: its 1×1 convolutions
are then plain matrix products of the contiguous channel rows, with no
transposes around them under `vmap`).
"""

import math
import numbers
from collections.abc import Callable, Sequence

import equinox as eqx
import jax
import jax.numpy as jnp
from jaxtyping import Array, Float, PRNGKeyArray

from .._checks import check_choice, check_float_dtype
from .._custom_types import Real


SKIPS = ("linear", "soft-gating", "identity", "none")
NORMS = (None, "instance", "group")


def check_activation(name: str, activation) -> None:
    """Refuses an activation that is not callable (a name such as `"gelu"`)."""
    if not callable(activation):
        raise TypeError(
            f"`{name}` must be a callable such as `jax.nn.gelu` or `jax.nn.relu`, got "
            f"{activation!r}."
        )


_SQRT_HALF = 0.7071067811865476  # 1/√2
_INV_SQRT_2PI = 0.3989422804014327  # 1/√(2π)


@jax.custom_jvp
def gelu_exact(x: Float[Array, " ..."]) -> Float[Array, " ..."]:
    """The exact GELU `x Φ(x)`, `Φ(x) = (1 + erf(x/√2))/2` the standard normal CDF.

    PyTorch's and neuraloperator's default GELU; the same function as
    `jax.nn.gelu(x, approximate=False)`, with its derivative `Φ(x) + x φ(x)`
    written out so that a train step evaluates `erf` once per element and
    keeps `Φ` for the backward pass instead of differentiating through it
    (an FNO train step ran 2–13 % faster than with jax's form on a 2-core
    CPU; docs/benchmarks/operators.md). `jax.nn.gelu`'s default, the tanh
    approximation, differs from it by up to 4.7e-4.
    """
    return x * _normal_cdf(x)


def _normal_cdf(x):
    return 0.5 + 0.5 * jax.lax.erf(x * _SQRT_HALF)


@gelu_exact.defjvp
def _gelu_exact_jvp(primals, tangents):
    (x,), (dx,) = primals, tangents
    cdf = _normal_cdf(x)
    pdf = _INV_SQRT_2PI * jnp.exp(-0.5 * x * x)
    return x * cdf, dx * (cdf + x * pdf)


class PointwiseLinear(eqx.Module):
    """A 1×1 convolution: `y[o, x] = Σ_i A[o, i] v[i, x] + b[o]`.

    Initialised like `torch.nn.Conv*d`: entries uniform in `±1/sqrt(in_channels)`.

    **Arguments:** `in_channels`, `out_channels`, `use_bias`, `dtype`, keyword-only `key`.
    """

    weight: Float[Array, " out_channels in_channels"]
    bias: Float[Array, " out_channels"] | None

    def __init__(
        self, in_channels: int, out_channels: int, *, use_bias: bool = True, dtype=None, key
    ):
        dtype = check_float_dtype("dtype", dtype)
        bound = 1.0 / math.sqrt(in_channels)
        n_weight = out_channels * in_channels
        # one random draw for weight and bias (one kernel to compile, not two)
        flat = jax.random.uniform(
            key, (n_weight + out_channels,), dtype, minval=-bound, maxval=bound
        )
        self.weight = flat[:n_weight].reshape(out_channels, in_channels)
        self.bias = flat[n_weight:] if use_bias else None

    def __call__(
        self, x: Float[Array, " ..."], *, channels_last: bool = False
    ) -> Float[Array, " ..."]:
        if channels_last:
            y = x @ self.weight.T
        else:
            y = jnp.tensordot(self.weight, x, axes=1)
        if self.bias is not None:
            y = y + _per_channel(self.bias, x.ndim, channels_last)
        return y


def _per_channel(v: Array, ndim: int, channels_last: bool) -> Array:
    """A per-channel vector shaped to broadcast against a sample of `ndim` axes."""
    return v if channels_last else v.reshape((-1,) + (1,) * (ndim - 1))


class ChannelMLP(eqx.Module):
    """Pointwise MLP over channels: `n_layers` 1×1 convolutions with `activation` between.

    **Arguments:** `in_channels`, `out_channels`, `hidden_channels`, `n_layers`
    (>= 1; 1 is a single linear map), `activation`, `dtype`, keyword-only `key`.
    """

    layers: tuple[PointwiseLinear, ...]
    activation: Callable = eqx.field(static=True)

    def __init__(
        self,
        in_channels: int,
        out_channels: int,
        hidden_channels: int,
        n_layers: int = 2,
        *,
        activation: Callable = jax.nn.gelu,
        dtype=None,
        key: PRNGKeyArray,
    ):
        if n_layers < 1:
            raise ValueError(f"ChannelMLP `n_layers` must be >= 1, got {n_layers}.")
        check_activation("activation", activation)
        dtype = check_float_dtype("dtype", dtype)
        sizes = [in_channels] + [hidden_channels] * (n_layers - 1) + [out_channels]
        keys = jax.random.split(key, n_layers)
        self.layers = [
            PointwiseLinear(a, b, dtype=dtype, key=k)
            for a, b, k in zip(sizes[:-1], sizes[1:], keys)
        ]
        self.activation = activation

    def __call__(
        self, x: Float[Array, " ..."], *, channels_last: bool = False
    ) -> Float[Array, " ..."]:
        for layer in self.layers[:-1]:
            x = self.activation(layer(x, channels_last=channels_last))
        return self.layers[-1](x, channels_last=channels_last)


class SoftGating(eqx.Module):
    """Per-channel scaling `y = w ⊙ v` (+ bias), `w` initialised to 1."""

    weight: Float[Array, " channels"]
    bias: Float[Array, " channels"] | None

    def __init__(self, channels: int, *, use_bias: bool = False, dtype=None):
        dtype = check_float_dtype("dtype", dtype)
        self.weight = jnp.ones((channels,), dtype)
        self.bias = jnp.ones((channels,), dtype) if use_bias else None

    def __call__(
        self, x: Float[Array, " ..."], *, channels_last: bool = False
    ) -> Float[Array, " ..."]:
        y = _per_channel(self.weight, x.ndim, channels_last) * x
        return y if self.bias is None else y + _per_channel(self.bias, x.ndim, channels_last)


class Identity(eqx.Module):
    def __call__(self, x, *, channels_last: bool = False):
        return x


class Zero(eqx.Module):
    """The "none" skip: contributes nothing."""

    def __call__(self, x, *, channels_last: bool = False):
        return jnp.zeros_like(x)


def make_skip(kind: str, in_channels: int, out_channels: int, *, dtype=None, key) -> eqx.Module:
    """Skip connection: `"linear"` (1×1 conv, no bias), `"soft-gating"`, `"identity"`, `"none"`."""
    check_choice("skip", kind, SKIPS)
    if kind == "linear":
        return PointwiseLinear(in_channels, out_channels, use_bias=False, dtype=dtype, key=key)
    if kind in ("soft-gating", "identity") and in_channels != out_channels:
        raise ValueError(f"a {kind!r} skip needs in_channels == out_channels.")
    if kind == "soft-gating":
        return SoftGating(in_channels, dtype=dtype)
    if kind == "identity":
        return Identity()
    return Zero()  # "none"


class InstanceNorm(eqx.Module):
    """Normalises every channel over the grid (no learned affine map), eps 1e-5."""

    eps: Real = eqx.field(static=True, default=1e-5)

    def __call__(
        self, x: Float[Array, " ..."], *, channels_last: bool = False
    ) -> Float[Array, " ..."]:
        axes = tuple(range(x.ndim - 1)) if channels_last else tuple(range(1, x.ndim))
        mean = jnp.mean(x, axis=axes, keepdims=True)
        var = jnp.var(x, axis=axes, keepdims=True)
        return (x - mean) * jax.lax.rsqrt(var + self.eps)


class GroupNorm(eqx.Module):
    """Group norm with one group (all channels and grid points), per-channel affine map."""

    weight: Float[Array, " channels"]
    bias: Float[Array, " channels"]
    eps: Real = eqx.field(static=True, default=1e-5)

    def __init__(self, channels: int, *, eps: Real = 1e-5, dtype=None):
        dtype = check_float_dtype("dtype", dtype)
        self.weight = jnp.ones((channels,), dtype)
        self.bias = jnp.zeros((channels,), dtype)
        self.eps = eps

    def __call__(
        self, x: Float[Array, " ..."], *, channels_last: bool = False
    ) -> Float[Array, " ..."]:
        mean, var = jnp.mean(x), jnp.var(x)
        y = (x - mean) * jax.lax.rsqrt(var + self.eps)
        weight, bias = (_per_channel(v, x.ndim, channels_last) for v in (self.weight, self.bias))
        return y * weight + bias


def make_norm(kind: str | None, channels: int, *, dtype=None) -> eqx.Module | None:
    check_choice("norm", kind, NORMS)
    if kind is None:
        return None
    if kind == "instance":
        return InstanceNorm()
    return GroupNorm(channels, dtype=dtype)  # "group"


def grid_embedding(x: Float[Array, " channels *grid"]) -> Float[Array, " channels_out *grid"]:
    """Appends `d` coordinate channels `x_i = j / N_i`, `j = 0..N_i−1` (on [0, 1))."""
    grid = x.shape[1:]
    coords = jnp.meshgrid(*[jnp.arange(n, dtype=x.dtype) / n for n in grid], indexing="ij")
    return jnp.concatenate([x, jnp.stack(coords)], axis=0)


def padding_widths(domain_padding: Real | Sequence[Real] | None, grid: Sequence[int]) -> tuple:
    """Zero-padding `round(f_i · N_i)` per axis for `domain_padding` f, each
    fraction in [0, 1] (a `ValueError` names `domain_padding` otherwise)."""
    if domain_padding is None:
        return (0,) * len(grid)
    scalar = isinstance(domain_padding, numbers.Real)
    items = (domain_padding,) if scalar else tuple(domain_padding)
    for f in items:
        if isinstance(f, bool) or not isinstance(f, numbers.Real) or not 0 <= f <= 1:
            raise ValueError(
                "`domain_padding` must be a fraction in [0, 1] of each grid axis (or one per "
                f"axis; neuraloperator uses 0.125 to 0.25), got {domain_padding!r}."
            )
    fractions = (float(domain_padding),) * len(grid) if scalar else tuple(map(float, items))
    if len(fractions) != len(grid):
        raise ValueError(
            f"`domain_padding` needs one fraction or {len(grid)} (one per axis), got {domain_padding!r}."
        )
    return tuple(int(round(f * n)) for f, n in zip(fractions, grid))


def pad_domain(x: Array, widths: Sequence[int], *, channels_last: bool = False) -> Array:
    """Symmetric zero padding of the grid axes of `(channels, *grid)` (or
    `(*grid, channels)`)."""
    grid = [(w, w) for w in widths]
    return jnp.pad(x, grid + [(0, 0)] if channels_last else [(0, 0)] + grid)


def unpad_domain(x: Array, widths: Sequence[int], *, channels_last: bool = False) -> Array:
    """Crops what `pad_domain` added."""
    first = 0 if channels_last else 1
    crop = tuple(slice(w, x.shape[first + i] - w) for i, w in enumerate(widths))
    return x[crop] if channels_last else x[(slice(None), *crop)]
