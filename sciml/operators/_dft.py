r"""The spectral convolution's truncated transforms as matrix products.

A Fourier layer keeps a few modes (12 of 64 per axis, say), so instead of full
FFTs followed by a cut, the kept coefficients can be computed directly by
products with the matrices of those frequencies only:

- forward, last axis (real input, `N` points, modes `k = 0 … m//2`):
  `x̂[k] = (1/N) Σₙ x[n] e^{−2πikn/N}`, a real `(N, m//2+1)` pair (cos, −sin);
- forward, every other axis (modes `f = −(m//2) … m − m//2 − 1`, the centred
  order of `take_modes`): `(1/N) Σₙ e^{−2πifn/N}`, complex `(N, m)`;
- inverse, leading axes: `Σ_f ŷ[f] e^{2πifn/M}` onto an output grid of `M`
  points (any size: super-resolution);
- inverse, last axis (the inverse real FFT of the kept columns, the others
  zero): `y[n] = Σₖ cₖ (Re ŷ[k] cos(2πkn/M) − Im ŷ[k] sin(2πkn/M))` with
  `c₀ = 1`, `c_{M/2} = 1` for the Nyquist column of an even `M`, `cₖ = 2`
  otherwise. The imaginary parts of the DC and Nyquist columns drop out
  (`sin = 0` there), as `inverse_rfftn` zeroes them.

The transforms are linear, so the axes may be taken in any order; the whole
inverse is `Re Σ_f w_f ŷ_f e^{2πif·n/M}` (`w` the `cₖ` of the last axis), a
complex product along every axis but the one taken last. Both layouts of a
sample are served: channels first `(C, *grid)` and channels last
`(*grid, C)`, each with the order that keeps its full-grid products free of
layout changes (`_transform_order`).

Same results as `forward_modes` and `inverse_rfftn` up to rounding. The work
per line is `N · m` multiply-adds instead of an FFT's `N log N`, but as dense
matrix products; on XLA's CPU backend, whose FFT is slow at these sizes, this
is several times faster for the mode counts FNOs use (docs/benchmarks.md).
The products run at `Precision.HIGHEST` so that accelerators do not round the
float32 matrices to TF32 or bfloat16.
"""

import functools
import string
from collections.abc import Sequence

import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Complex, Float


_HIGHEST = jax.lax.Precision.HIGHEST


def centred_frequencies(m: int) -> np.ndarray:
    """The kept frequencies of a leading axis, in the order the weights use."""
    return np.arange(m) - m // 2


