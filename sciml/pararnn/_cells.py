r"""Recurrent cells: the ParaRNN cells (diagonal / 2×2-block Jacobians) and classic dense ones.

A cell splits one step `h_t = f(h_{t-1}, x_t)` in two:

- `project(xs)`: everything that depends on the input only, for all steps at
  once (the input projections `B x_t + b`): one batched matmul, hoisted out of
  the recurrence in both the sequential and the Newton evaluation;
- `step(h, u)`: the recurrence proper on one projected input `u_t`.

`structure` declares the Jacobian `∂ step/∂h` as a
[`Diagonal()`][sciml.recurrence.Diagonal], `Block(K)` or `Dense()` (see
[`check_structure`][sciml.pararnn.check_structure]); `readout(states)` maps the
states to the layer outputs (the `h` half of an LSTM state `[c, h]`).
"""

from __future__ import annotations

import abc
import inspect
import math
from typing import Any, ClassVar

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float, PRNGKeyArray

from .._checks import check_float_dtype, check_positive_int
from ..recurrence import AbstractStructure, Block, Dense, Diagonal


def _recurrent_product(weight: Array, h: Array) -> Array:
    """`weight @ h` at the dtype's full precision.

    GPUs from Ampere on multiply float32 in TF32 (10-bit mantissa) by default,
    and not alike in the sequential scan (one matrix-vector product per step)
    and the Newton residual (one batched product over all steps): the residual
    of even the exact sequential states then sits near 1e-3, above float32's
    tolerance 1e-5, and no solve can pass. (Measured on an H200: a dense GRU of
    hidden size 64 over 16k steps failed Newton and its sequential fallback.)
    """
    return jnp.matmul(weight, h, precision=jax.lax.Precision.HIGHEST)


def declared_structure(cell: Any) -> AbstractStructure:
    """The Jacobian structure `cell` declares: the `structure` of an
    [`AbstractCell`][sciml.pararnn.AbstractCell] (also of its bound method,
    `para_gru.step`), which is `Dense()` unless the class declares another;
    `Dense()` (always correct) for any other function."""
    owner = cell.__self__ if inspect.ismethod(cell) else cell
    return owner.structure if isinstance(owner, AbstractCell) else Dense()


class AbstractCell(eqx.Module):
    """Base class of recurrent cells; subclass it to write your own.

    Subclasses set the class attribute `structure` (`Diagonal()`, `Block(K)`
    or `Dense()`), declare `input_size` and `hidden_size` as fields or
    properties, and implement `step`; `project` and `readout` default to the
    identity. `state_size` (the length of `h`) is `hidden_size` unless the
    subclass declares it too, as a field or a property (an LSTM's state
    `[c, h]` has `2 * hidden_size`).

    For example, a leaky tanh cell with a diagonal Jacobian:

    ```python
    from typing import ClassVar

    import equinox as eqx
    import jax.numpy as jnp
    from jaxtyping import Array
    from sciml.pararnn import AbstractCell, Diagonal
    from sciml.recurrence import AbstractStructure


    class Leaky(AbstractCell):
        structure: ClassVar[AbstractStructure] = Diagonal()
        a: Array
        input_size: int = eqx.field(static=True)
        hidden_size: int = eqx.field(static=True)
        state_size: int = eqx.field(static=True)

        def __init__(self, size: int):
            self.a = jnp.full(size, 0.5)
            self.input_size = self.hidden_size = self.state_size = size

        def step(self, h, u):
            return jnp.tanh(self.a * h + u)
    ```
    """

    structure: ClassVar[AbstractStructure] = Dense()

    input_size: eqx.AbstractVar[int]
    hidden_size: eqx.AbstractVar[int]

    # `state_size` defaults to `hidden_size` through `__getattr__` (consulted only
    # when normal lookup fails), not a property: a property on the base class
    # would be a data descriptor that a subclass field of that name cannot set.
    def __getattr__(self, name: str):
        if name == "state_size":
            return self.hidden_size
        raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")

    def project(self, xs: Float[Array | np.ndarray, "length input"]) -> Array:
        """Input-only part of every step, for all steps at once: `(length, ...)`."""
        return jnp.asarray(xs)

    @abc.abstractmethod
    def step(self, h: Float[Array, " state"], u: Array) -> Float[Array, " state"]:
        """One step of the recurrence on a projected input `u = project(xs)[t]`."""

    def readout(self, states: Float[Array, "length state"]) -> Float[Array, "length hidden"]:
        """Layer outputs from the states."""
        return states

    def __call__(
        self, h: Float[Array | np.ndarray, " state"], x: Float[Array | np.ndarray, " input"]
    ) -> Array:
        """One step from a raw input `x` of shape `(input_size,)`."""
        return self.step(jnp.asarray(h), self.project(jnp.asarray(x)[None])[0])


