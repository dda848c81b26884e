"""Vandermonde kernels and FFT convolutions (the S4D path).

`K[..., l] = Σ_n W[..., n] λ̄_n^l` for `l < L` is a Vandermonde product. The
naive evaluation materialises all `(..., N, L)` powers (complex exponentials:
slow, and `O(H N L)` memory, also kept for the backward pass). Here positions
are split as `l = c k + j` with `c ≈ √L`, so `λ̄^l = λ̄^{ck} λ̄^j` and

`K[..., ck + j] = Σ_n (W_n λ̄_n^{ck}) λ̄_n^j`

is one batched matrix product of two `O(N √L)` Vandermonde factors: `O(N √L)`
exponentials and memory, `O(N L)` multiply-adds on the matrix unit.
"""

from __future__ import annotations

import math

import jax.numpy as jnp
from jaxtyping import Array, Complex, Float, Inexact


def vandermonde_kernel(
    log_Lambda_bar: Complex[Array, "... modes"],
    W: Inexact[Array, "... modes"],
    length: int,
) -> Complex[Array, "... length"]:
    """`K[..., l] = Σ_n W[..., n] exp(l · log λ̄[..., n])`, `l = 0, …, length − 1`.

    **Arguments:**

    - `log_Lambda_bar`: logarithms of the discrete eigenvalues, `(..., N)`.
    - `W`: weights (e.g. `C ⊙ B̄`), broadcastable against `log_Lambda_bar`.
    - `length`: kernel length `L`.

    **Returns:** the complex kernel `(..., L)`. An S4D layer with conjugate
    symmetry uses `2 Re K`.
    """
    if length < 1:
        raise ValueError(f"length must be positive, got {length}.")
    log_Lambda_bar, W = jnp.broadcast_arrays(log_Lambda_bar, W)
    inner = math.ceil(math.sqrt(length))
    outer = math.ceil(length / inner)
    real_dtype = jnp.finfo(log_Lambda_bar.dtype).dtype
    z = log_Lambda_bar[..., None]
    coarse = jnp.exp(z * (inner * jnp.arange(outer, dtype=real_dtype)))  # (..., N, outer)
    fine = jnp.exp(z * jnp.arange(inner, dtype=real_dtype))  # (..., N, inner)
    kernel = jnp.einsum("...nk,...nj->...kj", W[..., None] * coarse, fine)
    return kernel.reshape(*kernel.shape[:-2], outer * inner)[..., :length]


def causal_conv(
    u: Float[Array, "length channels"],
    kernel: Float[Array, "channels length"],
    backward_kernel: Float[Array, "channels length"] | None = None,
) -> Float[Array, "length channels"]:
    """`y[t] = Σ_{s ≤ t} K[t − s] u[s]` (+ `Σ_{s > t} K_b[s − t − 1] u[s]`) by FFT.

    The FFT has length `2L`, so the circular convolution is the linear one. With
    a `backward_kernel` (bidirectional S4), the length-`2L` kernel
    `pad(K, (0, L)) + pad(flip(K_b), (L, 0))` adds an anti-causal branch that
    sees only strictly future inputs `u[t+1], u[t+2], …`, as in
    `state-spaces/s4`.

    **Arguments:**

    - `u`: real input `(L, H)`.
    - `kernel`: real causal kernel `(H, L)`; a longer kernel is truncated.
    - `backward_kernel`: optional real `(H, L)`.

    **Returns:** `(L, H)`.
    """
    length = u.shape[0]
    kernel = kernel[..., :length]
    if backward_kernel is not None:
        pad = [(0, 0)] * (kernel.ndim - 1)
        kernel = jnp.pad(kernel, pad + [(0, length)]) + jnp.pad(
            jnp.flip(backward_kernel[..., :length], -1), pad + [(length, 0)]
        )
    n = 2 * length
    u_hat = jnp.fft.rfft(u, n=n, axis=0)
    k_hat = jnp.fft.rfft(kernel, n=n, axis=-1)
    return jnp.fft.irfft(u_hat * k_hat.T, n=n, axis=0)[:length]


def causal_conv_complex(
    v: Complex[Array, "length modes"], log_Lambda_bar: Complex[Array, " modes"]
) -> Complex[Array, "length modes"]:
    """States `x[t] = Σ_{s ≤ t} λ̄^{t−s} v[s]` of a diagonal recurrence, by FFT.

    The convolution path of the MIMO (S5) layer: each mode's input sequence is
    convolved with its powers `λ̄ˡ`.

    **Arguments:** `v`: `(L, P)` inputs `B̄u`; `log_Lambda_bar`: `(P,)`.

    **Returns:** the states `(L, P)`.
    """
    length = v.shape[0]
    powers = vandermonde_kernel(log_Lambda_bar[:, None], jnp.ones((1, 1), v.dtype), length)
    n = 2 * length
    x = jnp.fft.ifft(jnp.fft.fft(v, n=n, axis=0) * jnp.fft.fft(powers, n=n, axis=-1).T, axis=0)
    return x[:length]
