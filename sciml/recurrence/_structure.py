"""Structures of the step matrices `A_t` of a linear recurrence (the Jacobians of a cell).

A structure says which entries of an `n × n` matrix can be non-zero and fixes
the array layout in which a stack of such matrices is stored:

| structure | non-zeros | stored as | JVPs per Jacobian |
| --- | --- | --- | --- |
| [`Diagonal()`][sciml.recurrence.Diagonal] | the diagonal | `(..., n)` | 1 |
| [`Block(K)`][sciml.recurrence.Block] | `K × K` blocks, each a diagonal of size `m = n / K` | `(K, K, m)` | `K` |
| [`Dense()`][sciml.recurrence.Dense] | all | `(n, n)` | `n` |

For `Block(K)` the state is `K` contiguous pieces of size `m` (the ParaLSTM
state `[c, h]` is `Block(2)`), and `A[i*m + p, j*m + p] = a[i, j, p]`.

Each structure carries its own algebra (`matvec`, `matmul`, `transpose`,
`identity`, `diagonal`, `to_dense`) and computes a function's Jacobian in its
layout from as few JVPs as the structure allows (`value_and_jacobian`). The
cheap ones use indicator tangents: `J @ 1` is the diagonal only if `J` really
is diagonal, which `sciml.pararnn.check_structure` verifies.
"""

from __future__ import annotations

import abc
from collections.abc import Callable
from typing import ClassVar

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float

from .._checks import check_positive_int


class AbstractStructure(eqx.Module):
    """A structure of square matrices and their algebra on stacks (leading axes broadcast)."""

    kind: ClassVar[str]

    @abc.abstractmethod
    def shape(self, n: int) -> tuple[int, ...]:
        """Shape of one matrix for states of size `n`; raises `ValueError` if impossible."""

    @abc.abstractmethod
    def matvec(self, a: Array | np.ndarray, y: Array | np.ndarray) -> Array:
        """`a @ y` for stacks of matrices `a` and vectors `y` of size `n`."""

    @abc.abstractmethod
    def matmul(self, a: Array | np.ndarray, b: Array | np.ndarray) -> Array:
        """`a @ b` for two stacks of matrices."""

    @abc.abstractmethod
    def transpose(self, a: Array | np.ndarray) -> Array:
        """The transposed matrices, in the same layout."""

    @abc.abstractmethod
    def identity(self, n: int, dtype) -> Array:
        """The `n × n` identity in this layout."""

    def identity_like(self, a: Array | np.ndarray) -> Array:
        """Identities in the layout and (broadcast) shape of the stack `a`."""
        return jnp.broadcast_to(self.identity(self.size(a), a.dtype), a.shape)

    @abc.abstractmethod
    def size(self, a: Array | np.ndarray) -> int:
        """The state size `n` of matrices stored as `a`."""

    @abc.abstractmethod
    def diagonal(self, a: Array | np.ndarray) -> Array:
        """The diagonal entries `(..., n)`."""

    @abc.abstractmethod
    def to_dense(self, a: Array | np.ndarray) -> Array:
        """The matrices as dense `(..., n, n)` arrays."""

    @abc.abstractmethod
    def value_and_jacobian(
        self, fn: Callable[[Array], Array], h: Float[Array, " n"]
    ) -> tuple[Float[Array, " n"], Array]:
        """`fn(h)` and `∂fn/∂h` at `h` in this layout (exact only if `∂fn/∂h` has
        this structure)."""

    def __str__(self) -> str:
        return self.kind


class Diagonal(AbstractStructure):
    """Diagonal matrices stored as their diagonals `(..., n)`; elementwise algebra (any
    trailing shape, real or complex). Jacobian: one JVP with an all-ones tangent."""

    kind: ClassVar[str] = "diagonal"

    def shape(self, n: int) -> tuple[int, ...]:
        return (n,)

    def matvec(self, a, y):
        return a * y

    def matmul(self, a, b):
        return a * b

    def transpose(self, a):
        return a

    def identity(self, n, dtype):
        return jnp.ones((n,), dtype)

    def identity_like(self, a):
        return jnp.ones_like(a)

    def size(self, a):
        return a.shape[-1]

    def diagonal(self, a):
        return a

    def to_dense(self, a):
        return a[..., :, None] * jnp.eye(a.shape[-1], dtype=a.dtype)

    def value_and_jacobian(self, fn, h):
        return jax.jvp(fn, (h,), (jnp.ones_like(h),))


