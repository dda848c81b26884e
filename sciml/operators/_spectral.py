"""Spectral convolution: the Fourier layer of FNO with dense or factorised weights.

For an input `v` of shape `(C_in, N_1, ..., N_d)`:

1. `v̂ = rfftn(v, norm="forward")` (divides by `∏N`, so the weight acts on
   resolution-independent Fourier coefficients);
2. keep a centred block of modes: along every axis but the last, the `m_i`
   frequencies `-(m_i//2), ..., m_i - m_i//2 - 1`; along the last (real-FFT)
   axis the first `m_d//2 + 1`. `n_modes` counts the *total* modes per axis,
   like `neuraloperator`;
3. `ŷ[o, k] = Σ_i v̂[i, k] W[i, o, k]` (separable: `ŷ[c, k] = v̂[c, k] W[c, k]`);
4. zero-fill to the output grid (any size: super-resolution), inverse FFT on the
   leading axes, zero the imaginary part of the DC and Nyquist columns of the
   real-FFT axis (so the result is the same on every FFT backend), inverse
   real FFT on the last axis, add a per-channel bias.

The transforms are pruned: steps 1 and 4 run the leading-axis FFTs on the kept
columns of the real-FFT axis only (`m_d//2 + 1` of `N_d//2 + 1`), since the
other columns are discarded (step 1) or zero (step 4). At 64² with 12 modes
that is 7 of 33 columns, and the FFT part of a layer's forward and backward
pass takes about 0.6 of the time of the full transforms; the result is the
same up to rounding.

With `transform="dft"` steps 1 and 4 are matrix products with the kept
frequencies only (`sciml.operators._dft`): the same result up to rounding,
several times faster on XLA's CPU backend at the mode counts FNOs use. The
default `"auto"` takes the products wherever every transformed axis keeps at
most `DFT_MAX_KEPT` modes, and FFTs otherwise.

The weight is stored in the centred order of step 2 (index `j` of a leading
axis is frequency `j - m//2`), as in `neuraloperator`.
"""

import math
from collections.abc import Sequence
from typing import Any, NamedTuple

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Complex, Float, PRNGKeyArray

from .._checks import check_choice, check_float_dtype
from .._custom_types import Real
from ._dft import dft_forward_modes, dft_inverse
from ._tensors import make_tensor


IMPLEMENTATIONS = ("factorized", "reconstructed")
TRANSFORMS = ("auto", "fft", "dft")
# "auto" uses matrix products where every axis keeps at most this many
# coefficients (measured faster than XLA's CPU FFT up to the full 64² grid,
# docs/benchmarks.md); beyond it an FFT's N log N wins on any backend
DFT_MAX_KEPT = 64
SPATIAL_LETTERS = "abcdefgh"


