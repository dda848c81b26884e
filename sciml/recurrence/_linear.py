r"""The linear recurrence `h_t = A_t h_{t-1} + b_t` over a whole sequence.

One driver serves the diagonal state-space layers of `sciml.ssm` (S5's scan,
S4D's and S5's step mode, where `A_t = diag(λ̄)`) and every Newton step and
backward pass of `sciml.pararnn` (diagonal, block-diagonal and dense `A_t`).
The structure of `A_t` (see [`Diagonal`][sciml.recurrence.Diagonal]) supplies
the algebra; the method supplies the evaluation order:

- [`SequentialScan()`][sciml.recurrence.SequentialScan]: a plain `lax.scan`
  over time, `T` dependent steps.
- [`AssociativeScan()`][sciml.recurrence.AssociativeScan]:
  `lax.associative_scan` over the pairs `(A_t, b_t)` with the composition
  `(A_2, b_2) ∘ (A_1, b_1) = (A_2 A_1, A_2 b_1 + b_2)`: `O(log T)` depth.
- [`ChunkedScan(chunk_size)`][sciml.recurrence.ChunkedScan]: the sequence is cut
  into chunks; one `lax.scan` over the steps of a chunk runs all chunks at once
  (vectorised), keeping the running products `P_t = A_t ⋯ A_{start}` and the
  partial solutions from a zero state; an associative scan over the chunk ends
  gives the state entering each chunk, and a fix-up `h_t += P_t h_{start-1}`
  finishes. `O(T)` work, `chunk_size + O(log T)` dependent steps.
- [`AutoScan()`][sciml.recurrence.AutoScan]: the measured choice per backend and
  structure.

`reverse=True` runs the same recurrence backwards in time,
`h_t = A_t h_{t+1} + b_t`; the transposed system of a backward pass,
`y_t = A_{t+1}^\top y_{t+1} + g_t`, is
[`transposed_recurrence`][sciml.recurrence.transposed_recurrence].
"""

from __future__ import annotations

import abc
import functools
import math
from typing import Any

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jax import lax
from jaxtyping import Array, Inexact

from .._checks import check_positive_int
from ._structure import AbstractStructure, Diagonal, infer_structure


def default_chunk_size(length: int) -> int:
    """A power of two near `sqrt(length)`, between 16 and 256: few chunk steps
    and few chunk boundaries."""
    return int(min(256, max(16, 2 ** round(math.log2(max(length, 1)) / 2))))


# The loop bodies below are built once per structure and cached: `lax.scan`
# caches its traced body by function identity, so a fresh closure per call would
# recompile the loop on every eager (un-jitted) call.
@functools.cache
def _combine(structure: AbstractStructure):
    def combine(earlier, later):
        a1, b1 = earlier
        a2, b2 = later
        return structure.matmul(a2, a1), structure.matvec(a2, b1) + b2

    return combine


@functools.cache
def _sequential_step(structure: AbstractStructure):
    def step(h, ab):
        h = structure.matvec(ab[0], h) + ab[1]
        return h, h

    return step


@functools.cache
def _chunk_step(structure: AbstractStructure):
    def step(carry, ab):
        p, h = carry
        p = structure.matmul(ab[0], p)
        h = structure.matvec(ab[0], h) + ab[1]
        return (p, h), (p, h)

    return step


class AbstractScanMethod(eqx.Module):
    """How to evaluate a linear recurrence from a zero state, forward in time."""

    @abc.abstractmethod
    def solve(self, structure: AbstractStructure, a: Array, b: Array) -> Array:
        """All states `h_1..h_T` of `h_t = a_t h_{t-1} + b_t`, `h_0 = 0`."""


class SequentialScan(AbstractScanMethod):
    """A `lax.scan` over time (`unroll` steps per loop iteration)."""

    unroll: int = eqx.field(static=True, default=1)

    def __check_init__(self):
        check_positive_int("unroll", self.unroll)

    def solve(self, structure, a, b):
        step = _sequential_step(structure)
        return lax.scan(step, jnp.zeros_like(b[0]), (a, b), unroll=self.unroll)[1]