class Dense(AbstractStructure):
    """Dense matrices `(..., n, n)`. Jacobian: `n` JVPs (`jax.jacfwd`)."""

    kind: ClassVar[str] = "dense"

    def shape(self, n: int) -> tuple[int, ...]:
        return (n, n)

    def matvec(self, a, y):
        return jnp.einsum("...ij,...j->...i", a, y)

    def matmul(self, a, b):
        return a @ b

    def transpose(self, a):
        return jnp.swapaxes(a, -1, -2)

    def identity(self, n, dtype):
        return jnp.eye(n, dtype=dtype)

    def size(self, a):
        return a.shape[-1]

    def diagonal(self, a):
        return jnp.diagonal(a, axis1=-2, axis2=-1)

    def to_dense(self, a):
        return a

    def value_and_jacobian(self, fn, h):
        jac, value = jax.jacfwd(lambda v: (fn(v), fn(v)), has_aux=True)(h)
        return value, jac


class Block(AbstractStructure):
    """`K × K` blocks, each a diagonal matrix, stored as `(..., K, K, n/K)`.

    **Arguments:** `k`, the number of blocks per row (`Block(1)` is diagonal in
    the block layout). Jacobian: `K` JVPs with the indicator tangents of the
    `K` state pieces; piece `i` of the `j`-th result is the diagonal of block
    `(i, j)`.
    """

    kind: ClassVar[str] = "block"
    k: int = eqx.field(static=True)

    def __check_init__(self):
        check_positive_int("k", self.k)

    def __str__(self) -> str:
        return f"block({self.k})"

    def shape(self, n: int) -> tuple[int, ...]:
        if n % self.k:
            raise ValueError(
                f"Block({self.k}) needs a state size divisible by {self.k}, got {n}; "
                "use Dense() or a block count that divides the state size."
            )
        return (self.k, self.k, n // self.k)

    def matvec(self, a, y):
        k, m = a.shape[-3], a.shape[-1]
        out = jnp.einsum("...ijp,...jp->...ip", a, y.reshape(*y.shape[:-1], k, m))
        return out.reshape(*out.shape[:-2], k * m)

    def matmul(self, a, b):
        return jnp.einsum("...ijp,...jkp->...ikp", a, b)

    def transpose(self, a):
        return jnp.swapaxes(a, -3, -2)

    def identity(self, n, dtype):
        k = self.k
        return jnp.broadcast_to(jnp.eye(k, dtype=dtype)[:, :, None], (k, k, n // k))

    def size(self, a):
        return a.shape[-3] * a.shape[-1]

    def diagonal(self, a):
        blocks = jnp.diagonal(a, axis1=-3, axis2=-2)  # (..., m, K)
        return jnp.swapaxes(blocks, -1, -2).reshape(*a.shape[:-3], -1)

    def to_dense(self, a):
        k, m = a.shape[-3], a.shape[-1]
        dense = a[..., :, :, :, None] * jnp.eye(m, dtype=a.dtype)  # block (i, j) = diag(a[i, j])
        return jnp.swapaxes(dense, -3, -2).reshape(*a.shape[:-3], k * m, k * m)

    def value_and_jacobian(self, fn, h):
        k = self.k
        m = h.shape[-1] // k
        tangents = jnp.repeat(jnp.eye(k, dtype=h.dtype), m, axis=1)  # (K, n)
        value, columns = jax.vmap(lambda t: jax.jvp(fn, (h,), (t,)), out_axes=(None, 0))(tangents)
        # columns[j, i*m + p] = J[i*m + p, j*m + p] = a[i, j, p]
        return value, jnp.swapaxes(columns.reshape(k, k, m), 0, 1)


def infer_structure(a_shape: tuple[int, ...], b_shape: tuple[int, ...]) -> AbstractStructure:
    """The structure of step matrices of shape `(T, *s)` acting on states `(T, n)`:
    `s = (n,)` diagonal, `(n, n)` dense, `(K, K, n/K)` block."""
    if len(b_shape) != 2:
        raise ValueError(f"b must have shape (length, n); got shape {b_shape}.")
    length, n = b_shape
    s = tuple(a_shape[1:])
    if a_shape[:1] != (length,):
        raise ValueError(f"A must have the same length as b ({length}); got A of shape {a_shape}.")
    if s == (n,):
        return Diagonal()
    if s == (n, n):
        return Dense()
    if len(s) == 3 and s[0] == s[1] and s[0] * s[2] == n:
        return Block(s[0])
    raise ValueError(
        f"A of shape {a_shape} does not fit states of shape {b_shape}: expected (T, n) "
        "for diagonal, (T, n, n) for dense or (T, K, K, n/K) for block-diagonal steps."
    )
