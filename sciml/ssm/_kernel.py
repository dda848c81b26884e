"""Vandermonde kernels and FFT convolutions (the S4D path).

`K[..., l] = Σ_n W[..., n] λ̄_n^l` for `l < L` is a Vandermonde product. The
naive evaluation materialises `(..., N, L)` powers; here they are computed in
chunks of the sequence axis, each chunk recomputed in the backward pass
(`jax.checkpoint`), so memory stays `O(… · N · chunk)` instead of
`O(… · N · L)`.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from jaxtyping import Array, Complex, Float


DEFAULT_CHUNK = 1024


def vandermonde_kernel(
    log_Lambda_bar: Complex[Array, "*batch modes"],
    W: Complex[Array, "*batch modes"],
    length: int,
    *,
    chunk_size: int | None = DEFAULT_CHUNK,
) -> Complex[Array, "*batch length"]:
    """`K[..., l] = Σ_n W[..., n] exp(l · log λ̄[..., n])`, `l = 0, …, length − 1`.

    **Arguments:**

    - `log_Lambda_bar`: logarithms of the discrete eigenvalues, `(..., N)`.
    - `W`: weights (e.g. `C ⊙ B̄`), broadcastable against `log_Lambda_bar`.
    - `length`: kernel length `L`.
    - `chunk_size`: evaluate `chunk_size` positions at a time (rematerialised
      in the backward pass); `None` evaluates all `L` at once.

    **Returns:** the complex kernel `(..., L)`. An S4D layer with conjugate
    symmetry uses `2 Re K`.
    """
    if length < 1:
        raise ValueError(f"length must be positive, got {length}.")
    log_Lambda_bar, W = jnp.broadcast_arrays(log_Lambda_bar, W)

    def block(positions):
        powers = jnp.exp(log_Lambda_bar[..., None] * positions)
        return jnp.sum(W[..., None] * powers, axis=-2)

    real_dtype = jnp.finfo(log_Lambda_bar.dtype).dtype
    if chunk_size is None or length <= chunk_size:
        return block(jnp.arange(length, dtype=real_dtype))
    n_chunks = -(-length // chunk_size)
    positions = jnp.arange(n_chunks * chunk_size, dtype=real_dtype).reshape(n_chunks, chunk_size)
    chunks = jax.lax.map(jax.checkpoint(block), positions)  # (chunks, ..., chunk)
    kernel = jnp.moveaxis(chunks, 0, -2).reshape(*chunks.shape[1:-1], -1)
    return kernel[..., :length]


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