def kept_shape(n_modes: Sequence[int]) -> tuple[int, ...]:
    """Shape of the kept block of Fourier coefficients: `(*n_modes[:-1], n_modes[-1]//2 + 1)`."""
    n_modes = tuple(n_modes)
    return (*n_modes[:-1], n_modes[-1] // 2 + 1)


def check_modes_fit(n_modes: Sequence[int], grid: Sequence[int], name: str = "input") -> None:
    """Raises `ValueError` if the kept block does not fit on a grid of shape `grid`."""
    n_modes, grid = tuple(n_modes), tuple(grid)
    if len(grid) != len(n_modes):
        raise ValueError(
            f"the {name} has {len(grid)} spatial dims {grid} but `n_modes`={n_modes} has {len(n_modes)}."
        )
    for axis, (m, n) in enumerate(zip(n_modes[:-1], grid[:-1])):
        if m > n:
            raise ValueError(
                f"`n_modes`[{axis}]={m} is larger than the {name} grid size {n} along that axis; "
                f"accepted: n_modes[{axis}] <= {n}."
            )
    m, n = n_modes[-1], grid[-1]
    if m // 2 + 1 > n // 2 + 1:
        raise ValueError(
            f"`n_modes`[-1]={m} keeps {m // 2 + 1} real-FFT modes but the {name} grid size {n} "
            f"has only {n // 2 + 1}; accepted: n_modes[-1] <= {2 * (n // 2) + 1}."
        )


def take_modes(x_hat: Complex[Array, " ..."], n_modes: Sequence[int]) -> Array:
    """The centred block of `n_modes` of an `rfftn` over the last `len(n_modes)` axes."""
    d = len(n_modes)
    for i, m in enumerate(n_modes[:-1]):
        axis = x_hat.ndim - d + i
        size = x_hat.shape[axis]
        neg, pos = m // 2, m - m // 2
        x_hat = jnp.concatenate(
            [
                jax.lax.slice_in_dim(x_hat, size - neg, size, axis=axis),
                jax.lax.slice_in_dim(x_hat, 0, pos, axis=axis),
            ],
            axis=axis,
        )
    return jax.lax.slice_in_dim(x_hat, 0, n_modes[-1] // 2 + 1, axis=x_hat.ndim - 1)


def place_modes(
    y_block: Complex[Array, " ..."], n_modes: Sequence[int], grid: Sequence[int]
) -> Array:
    """Zero-fills a centred block of modes into the `rfftn` layout of a grid `grid`."""
    y_hat = _fill_leading_axes(y_block, n_modes, grid)
    pad = [(0, 0)] * (y_hat.ndim - 1) + [(0, grid[-1] // 2 + 1 - y_hat.shape[-1])]
    return jnp.pad(y_hat, pad)


def _fill_leading_axes(y_block, n_modes: Sequence[int], grid: Sequence[int]) -> Array:
    """`place_modes` on every axis but the last (which keeps its `m_d//2 + 1` columns)."""
    d = len(n_modes)
    for i, m in enumerate(n_modes[:-1]):
        axis = y_block.ndim - d + i
        neg = m // 2
        zeros_shape = list(y_block.shape)
        zeros_shape[axis] = grid[i] - m
        y_block = jnp.concatenate(
            [
                jax.lax.slice_in_dim(y_block, neg, m, axis=axis),
                jnp.zeros(zeros_shape, y_block.dtype),
                jax.lax.slice_in_dim(y_block, 0, neg, axis=axis),
            ],
            axis=axis,
        )
    return y_block


def inverse_rfftn(y_hat: Complex[Array, " ..."], grid: Sequence[int]) -> Array:
    """Inverse of `rfftn(norm="forward")` on the last `len(grid)` axes.

    Inverse FFT on the leading axes, then the imaginary parts of the DC and
    Nyquist columns of the last axis are set to zero (a real signal has them
    real; this fixes the result where the spectrum is not Hermitian), then the
    inverse real FFT of the last axis. The last axis of `y_hat` may hold only
    its first `k <= grid[-1]//2 + 1` columns, the others being zero: the
    leading-axis transforms then skip the zero columns.
    """
    d = len(grid)
    if d > 1:
        y_hat = jnp.fft.ifftn(
            y_hat, axes=tuple(range(y_hat.ndim - d, y_hat.ndim - 1)), norm="forward"
        )
    n_last, n_full = y_hat.shape[-1], grid[-1] // 2 + 1
    if n_last > n_full:
        raise ValueError(f"`y_hat` has {n_last} columns; grid {tuple(grid)} has {n_full}.")
    real_columns = jnp.zeros(n_last, bool).at[0].set(True)
    if grid[-1] % 2 == 0 and n_last == n_full:
        real_columns = real_columns.at[n_last - 1].set(True)
    y_hat = jnp.where(real_columns, jnp.real(y_hat).astype(y_hat.dtype), y_hat)
    y_hat = jnp.pad(y_hat, [(0, 0)] * (y_hat.ndim - 1) + [(0, n_full - n_last)])
    return jnp.fft.irfft(y_hat, n=grid[-1], axis=-1, norm="forward")


def forward_modes(x: Float[Array, " ..."], n_modes: Sequence[int]) -> Complex[Array, " ..."]:
    """`take_modes(rfftn(x, norm="forward"), n_modes)` over the last `len(n_modes)`
    axes, with pruned transforms: the real FFT of the last axis first, then the
    leading-axis FFTs of its kept columns only (the others are never needed)."""
    d = len(n_modes)
    x_hat = jnp.fft.rfft(x, axis=-1, norm="forward")[..., : n_modes[-1] // 2 + 1]
    if d > 1:
        x_hat = jnp.fft.fftn(x_hat, axes=tuple(range(x.ndim - d, x.ndim - 1)), norm="forward")
    return take_modes(x_hat, n_modes)


def contract(
    x_block: Complex[Array, " ..."],
    weight,
    *,
    separable: bool = False,
    implementation: str = "factorized",
    channels_last: bool = False,
) -> Complex[Array, " ..."]:
    """`ŷ[o,k] = Σ_i x̂[i,k] W[i,o,k]` (separable: `ŷ[c,k] = x̂[c,k] W[c,k]`).

    `"factorized"` contracts `x̂` with the factors of `weight` in one einsum (path
    chosen by opt_einsum); `"reconstructed"` builds `W` first. With
    `channels_last`, `x̂` is `(*modes, in_channels)` and so is the result.
    """
    d = x_block.ndim - 1
    sp = SPATIAL_LETTERS[:d]
    x_sub = sp + "i" if channels_last else "i" + sp
    w_sub = "i" + sp if separable else "io" + sp
    out_channel = "i" if separable else "o"
    out_sub = sp + out_channel if channels_last else out_channel + sp
    if implementation == "reconstructed":
        return jnp.einsum(f"{x_sub},{w_sub}->{out_sub}", x_block, weight.to_tensor())
    check_choice("implementation", implementation, IMPLEMENTATIONS)
    subs, arrays = weight.operands(w_sub)
    return jnp.einsum(f"{x_sub},{','.join(subs)}->{out_sub}", x_block, *arrays, optimize="optimal")


def resolve_transform(transform: str, n_modes: Sequence[int]) -> str:
    """`"fft"` or `"dft"`: `"auto"` is `"dft"` when no axis keeps more than
    `DFT_MAX_KEPT` coefficients (`kept_shape(n_modes)`)."""
    check_choice("transform", transform, TRANSFORMS)
    if transform != "auto":
        return transform
    return "dft" if max(kept_shape(n_modes)) <= DFT_MAX_KEPT else "fft"


def spectral_conv(
    x: Float[Array, " ..."],
    weight,
    bias: Float[Array | np.ndarray, " out_channels"] | None,
    n_modes: Sequence[int],
    *,
    output_shape: Sequence[int] | None = None,
    separable: bool = False,
    implementation: str = "factorized",
    transform: str = "auto",
    channels_last: bool = False,
) -> Float[Array, " ..."]:
    """The spectral convolution of one sample (see the module docstring).

    **Arguments:**

    - `x`: real input `(C_in, N_1, ..., N_d)`, or `(N_1, ..., N_d, C_in)` with
      `channels_last` (the output then has its channels last too).
    - `weight`: a tensor with `operands`/`to_tensor` (e.g. `TuckerTensor`) of
      shape `(C_in, C_out, *kept_shape(n_modes))`, or `(C, *kept_shape)` if
      `separable`.
    - `bias`: `(C_out,)` or None.
    - `n_modes`: total kept modes per axis.
    - `output_shape`: output grid (default: the input grid).
    - `transform`: `"fft"` (pruned FFTs), `"dft"` (matrix products with the
      kept frequencies) or `"auto"` (see `resolve_transform`); same result up
      to rounding.

    **Returns:** real `(C_out, *output_shape)` (`(*output_shape, C_out)` with
    `channels_last`).
    """
    n_modes = tuple(int(m) for m in n_modes)
    d = len(n_modes)
    grid = tuple(x.shape[:-1] if channels_last else x.shape[1:])
    out_grid = grid if output_shape is None else tuple(int(s) for s in output_shape)
    check_modes_fit(n_modes, grid, "input")
    check_modes_fit(n_modes, out_grid, "output")
    options = dict(separable=separable, implementation=implementation)
    if resolve_transform(transform, n_modes) == "dft":
        x_block = dft_forward_modes(x, n_modes, channels_last=channels_last)
        y_block = contract(x_block, weight, channels_last=channels_last, **options)
        y = dft_inverse(y_block, n_modes, out_grid, channels_last=channels_last)
    else:
        # the FFTs run on the last axes: channels last are moved first and back
        v = jnp.moveaxis(x, -1, 0) if channels_last else x
        y_block = contract(forward_modes(v, n_modes), weight, **options)
        # the leading axes are filled, not the last: its zero columns need no transform
        y = inverse_rfftn(_fill_leading_axes(y_block, n_modes, out_grid), out_grid)
        y = jnp.moveaxis(y, 0, -1) if channels_last else y
    if bias is not None:
        y = y + (bias if channels_last else bias.reshape((-1,) + (1,) * d))
    return y


def _check_n_modes(n_modes) -> tuple[int, ...]:
    if isinstance(n_modes, int):
        n_modes = (n_modes,)
    n_modes = tuple(n_modes)
    if not 1 <= len(n_modes) <= len(SPATIAL_LETTERS) or any(
        not isinstance(m, int) or m < 1 for m in n_modes
    ):
        raise ValueError(
            f"`n_modes` must be 1 to {len(SPATIAL_LETTERS)} positive ints (one per spatial axis), "
            f"got {n_modes!r}."
        )
    return n_modes


class SpectralConv(eqx.Module):
    """Fourier layer `v ↦ F⁻¹(W · F v) + b` with dense, CP, Tucker or TT weights.

    **Arguments:**

    - `in_channels`, `out_channels`: channel counts.
    - `n_modes`: total number of Fourier modes kept per spatial axis (an int for
      1-D); on the last axis `n_modes[-1]//2 + 1` real-FFT modes are kept.
    - `factorization`: `None`/`"dense"`, `"cp"`, `"tucker"` or `"tt"`.
    - `rank`: float fraction of the dense parameter count, or explicit int
      ranks (see `sciml.operators.tucker_rank` etc.).
    - `key`: keyword-only PRNG key.
    - the keyword options of every spectral convolution (`conv_options`):
      `implementation`, `transform`, `separable`, `bias`, `init_std`, `dtype`.
    """

    weight: eqx.Module
    bias: Float[Array | np.ndarray, " out_channels"] | None
    in_channels: int = eqx.field(static=True)
    out_channels: int = eqx.field(static=True)
    n_modes: tuple[int, ...] = eqx.field(static=True)
    factorization: str = eqx.field(static=True)
    implementation: str = eqx.field(static=True)
    separable: bool = eqx.field(static=True)
    transform: str = eqx.field(static=True)

    def __init__(
        self,
        in_channels: int,
        out_channels: int,
        n_modes: int | Sequence[int],
        *,
        factorization: str | None = None,
        rank: float | int | Sequence[int] = 1.0,
        key: PRNGKeyArray,
        **options,
    ):
        opts = conv_options(in_channels, out_channels, n_modes, **options)
        self.n_modes, self.implementation = opts.n_modes, opts.implementation
        self.separable, self.transform = opts.separable, opts.transform
        self.in_channels, self.out_channels = int(in_channels), int(out_channels)
        self.factorization = "dense" if factorization is None else str(factorization).lower()
        key_w, key_b = jax.random.split(key)
        self.weight = make_tensor(
            self.factorization,
            opts.weight_shape,
            rank,
            std=opts.std,
            dtype=opts.dtype,
            key=key_w,
        )
        self.bias = opts.draw_bias(key_b, (out_channels,))

    def __call__(
        self,
        x: Float[Array, " ..."],
        *,
        output_shape: Sequence[int] | None = None,
        channels_last: bool = False,
    ) -> Float[Array, " ..."]:
        """**Arguments:** `x` of shape `(C_in, N_1, ..., N_d)` (`(N_1, ..., N_d,
        C_in)` with `channels_last`); `output_shape` (default: the input grid).
        **Returns:** `(C_out, *output_shape)` (channels last with `channels_last`)."""
        check_input(x, self.in_channels, len(self.n_modes), "SpectralConv", channels_last)
        return apply_conv(self, x, self.weight, self.bias, output_shape, channels_last)


class ConvOptions(NamedTuple):
    """The checked options of a spectral convolution (see `conv_options`)."""

    n_modes: tuple[int, ...]
    implementation: str
    transform: str
    separable: bool
    bias: bool
    std: Real
    weight_shape: tuple[int, ...]
    dtype: Any

    def draw_bias(self, key: PRNGKeyArray, shape: tuple[int, ...]) -> Array | None:
        """A bias of `shape` drawn with the weight's std, or None without bias."""
        return self.std * jax.random.normal(key, shape, self.dtype) if self.bias else None


def conv_options(
    in_channels: int,
    out_channels: int,
    n_modes: int | Sequence[int],
    *,
    implementation: str = "factorized",
    transform: str = "auto",
    separable: bool = False,
    bias: bool = True,
    init_std: Real | str = "auto",
    dtype=None,
) -> ConvOptions:
    """The options every spectral convolution takes (`SpectralConv`,
    `JointSpectralConv`), checked and resolved in one place.

    - `implementation`: `"factorized"` (contract the input with the factors) or
      `"reconstructed"` (build the dense weight first); same output.
    - `transform`: `"auto"` (default), `"fft"` or `"dft"`: how the kept Fourier
      modes are computed (see `spectral_conv`); same output up to rounding.
    - `separable`: channel-diagonal weight `(C, *modes)` (needs `C_in == C_out`).
    - `bias`: add a learned per-channel bias.
    - `init_std`: std of the weight entries; `"auto"` is
      `sqrt(2 / (C_in + C_out))`, also used for the bias.
    - `dtype`: real dtype of the parameters.

    **Returns:** a `ConvOptions`; its `weight_shape` is `(C_in, C_out,
    *kept_shape(n_modes))`, or `(C, *kept_shape(n_modes))` if `separable`.
    """
    n_modes = _check_n_modes(n_modes)
    check_choice("implementation", implementation, IMPLEMENTATIONS)
    check_choice("transform", transform, TRANSFORMS)
    if separable and in_channels != out_channels:
        raise ValueError(
            f"`separable=True` needs in_channels == out_channels, got {in_channels} and {out_channels}."
        )
    if in_channels < 1 or out_channels < 1:
        raise ValueError(f"channel counts must be >= 1, got {in_channels}, {out_channels}.")
    std = math.sqrt(2.0 / (in_channels + out_channels)) if init_std == "auto" else init_std
    channels = (in_channels,) if separable else (in_channels, out_channels)
    return ConvOptions(
        n_modes,
        implementation,
        transform,
        bool(separable),
        bool(bias),
        std,
        channels + kept_shape(n_modes),
        check_float_dtype("dtype", dtype),
    )


def apply_conv(conv, x, weight, bias, output_shape=None, channels_last=False) -> Array:
    """`spectral_conv` of `x` with `weight` and `bias` under the options a
    spectral convolution module `conv` stores."""
    return spectral_conv(
        x,
        weight,
        bias,
        conv.n_modes,
        output_shape=output_shape,
        separable=conv.separable,
        implementation=conv.implementation,
        transform=conv.transform,
        channels_last=channels_last,
    )


def check_input(x, in_channels: int, n_dims: int, who: str, channels_last=False) -> None:
    """Trace-time check of an unbatched real `(channels, *grid)` input
    (`(*grid, channels)` if `channels_last`)."""
    dtype = getattr(x, "dtype", None)
    if dtype is None or not jnp.issubdtype(dtype, jnp.floating):
        hint = (
            " Pass the real and imaginary parts as separate channels."
            if dtype is not None and jnp.issubdtype(dtype, jnp.complexfloating)
            else " Cast it, e.g. `x.astype(jnp.float32)`."
        )
        raise TypeError(
            f"{who}: `x` must be a real floating array (float16, bfloat16, float32 or "
            f"float64), got {'a ' + type(x).__name__ if dtype is None else f'dtype {dtype}'}."
            f"{hint}"
        )
    layout = (
        f"{n_dims} spatial dims, channels" if channels_last else f"channels, {n_dims} spatial dims"
    )
    if x.ndim != n_dims + 1:
        raise ValueError(
            f"{who} takes one sample of shape ({layout}); got shape "
            f"{x.shape}. Use jax.vmap for a batch."
        )
    channels = x.shape[-1 if channels_last else 0]
    if channels != in_channels:
        raise ValueError(
            f"{who} was built with in_channels={in_channels} but the input `x` has "
            f"{channels} channels (shape {x.shape})."
        )