def _check_sizes(input_size, hidden_size, num_heads):
    for name, value in (
        ("input_size", input_size),
        ("hidden_size", hidden_size),
        ("num_heads", num_heads),
    ):
        check_positive_int(name, value)
    if input_size % num_heads or hidden_size % num_heads:
        raise ValueError(
            f"num_heads={num_heads} must divide input_size={input_size} and "
            f"hidden_size={hidden_size}."
        )


def _para_init(key, input_size, hidden_size, num_heads, dtype, rows_c=0):
    """ParaRNN initialisation of `(A, B, b, C)` for three gates, sizes checked:
    recurrent diagonals `A ~ N(0, (2/√(5H))²)` (the "xlstm" rule, also for the
    `rows_c` rows of peepholes `C`; None without), per-head input blocks `B`
    Xavier-uniform, biases zero except the first gate's `−linspace(0, 1, H)`."""
    _check_sizes(input_size, hidden_size, num_heads)
    dtype, rows_a = check_float_dtype("dtype", dtype), 3
    ka, kb, kc = jax.random.split(key, 3)
    head_in, head_state = input_size // num_heads, hidden_size // num_heads
    std = 2 / math.sqrt(5 * hidden_size)
    limit = math.sqrt(6 / (head_in + head_state))
    A = std * jax.random.normal(ka, (rows_a, hidden_size), dtype)
    B = jax.random.uniform(
        kb, (num_heads, head_in, rows_a, head_state), dtype, minval=-limit, maxval=limit
    )
    b = (
        jnp.zeros((rows_a, hidden_size), dtype)
        .at[0]
        .set(-jnp.linspace(0, 1, hidden_size, dtype=dtype))
    )
    C = std * jax.random.normal(kc, (rows_c, hidden_size), dtype) if rows_c else None
    return A, B, b, C


class _AbstractParaCell(AbstractCell):
    """What the ParaRNN cells share: per-head input projections `B x_t + b` with
    `B` block-diagonal over heads. Fields and constructors live in the final
    cells (their fields in the order of saved checkpoints)."""

    B: eqx.AbstractVar[Array]
    b: eqx.AbstractVar[Array]
    num_heads: eqx.AbstractVar[int]

    def project(
        self, xs: Float[Array | np.ndarray, "length input"]
    ) -> Float[Array, "length 3 hidden"]:
        xs = jnp.asarray(xs)
        num_heads, head_in, gates, head_state = self.B.shape
        x = xs.reshape(xs.shape[0], num_heads, head_in)
        u = jnp.einsum("thi,higj->tghj", x, self.B)
        return u.reshape(xs.shape[0], gates, num_heads * head_state) + self.b


class ParaGRU(_AbstractParaCell):
    r"""The ParaRNN GRU: diagonal recurrent weights, so `∂h'/∂h` is diagonal.

    $$\begin{aligned}
    z &= \sigma(a_z \odot h + B_z x + b_z), \qquad r = \sigma(a_r \odot h + B_r x + b_r),\\
    \hat h &= \tanh(a_h \odot (r \odot h) + B_h x + b_h), \qquad
    h' = z \odot \hat h + (1 - z) \odot h,
    \end{aligned}$$

    with the input maps `B` block-diagonal over `num_heads` heads (Danieli et
    al., 2025). Its Jacobian is exactly diagonal:
    `∂h'/∂h = (1−z) + (ĥ−h)⊙σ'_z⊙a_z + z⊙tanh'⊙a_h⊙(r + h⊙σ'_r⊙a_r)`.

    **Arguments:** `input_size`, `hidden_size`, `num_heads` (divides both),
    `dtype` (default float32, or float64 with x64 on), `key`.

    Fields: `A` `(3, hidden)` (rows z, r, h), `B` `(heads, input/heads, 3,
    hidden/heads)`, `b` `(3, hidden)`.
    """

    structure: ClassVar[AbstractStructure] = Diagonal()
    A: Float[Array, "3 hidden"]
    B: Float[Array, "heads head_in 3 head_hidden"]
    b: Float[Array, "3 hidden"]
    input_size: int = eqx.field(static=True)
    hidden_size: int = eqx.field(static=True)
    num_heads: int = eqx.field(static=True)

    def __init__(
        self, input_size: int, hidden_size: int, num_heads=1, *, dtype=None, key: PRNGKeyArray
    ):
        self.A, self.B, self.b, _ = _para_init(key, input_size, hidden_size, num_heads, dtype)
        self.input_size, self.hidden_size, self.num_heads = input_size, hidden_size, num_heads

    def step(self, h: Float[Array, " hidden"], u: Float[Array, "3 hidden"]) -> Array:
        z = jax.nn.sigmoid(self.A[0] * h + u[0])
        r = jax.nn.sigmoid(self.A[1] * h + u[1])
        candidate = jnp.tanh(self.A[2] * (r * h) + u[2])
        return z * candidate + (1 - z) * h


