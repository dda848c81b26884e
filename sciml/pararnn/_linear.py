r"""Linear recurrences `y_t = A_t y_{t-1} + b_t` over a whole sequence.

Every Newton step of a nonlinear recurrence, and its backward pass, is one of
these. Three evaluation methods give the same numbers up to round-off:

- `"scan"`: `lax.associative_scan` over the pairs `(A_t, b_t)` with the
  composition `(A_2, b_2) ∘ (A_1, b_1) = (A_2 A_1, A_2 b_1 + b_2)`:
  `O(log T)` depth, the method for accelerators.
- `"chunked"`: the sequence is cut into chunks of `chunk_size` steps; one
  `lax.scan` over the steps of a chunk runs all chunks at once (vectorised),
  keeping the running products `P_t = A_t ⋯ A_{start}` and the partial solutions
  from a zero state; an associative scan over the `T / chunk_size` chunk ends
  gives the state entering each chunk, and a fix-up `y_t += P_t y_{start-1}`
  finishes. `O(T)` work and `chunk_size + O(log T)` sequential steps.
- `"sequential"`: a plain `lax.scan` over time; on CPU the fastest.
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax
from jaxtyping import Array, Float

from ._structure import Structure, identity, infer_structure, matmul, matvec, transpose


METHODS = ("auto", "scan", "chunked", "sequential")


def default_method(backend: str | None = None) -> str:
    """The method `"auto"` picks on `backend` (default: JAX's default backend).

    `"sequential"` on CPU, where a compiled loop step costs nanoseconds and it
    was measured fastest for every structure, length and size tried (the
    parallel methods do 2–4 times the memory traffic; see the benchmarks page);
    `"scan"` on accelerators, where thousands of lanes run the `O(log T)`
    levels of the associative scan and each sequential loop step costs a
    kernel launch.
    """
    backend = backend or jax.default_backend()
    return "sequential" if backend == "cpu" else "scan"


def default_chunk_size(length: int) -> int:
    """A power of two near `sqrt(length)`, between 16 and 256: few chunk steps
    and few chunk boundaries."""
    return int(min(256, max(16, 2 ** round(math.log2(max(length, 1)) / 2))))


def _combine(structure: Structure):
    def combine(earlier, later):
        a1, b1 = earlier
        a2, b2 = later
        return matmul(structure, a2, a1), matvec(structure, a2, b1) + b2

    return combine


def _scan(structure: Structure, a: Array, b: Array) -> Array:
    return lax.associative_scan(_combine(structure), (a, b))[1]


def _sequential(structure: Structure, a: Array, b: Array) -> Array:
    def step(y, ab):
        y = matvec(structure, ab[0], y) + ab[1]
        return y, y

    return lax.scan(step, jnp.zeros_like(b[0]), (a, b))[1]


def _chunked(structure: Structure, a: Array, b: Array, chunk: int) -> Array:
    length, n = b.shape
    chunks = -(-length // chunk)
    pad = chunks * chunk - length
    if pad:  # trailing zero steps change nothing before them
        a = jnp.concatenate([a, jnp.zeros((pad, *a.shape[1:]), a.dtype)])
        b = jnp.concatenate([b, jnp.zeros((pad, n), b.dtype)])
    # time inside a chunk leads, chunks are vectorised: (chunk, chunks, ...)
    a = jnp.swapaxes(a.reshape(chunks, chunk, *a.shape[1:]), 0, 1)
    b = jnp.swapaxes(b.reshape(chunks, chunk, n), 0, 1)

    def step(carry, ab):
        p, y = carry
        p = matmul(structure, ab[0], p)
        y = matvec(structure, ab[0], y) + ab[1]
        return (p, y), (p, y)

    eye = jnp.broadcast_to(identity(structure, n, a.dtype), (chunks, *a.shape[2:]))
    _, (p, y) = lax.scan(step, (eye, jnp.zeros((chunks, n), b.dtype)), (a, b))
    ends = _scan(structure, p[-1], y[-1])  # state at the end of each chunk
    entering = jnp.concatenate([jnp.zeros((1, n), b.dtype), ends[:-1]])
    y = y + matvec(structure, p, entering[None])
    return jnp.swapaxes(y, 0, 1).reshape(chunks * chunk, n)[:length]


def linear_recurrence(
    A: Float[Array | np.ndarray, "length ..."],
    b: Float[Array | np.ndarray, "length n"],
    y0: Float[Array | np.ndarray, " n"] | None = None,
    *,
    reverse: bool = False,
    method: str = "auto",
    chunk_size: int | None = None,
) -> Float[Array, "length n"]:
    r"""Solves the linear recurrence `y_t = A_t y_{t-1} + b_t`, `t = 1..T`.

    The structure of the step matrices is read from the shape of `A`:
    `(T, n)` diagonal (`A_t = diag(A[t])`), `(T, K, K, n/K)` block-diagonal
    with `K × K` blocks of diagonals (the state is `K` contiguous pieces;
    entry `(i, j, p)` couples element `p` of piece `j` into element `p` of
    piece `i`), `(T, n, n)` dense.

    With `reverse=True` it solves the transposed system instead, which runs
    backwards in time:
    $$y_t = A_{t+1}^\top y_{t+1} + b_t,\quad t = T, \dots, 1,\qquad y_T = b_T,$$
    the adjoint recurrence of a backward pass (`A_1` is not used).

    **Arguments:**

    - `A`: the step matrices, shape `(T, n)`, `(T, K, K, n/K)` or `(T, n, n)`.
    - `b`: the inputs, shape `(T, n)`.
    - `y0`: the state before the first step, shape `(n,)`; default zeros.
      Forward direction only.
    - `reverse`: solve the transposed (backward-in-time) system.
    - `method`: `"scan"` (associative scan), `"chunked"`, `"sequential"`
      (`lax.scan`) or `"auto"` ([`default_method`][sciml.pararnn.default_method]
      of the backend).
    - `chunk_size`: chunk length of `"chunked"`; default
      [`default_chunk_size`][sciml.pararnn.default_chunk_size]`(T)`.

    **Returns:** the states `y_1..y_T`, shape `(T, n)`.
    """
    A, b = jnp.asarray(A), jnp.asarray(b)
    structure = infer_structure(A.shape, b.shape)
    if method not in METHODS:
        raise ValueError(f"method must be one of {METHODS}; got {method!r}.")
    if chunk_size is not None and (not isinstance(chunk_size, int) or chunk_size < 1):
        raise ValueError(f"chunk_size must be a positive integer or None; got {chunk_size!r}.")
    dtype = jnp.result_type(A, b)
    A, b = A.astype(dtype), b.astype(dtype)
    length, n = b.shape
    if y0 is not None:
        if reverse:
            raise ValueError("y0 is only accepted in the forward direction (reverse=False).")
        y0 = jnp.asarray(y0, dtype)
        if y0.shape != (n,):
            raise ValueError(f"y0 must have shape ({n},) like the states; got {y0.shape}.")
    if length == 0:
        return b
    if reverse:
        # reversed time s = T + 1 - t: y_s = A'_s y_{s-1} + b'_s with A'_s = A_{T+2-s}^T
        later = transpose(structure, A[1:][::-1])
        A = jnp.concatenate([jnp.zeros_like(A[:1]), later])
        b = b[::-1]
    elif y0 is not None:
        b = b.at[0].add(matvec(structure, A[0], y0))
    if method == "auto":
        method = default_method()
    if method == "scan":
        y = _scan(structure, A, b)
    elif method == "sequential":
        y = _sequential(structure, A, b)
    else:
        y = _chunked(structure, A, b, chunk_size or default_chunk_size(length))
    return y[::-1] if reverse else y