class AssociativeScan(AbstractScanMethod):
    """`lax.associative_scan` over `(A_t, b_t)`: `O(log T)` depth."""

    def solve(self, structure, a, b):
        return lax.associative_scan(_combine(structure), (a, b))[1]


class ChunkedScan(AbstractScanMethod):
    """Chunks of `chunk_size` steps, vectorised over chunks, joined by an associative
    scan over the chunk ends; `chunk_size=None` is
    [`default_chunk_size`][sciml.recurrence.default_chunk_size]`(T)`."""

    chunk_size: int | None = eqx.field(static=True, default=None)

    def __check_init__(self):
        check_positive_int("chunk_size", self.chunk_size, allow_none=True)

    def solve(self, structure, a, b):
        length = b.shape[0]
        chunk = self.chunk_size or default_chunk_size(length)
        chunks = -(-length // chunk)
        pad = chunks * chunk - length
        if pad:  # trailing zero steps change nothing before them
            a = jnp.concatenate([a, jnp.zeros((pad, *a.shape[1:]), a.dtype)])
            b = jnp.concatenate([b, jnp.zeros((pad, *b.shape[1:]), b.dtype)])

        def split(x):  # time inside a chunk leads, chunks are vectorised
            return jnp.swapaxes(x.reshape(chunks, chunk, *x.shape[1:]), 0, 1)

        a, b = split(a), split(b)

        step = _chunk_step(structure)
        start = (structure.identity_like(a[0]), jnp.zeros_like(b[0]))
        _, (p, h) = lax.scan(step, start, (a, b))
        ends = AssociativeScan().solve(structure, p[-1], h[-1])  # state at each chunk end
        entering = jnp.concatenate([jnp.zeros_like(ends[:1]), ends[:-1]])
        h = h + structure.matvec(p, entering[None])
        return jnp.swapaxes(h, 0, 1).reshape(chunks * chunk, *h.shape[2:])[:length]


# The measured choice, per backend: (structure kind -> method). See
# docs/benchmarks.md ("ParaRNN", `python -m benchmarks.pararnn --linear`).
# CPU: a compiled loop step is cheap and the parallel methods do 2-4 times the
# memory traffic, so the sequential scan wins for every structure measured.
# Accelerators: thousands of lanes run the O(log T) levels of the associative
# scan, and each sequential loop step costs a kernel launch.
AUTO_METHODS: dict[str, AbstractScanMethod] = {
    "cpu": SequentialScan(),
    "gpu": AssociativeScan(),
    "tpu": AssociativeScan(),
}


class AutoScan(AbstractScanMethod):
    """The method measured fastest on the backend (default: JAX's default backend):
    [`SequentialScan`][sciml.recurrence.SequentialScan] on CPU,
    [`AssociativeScan`][sciml.recurrence.AssociativeScan] on accelerators."""

    backend: str | None = eqx.field(static=True, default=None)

    def select(self) -> AbstractScanMethod:
        """The concrete method used."""
        return AUTO_METHODS.get(self.backend or jax.default_backend(), AssociativeScan())

    def solve(self, structure, a, b):
        return self.select().solve(structure, a, b)


_METHODS = "SequentialScan(), AssociativeScan(), ChunkedScan(chunk_size) or AutoScan()"


def _prepare(a, b, structure, method):
    method = AutoScan() if method is None else method
    if not isinstance(method, AbstractScanMethod):
        raise ValueError(f"method must be one of {_METHODS}; got {method!r}.")
    a, b = jnp.asarray(a), jnp.asarray(b)
    if b.ndim < 1:
        raise ValueError(f"b must have a leading time axis; got shape {b.shape}.")
    if structure is None:
        structure = Diagonal() if a.shape == b.shape else infer_structure(a.shape, b.shape)
    elif not isinstance(structure, AbstractStructure):
        raise ValueError(
            f"structure must be Diagonal(), Block(k), Dense() or None; got {structure!r}."
        )
    elif isinstance(structure, Diagonal):
        if a.shape != b.shape:
            raise ValueError(f"Diagonal() steps must have the shape of b {b.shape}; got {a.shape}.")
    elif b.ndim != 2 or a.shape != (b.shape[0], *structure.shape(b.shape[1])):
        raise ValueError(
            f"{structure} steps for b of shape {b.shape} must have shape "
            f"(T, *{structure.shape(b.shape[-1])}); got {a.shape}."
        )
    dtype = jnp.result_type(a, b)
    return a.astype(dtype), b.astype(dtype), structure, method


def linear_recurrence(
    a: Inexact[Array | np.ndarray, "..."],
    b: Inexact[Array | np.ndarray, "length ..."],
    h0: Inexact[Array | np.ndarray, "..."] | None = None,
    *,
    structure: Any = None,  # AbstractStructure | None, checked with a message that says how to fix it
    reverse: bool = False,
    method: Any = None,  # AbstractScanMethod | None, likewise
) -> Inexact[Array, "length ..."]:
    r"""All states of `h_t = A_t h_{t-1} + b_t`, `t = 1..T`.

    With `reverse=True` the same recurrence runs backwards in time:
    `h_t = A_t h_{t+1} + b_t`, `t = T..1`, and `h0` is the state after the last
    step.

    **Arguments:**

    - `a`: the step matrices `(T, *s)` in the layout of `structure`: `(T, ...)`
      like `b` for [`Diagonal`][sciml.recurrence.Diagonal] (any trailing shape,
      real or complex), `(T, K, K, n/K)` for `Block(K)`, `(T, n, n)` for `Dense`.
    - `b`: the inputs, `(T, ...)` (`(T, n)` for block and dense steps).
    - `h0`: the state before the first step, shape `b.shape[1:]`; default zeros.
    - `structure`: the structure of the steps; default: read from the shapes
      (`a.shape == b.shape` is diagonal).
    - `reverse`: run backwards in time.
    - `method`: [`SequentialScan`][sciml.recurrence.SequentialScan],
      [`AssociativeScan`][sciml.recurrence.AssociativeScan],
      [`ChunkedScan`][sciml.recurrence.ChunkedScan] or
      [`AutoScan`][sciml.recurrence.AutoScan] (default, `None`).

    **Returns:** the states `(T, ...)`; `h_t` includes `b_t`.
    """
    a, b, structure, method = _prepare(a, b, structure, method)
    if h0 is not None:
        h0 = jnp.asarray(h0, b.dtype)
        if h0.shape != b.shape[1:]:
            raise ValueError(f"h0 must have shape {b.shape[1:]} like the states; got {h0.shape}.")
    if b.shape[0] == 0:
        return b
    if reverse:
        a, b = a[::-1], b[::-1]
    if h0 is not None:
        b = b.at[0].add(structure.matvec(a[0], h0))
    h = method.solve(structure, a, b)
    return h[::-1] if reverse else h


def transposed_recurrence(
    a: Inexact[Array | np.ndarray, "..."],
    g: Inexact[Array | np.ndarray, "length ..."],
    *,
    structure: Any = None,
    method: Any = None,
) -> Inexact[Array, "length ..."]:
    r"""Solves the transposed system of [`linear_recurrence`][sciml.recurrence.linear_recurrence]:

    $$y_t = A_{t+1}^\top y_{t+1} + g_t,\quad t = T, \dots, 1,\qquad y_T = g_T,$$

    the adjoint recurrence of a backward pass (`A_1` is not used).

    **Arguments:** `a`, `structure`, `method` as for `linear_recurrence`; `g`, the
    cotangents `(T, ...)`.

    **Returns:** `y_1..y_T`, `(T, ...)`.
    """
    a, g, structure, method = _prepare(a, g, structure, method)
    if g.shape[0] == 0:
        return g
    later = structure.transpose(a[1:])  # A_{t+1}^T for t = 1..T-1; the last step starts at 0
    a = jnp.concatenate([later, jnp.zeros_like(a[:1])])
    return linear_recurrence(a, g, structure=structure, reverse=True, method=method)