class ParaLSTM(_AbstractParaCell):
    r"""The ParaRNN LSTM: coupled input and forget gates (CIFG), diagonal recurrent
    weights and peepholes, state `s = [c, h]`; `∂s'/∂s` is `2 × 2` blocks of diagonals.

    $$\begin{aligned}
    f &= \sigma(a_f \odot h + B_f x + p_f \odot c + b_f), \qquad
    \hat c = \tanh(a_c \odot h + B_c x + b_c), \qquad c' = f \odot c + (1 - f) \odot \hat c,\\
    o &= \sigma(a_o \odot h + B_o x + p_o \odot c' + b_o), \qquad h' = o \odot \tanh(c'),
    \end{aligned}$$

    with `B` block-diagonal over heads (Danieli et al., 2025). The layer output
    is `h`; the state size is `2 · hidden_size`.

    **Arguments:** `input_size`, `hidden_size`, `num_heads`, `dtype`, `key`.

    Fields: `A` `(3, hidden)` (rows f, o, c), `C` `(2, hidden)` (peepholes
    f, o), `B` `(heads, input/heads, 3, hidden/heads)`, `b` `(3, hidden)`.
    """

    structure: ClassVar[AbstractStructure] = Block(2)
    A: Float[Array, "3 hidden"]
    C: Float[Array, "2 hidden"]
    B: Float[Array, "heads head_in 3 head_hidden"]
    b: Float[Array, "3 hidden"]
    input_size: int = eqx.field(static=True)
    hidden_size: int = eqx.field(static=True)
    num_heads: int = eqx.field(static=True)

    @property
    def state_size(self) -> int:
        return 2 * self.hidden_size

    def __init__(
        self, input_size: int, hidden_size: int, num_heads=1, *, dtype=None, key: PRNGKeyArray
    ):
        self.A, self.B, self.b, self.C = _para_init(
            key, input_size, hidden_size, num_heads, dtype, rows_c=2
        )
        self.input_size, self.hidden_size, self.num_heads = input_size, hidden_size, num_heads

    def step(self, s: Float[Array, " state"], u: Float[Array, "3 hidden"]) -> Array:
        c, h = jnp.split(s, 2)
        forget = jax.nn.sigmoid(self.A[0] * h + u[0] + self.C[0] * c)
        candidate = jnp.tanh(self.A[2] * h + u[2])
        c = forget * c + (1 - forget) * candidate
        out = jax.nn.sigmoid(self.A[1] * h + u[1] + self.C[1] * c)
        return jnp.concatenate([c, out * jnp.tanh(c)])

    def readout(self, states: Float[Array, "length state"]) -> Float[Array, "length hidden"]:
        return states[:, self.hidden_size :]


def _dense_init(key, input_size, hidden_size, gates, dtype, n_biases=1):
    """Dense cell weights `(weight_ih, weight_hh, bias, ...)` of `gates` gates,
    sizes checked, every entry `U(−1/√H, 1/√H)` (equinox's and PyTorch's rule);
    the second bias, if any, has `H` entries."""
    _check_sizes(input_size, hidden_size, 1)
    dtype, limit = check_float_dtype("dtype", dtype), 1 / math.sqrt(hidden_size)
    rows = gates * hidden_size
    shapes = [(rows, input_size), (rows, hidden_size), (rows,), (hidden_size,)][: 2 + n_biases]
    keys = jax.random.split(key, len(shapes))
    return tuple(
        jax.random.uniform(k, shape, dtype, minval=-limit, maxval=limit)
        for k, shape in zip(keys, shapes)
    )


