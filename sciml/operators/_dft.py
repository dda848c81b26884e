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
    """float64 pairs: leading axes `(cos, sin)` of shape `(m_i, M_i)`, the last
    axis `(c·cos, −c·sin)` of shape `(m_d//2+1, M_d)`."""
    pairs = []
    for i, (m, n) in enumerate(zip(n_modes, grid)):
        if i < len(grid) - 1:
            angle = 2 * np.pi * np.outer(centred_frequencies(m), np.arange(n)) / n
            pairs.append((np.cos(angle), np.sin(angle)))
            continue
        k = np.arange(m // 2 + 1)
        weight = np.where((k == 0) | ((n % 2 == 0) & (k == n // 2)), 1.0, 2.0)[:, None]
        angle = 2 * np.pi * np.outer(k, np.arange(n)) / n
        pairs.append((weight * np.cos(angle), -weight * np.sin(angle)))
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


def dft_forward_modes(x: Float[Array, " ..."], n_modes: Sequence[int]) -> Complex[Array, " ..."]:
    """`take_modes(rfftn(x, norm="forward"), n_modes)` over the last
    `len(n_modes)` axes, by matrix products. `x` real; returns the complex block
    of shape `(..., *n_modes[:-1], n_modes[-1]//2 + 1)`."""
    d = len(n_modes)
    grid = tuple(x.shape[x.ndim - d :])
    pairs = [
        tuple(jnp.asarray(a, x.dtype) for a in p) for p in _forward_matrices(tuple(n_modes), grid)
    ]
    re, im = _along(x, pairs[-1][0], x.ndim - 1), _along(x, pairs[-1][1], x.ndim - 1)
    for i in range(d - 1):
        re, im = _complex_along(re, im, pairs[i], x.ndim - d + i)
    return jax.lax.complex(re, im)


def dft_inverse(
    y_block: Complex[Array, " ..."], n_modes: Sequence[int], grid: Sequence[int]
) -> Float[Array, " ..."]:
    """`inverse_rfftn(place_modes(y_block, n_modes, grid), grid)` by matrix
    products: the real field on `grid` whose kept modes are `y_block` (shape
    `(..., *n_modes[:-1], n_modes[-1]//2 + 1)`) and whose other modes are zero."""
    d = len(n_modes)
    pairs = _inverse_matrices(tuple(n_modes), tuple(grid))
    dtype = jnp.real(y_block).dtype
    pairs = [tuple(jnp.asarray(a, dtype) for a in p) for p in pairs]
    re, im = jnp.real(y_block), jnp.imag(y_block)
    for i in range(d - 1):
        re, im = _complex_along(re, im, pairs[i], y_block.ndim - d + i)
    last = y_block.ndim - 1
    return _along(re, pairs[-1][0], last) + _along(im, pairs[-1][1], last)