@functools.lru_cache(maxsize=64)
def _forward_matrices(n_modes: tuple[int, ...], grid: tuple[int, ...]):
    """float64 `(cos, −sin)/N` pairs: leading axes `(N_i, m_i)`, last `(N_d, m_d//2+1)`."""
    pairs = []
    for i, (m, n) in enumerate(zip(n_modes, grid)):
        last = i == len(grid) - 1
        freqs = np.arange(m // 2 + 1) if last else centred_frequencies(m)
        angle = 2 * np.pi * np.outer(np.arange(n), freqs) / n
        pairs.append((np.cos(angle) / n, -np.sin(angle) / n))
    return tuple(pairs)


@functools.lru_cache(maxsize=64)
def _inverse_matrices(n_modes: tuple[int, ...], grid: tuple[int, ...]):
    """float64 `(w·cos, w·sin)` pairs of shape `(m_i, M_i)`: the products with
    `w e^{+2πifn/M}`; `w = 1` on the leading axes, `c_k` on the last."""
    pairs = []
    for i, (m, n) in enumerate(zip(n_modes, grid)):
        if i < len(grid) - 1:
            freqs, weight = centred_frequencies(m), 1.0
        else:
            freqs = np.arange(m // 2 + 1)
            weight = np.where((freqs == 0) | ((n % 2 == 0) & (freqs == n // 2)), 1.0, 2.0)
            weight = weight[:, None]
        angle = 2 * np.pi * np.outer(freqs, np.arange(n)) / n
        pairs.append((weight * np.cos(angle), weight * np.sin(angle)))
    return tuple(pairs)


def _along(a: Array, matrix: Array, axis: int) -> Array:
    """Contracts axis `axis` of `a` with the rows of `matrix` (the result keeps
    the axis in place, now of size `matrix.shape[1]`)."""
    letters = string.ascii_letters[: a.ndim]
    out = letters[:axis] + "Z" + letters[axis + 1 :]
    return jnp.einsum(f"{letters},{letters[axis]}Z->{out}", a, matrix, precision=_HIGHEST)


def _complex_along(re: Array, im: Array, pair, axis: int) -> tuple[Array, Array]:
    """`(re + i·im)` times `(c + i·s)` along `axis`, as real products."""
    c, s = pair
    return (
        _along(re, c, axis) - _along(im, s, axis),
        _along(re, s, axis) + _along(im, c, axis),
    )


def _spatial_axes(ndim: int, d: int, channels_last: bool) -> list[int]:
    """The `d` spatial axes of an array of `ndim` axes: the last `d`, or the `d`
    before the last (the channel axis) when `channels_last`."""
    first = ndim - d - (1 if channels_last else 0)
    return list(range(first, first + d))


def _transform_order(d: int, channels_last: bool) -> list[int]:
    """The order the forward transform takes the spatial axes in (the inverse
    takes them backwards). The first axis of the forward (and the last of the
    inverse) is the one on the full grid, so it goes first where its products
    need no layout change: the last spatial axis, contiguous, for channels
    first; the first, outermost, for channels last (a 1.14× faster FNO train step
    than the other order, 64², a 2-core CPU)."""
    return list(range(d)) if channels_last else [d - 1, *range(d - 1)]


def dft_forward_modes(
    x: Float[Array, " ..."], n_modes: Sequence[int], *, channels_last: bool = False
) -> Complex[Array, " ..."]:
    """`take_modes(rfftn(x, norm="forward"), n_modes)` over the last
    `len(n_modes)` axes (the ones before the last if `channels_last`), by
    matrix products. `x` real; returns the complex block, of shape
    `(..., *n_modes[:-1], n_modes[-1]//2 + 1)` (then the channels if
    `channels_last`)."""
    d = len(n_modes)
    axes = _spatial_axes(x.ndim, d, channels_last)
    grid = tuple(x.shape[a] for a in axes)
    pairs = [
        tuple(jnp.asarray(a, x.dtype) for a in p) for p in _forward_matrices(tuple(n_modes), grid)
    ]
    first, *rest = _transform_order(d, channels_last)
    re, im = _along(x, pairs[first][0], axes[first]), _along(x, pairs[first][1], axes[first])
    for i in rest:
        re, im = _complex_along(re, im, pairs[i], axes[i])
    return jax.lax.complex(re, im)


def dft_inverse(
    y_block: Complex[Array, " ..."],
    n_modes: Sequence[int],
    grid: Sequence[int],
    *,
    channels_last: bool = False,
) -> Float[Array, " ..."]:
    """`inverse_rfftn(place_modes(y_block, n_modes, grid), grid)` by matrix
    products: the real field on `grid` whose kept modes are `y_block` (shape
    `(..., *n_modes[:-1], n_modes[-1]//2 + 1)`, then the channels if
    `channels_last`) and whose other modes are zero.

    The field is `Re Σ_f w_f ŷ_f e^{2πif·n/M}` (`w` the last axis' `c_k`): a
    complex product along every axis but the one taken last, whose product
    keeps the real part only."""
    d = len(n_modes)
    axes = _spatial_axes(y_block.ndim, d, channels_last)
    dtype = jnp.real(y_block).dtype
    pairs = [
        tuple(jnp.asarray(a, dtype) for a in p)
        for p in _inverse_matrices(tuple(n_modes), tuple(grid))
    ]
    *order, final = _transform_order(d, channels_last)[::-1]
    re, im = jnp.real(y_block), jnp.imag(y_block)
    for i in order:
        re, im = _complex_along(re, im, pairs[i], axes[i])
    cos, sin = pairs[final]
    return _along(re, cos, axes[final]) - _along(im, sin, axes[final])