class GRU(AbstractCell):
    r"""The classic GRU cell with dense recurrent weights (dense Jacobian; for small `H`).

    $$r = \sigma(W_r x + U_r h + b_r),\quad z = \sigma(W_z x + U_z h + b_z),\quad
      n = \tanh(W_n x + b_n + r \odot (U_n h + b'_n)),\quad h' = n + z \odot (h - n),$$

    the convention of `equinox.nn.GRUCell` (and PyTorch), with the same field
    names and initialisation `U(−1/√H, 1/√H)`.
    """

    structure: ClassVar[AbstractStructure] = Dense()
    weight_ih: Float[Array, "gate_rows input"]
    weight_hh: Float[Array, "gate_rows hidden"]
    bias: Float[Array, " gate_rows"]
    bias_n: Float[Array, " hidden"]
    input_size: int = eqx.field(static=True)
    hidden_size: int = eqx.field(static=True)

    def __init__(self, input_size: int, hidden_size: int, *, dtype=None, key: PRNGKeyArray):
        self.weight_ih, self.weight_hh, self.bias, self.bias_n = _dense_init(
            key, input_size, hidden_size, 3, dtype, n_biases=2
        )
        self.input_size, self.hidden_size = input_size, hidden_size

    def project(
        self, xs: Float[Array | np.ndarray, "length input"]
    ) -> Float[Array, "length gate_rows"]:
        return jnp.asarray(xs) @ self.weight_ih.T + self.bias

    def step(self, h: Float[Array, " hidden"], u: Float[Array, " gate_rows"]) -> Array:
        ur, uz, un = jnp.split(u, 3)
        hr, hz, hn = jnp.split(_recurrent_product(self.weight_hh, h), 3)
        reset = jax.nn.sigmoid(ur + hr)
        update = jax.nn.sigmoid(uz + hz)
        new = jnp.tanh(un + reset * (hn + self.bias_n))
        return new + update * (h - new)


class LSTM(AbstractCell):
    r"""The classic LSTM cell with dense recurrent weights, state `s = [c, h]` (dense Jacobian).

    $$i, f, g, o = \sigma, \sigma, \tanh, \sigma\,(W x + U h + b),\qquad
      c' = f \odot c + i \odot g,\qquad h' = o \odot \tanh(c'),$$

    the convention of `equinox.nn.LSTMCell`, same field names and
    initialisation. The layer output is `h`; the state size is `2 · hidden_size`.
    """

    structure: ClassVar[AbstractStructure] = Dense()
    weight_ih: Float[Array, "gate_rows input"]
    weight_hh: Float[Array, "gate_rows hidden"]
    bias: Float[Array, " gate_rows"]
    input_size: int = eqx.field(static=True)
    hidden_size: int = eqx.field(static=True)

    def __init__(self, input_size: int, hidden_size: int, *, dtype=None, key: PRNGKeyArray):
        self.weight_ih, self.weight_hh, self.bias = _dense_init(
            key, input_size, hidden_size, 4, dtype
        )
        self.input_size, self.hidden_size = input_size, hidden_size

    @property
    def state_size(self) -> int:
        return 2 * self.hidden_size

    def project(
        self, xs: Float[Array | np.ndarray, "length input"]
    ) -> Float[Array, "length gate_rows"]:
        return jnp.asarray(xs) @ self.weight_ih.T + self.bias

    def step(self, s: Float[Array, " state"], u: Float[Array, " gate_rows"]) -> Array:
        c, h = jnp.split(s, 2)
        i, f, g, o = jnp.split(u + _recurrent_product(self.weight_hh, h), 4)
        c = jax.nn.sigmoid(f) * c + jax.nn.sigmoid(i) * jnp.tanh(g)
        return jnp.concatenate([c, jax.nn.sigmoid(o) * jnp.tanh(c)])

    def readout(self, states: Float[Array, "length state"]) -> Float[Array, "length hidden"]:
        return states[:, self.hidden_size :]
