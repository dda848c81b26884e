"""Sequence layers around a cell: `RNN` (sequential / Newton / auto) and a residual model."""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float, Int, PRNGKeyArray

from ._cells import GRU, LSTM, AbstractCell, ParaGRU, ParaLSTM
from ._newton import NewtonDiagnostics, newton_solve, sequential_solve
from ._structure import parse_structure


MODES = ("sequential", "newton", "auto")
NEWTON_OPTIONS = tuple(
    name
    for name in inspect.signature(newton_solve).parameters
    if name not in ("fn", "h0", "xs", "structure")
)

# Where Newton mode is faster than sequential mode, per backend and Jacobian
# structure: `(min_length, max_length, max_batch_state)`, Newton when
# `min_length <= length <= max_length` and `batch_size * state_size <=
# max_batch_state` (`None`: no bound); a structure missing from a backend's
# table always runs sequentially.
# CPU: measured with `benchmarks/pararnn.py` on a 2-core CPU, forward+backward
# (training) time, see docs/benchmarks.md. Newton's forward pass lost everywhere
# (2.5-12x slower); its cheaper backward pass (one reverse linear recurrence
# instead of a reverse scan through every step) made training faster only for a
# single sequence (batch 1) of ParaGRU with hidden size 8, 1k-16k steps, in two
# runs (1.2-2.4x). ParaLSTM at hidden 8 was faster in one run and slower in the
# other, so block structures stay sequential.
# GPU/TPU: not measured in this repository; the published parallel-Newton
# speed-ups (ParaRNN, DEER) start at a few hundred steps. Rerun the benchmark
# on an accelerator to replace these entries: it prints the measured crossovers.
CROSSOVERS: dict[str, dict[str, tuple[int, int | None, int | None]]] = {
    "cpu": {"diagonal": (1024, 16384, 8)},
    "gpu": {"diagonal": (512, None, None), "block": (512, None, None), "dense": (512, None, 32)},
    "tpu": {"diagonal": (512, None, None), "block": (512, None, None), "dense": (512, None, 32)},
}


def choose_mode(
    length: int,
    state_size: int,
    structure: Any = "diagonal",
    *,
    batch_size: int = 1,
    backend: str | None = None,
) -> str:
    """The mode `RNN(mode="auto")` uses: `"newton"` or `"sequential"`.

    Looks up `CROSSOVERS[backend][structure kind]` (default backend: JAX's
    default): Newton when `length` is within the measured range and
    `batch_size * state_size` within the measured bound; sequential otherwise.
    """
    entry = CROSSOVERS.get(backend or jax.default_backend(), {}).get(
        parse_structure(structure).kind
    )
    if entry is None:
        return "sequential"
    min_length, max_length, max_batch_state = entry
    if length < min_length or (max_length is not None and length > max_length):
        return "sequential"
    if max_batch_state is not None and batch_size * state_size > max_batch_state:
        return "sequential"
    return "newton"


class RNN(eqx.Module):
    """A recurrent layer: runs a cell over a sequence, step by step or by Newton's method.

    Both modes use the same parameters and give the same outputs (to the
    Newton tolerance) and the same gradients: `"sequential"` is a `lax.scan`
    over the cell's steps with the input projections hoisted out of the loop;
    `"newton"` is [`newton_solve`][sciml.pararnn.newton_solve] with the cell's
    declared Jacobian structure and an implicit-function backward pass;
    `"auto"` picks per call from the backend, length, state size and batch size
    ([`choose_mode`][sciml.pararnn.choose_mode]).

    **Arguments:**

    - `cell`: an [`AbstractCell`][sciml.pararnn.AbstractCell] (`ParaGRU`,
      `ParaLSTM`, `GRU`, `LSTM` or your own).
    - `mode`: `"sequential"`, `"newton"` or `"auto"`.
    - `batch_size`: the batch size the layer is vmapped over; only `"auto"`
      uses it (a layer sees one sample and cannot know it).
    - `**newton_options`: keyword arguments of `newton_solve` (`max_iter`,
      `fallback`, `method`, `window`, `throw`, ...), used in Newton mode.
    """

    cell: AbstractCell
    mode: str = eqx.field(static=True)
    batch_size: int = eqx.field(static=True)
    newton_options: tuple[tuple[str, Any], ...] = eqx.field(static=True)

    def __init__(
        self, cell: AbstractCell, mode: str = "auto", *, batch_size: int = 1, **newton_options: Any
    ):
        if not isinstance(cell, AbstractCell):
            raise ValueError(
                f"cell must be an AbstractCell (ParaGRU, ParaLSTM, GRU, LSTM or a subclass); "
                f"got {type(cell).__name__}."
            )
        if mode not in MODES:
            raise ValueError(f"mode must be one of {MODES}; got {mode!r}.")
        unknown = sorted(set(newton_options) - set(NEWTON_OPTIONS))
        if unknown:
            raise ValueError(f"Unknown Newton options {unknown}; accepted: {list(NEWTON_OPTIONS)}.")
        options = tuple(sorted(newton_options.items()))
        try:
            hash(options)
        except TypeError:
            raise ValueError(
                "Newton options of a layer must be hashable (pass guess arrays to "
                "newton_solve directly)."
            ) from None
        if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
            raise ValueError(f"batch_size must be a positive integer; got {batch_size!r}.")
        self.cell, self.mode, self.batch_size = cell, mode, batch_size
        self.newton_options = options

    def with_mode(self, mode: str) -> RNN:
        """The same layer (same parameters) in another mode."""
        return RNN(self.cell, mode, batch_size=self.batch_size, **dict(self.newton_options))

    def resolved_mode(self, length: int) -> str:
        """`"sequential"` or `"newton"`: what a call on `length` steps runs."""
        if self.mode != "auto":
            return self.mode
        return choose_mode(
            length, self.cell.state_size, self.cell.structure, batch_size=self.batch_size
        )

    def _prepare(self, xs, h0):
        xs = jnp.asarray(xs)
        cell = self.cell
        if xs.ndim != 2 or xs.shape[1] != cell.input_size or xs.shape[0] < 1:
            raise ValueError(
                f"xs must have shape (length >= 1, input_size={cell.input_size}); got {xs.shape}. "
                "Layers take one sample: jax.vmap over a batch."
            )
        xs = eqx.error_if(xs, ~jnp.all(jnp.isfinite(xs)), "RNN: the input contains NaN or Inf.")
        us = cell.project(xs)
        if h0 is None:
            floats = [
                u for u in jax.tree_util.tree_leaves(us) if jnp.issubdtype(u.dtype, jnp.floating)
            ]
            dtype = jnp.result_type(*floats) if floats else jnp.zeros(()).dtype
            h0 = jnp.zeros(cell.state_size, dtype)
        h0 = jnp.asarray(h0)
        if h0.shape != (cell.state_size,):
            raise ValueError(
                f"h0 must have shape (state_size,) = ({cell.state_size},) for "
                f"{type(cell).__name__}(hidden_size={cell.hidden_size}); got {h0.shape}."
            )
        return us, h0

    def solve(
        self,
        xs: Float[Array | np.ndarray, "length input"],
        h0: Float[Array | np.ndarray, " state"] | None = None,
    ) -> tuple[Float[Array, "length state"], NewtonDiagnostics | None]:
        """The states of the recurrence and, in Newton mode, the solver diagnostics.

        **Arguments:** `xs` of shape `(length, input_size)`; `h0` of shape
        `(state_size,)`, default zeros.

        **Returns:** `(states, diagnostics)`: states of shape `(length,
        state_size)`; a [`NewtonDiagnostics`][sciml.pararnn.NewtonDiagnostics]
        in Newton mode, `None` in sequential mode.
        """
        us, h0 = self._prepare(xs, h0)
        if self.resolved_mode(jnp.shape(xs)[0]) == "sequential":
            return sequential_solve(self.cell.step, h0, us), None
        return newton_solve(
            self.cell.step,
            h0,
            us,
            structure=self.cell.structure,
            **dict(self.newton_options),
        )

    def __call__(
        self,
        xs: Float[Array | np.ndarray, "length input"],
        h0: Float[Array | np.ndarray, " state"] | None = None,
        *,
        key: PRNGKeyArray | None = None,
    ) -> Float[Array, "length hidden"]:
        """Outputs of shape `(length, hidden_size)` for inputs `(length, input_size)`."""
        del key
        return self.cell.readout(self.solve(xs, h0)[0])


CELLS: dict[str, type[AbstractCell]] = {
    "paragru": ParaGRU,
    "paralstm": ParaLSTM,
    "gru": GRU,
    "lstm": LSTM,
}


def make_cell(
    name: str, input_size: int, hidden_size: int, *, num_heads: int = 1, dtype=None, key
) -> AbstractCell:
    """A cell by name: `"paragru"`, `"paralstm"` (with `num_heads`), `"gru"`, `"lstm"`."""
    if name not in CELLS:
        raise ValueError(f"cell must be one of {sorted(CELLS)}; got {name!r}.")
    if name.startswith("para"):
        return CELLS[name](input_size, hidden_size, num_heads, dtype=dtype, key=key)
    return CELLS[name](input_size, hidden_size, dtype=dtype, key=key)


def _pointwise(module, xs):
    return jax.vmap(module)(xs)


class RNNBlock(eqx.Module):
    """Pre-norm residual block: `x + RNN(norm(x))`, then `x + MLP(norm(x))` per step.

    **Arguments:** `rnn` (an [`RNN`][sciml.pararnn.RNN] whose cell has
    `input_size == hidden_size == width`), `mlp_ratio` (hidden width of the
    two-layer GELU MLP in units of `width`), `key`.
    """

    norm1: eqx.nn.LayerNorm
    rnn: RNN
    norm2: eqx.nn.LayerNorm
    mlp_in: eqx.nn.Linear
    mlp_out: eqx.nn.Linear

    def __init__(self, rnn: RNN, mlp_ratio: int = 2, *, key: PRNGKeyArray):
        width = rnn.cell.input_size
        if rnn.cell.hidden_size != width:
            raise ValueError(
                "A residual block needs cell.input_size == cell.hidden_size; got "
                f"{width} and {rnn.cell.hidden_size}."
            )
        params = jax.tree_util.tree_leaves(eqx.filter(rnn.cell, eqx.is_inexact_array))
        dtype = jnp.result_type(*params) if params else jnp.zeros(()).dtype
        k1, k2 = jax.random.split(key)
        self.norm1 = eqx.nn.LayerNorm(width, dtype=dtype)
        self.rnn = rnn
        self.norm2 = eqx.nn.LayerNorm(width, dtype=dtype)
        self.mlp_in = eqx.nn.Linear(width, mlp_ratio * width, key=k1, dtype=dtype)
        self.mlp_out = eqx.nn.Linear(mlp_ratio * width, width, key=k2, dtype=dtype)

    def solve(
        self, xs: Float[Array, "length width"]
    ) -> tuple[Float[Array, "length width"], NewtonDiagnostics | None]:
        """The block output and the diagnostics of its RNN (`None` in sequential mode)."""
        states, diagnostics = self.rnn.solve(_pointwise(self.norm1, xs))
        xs = xs + self.rnn.cell.readout(states)
        hidden = jax.nn.gelu(_pointwise(self.mlp_in, _pointwise(self.norm2, xs)))
        return xs + _pointwise(self.mlp_out, hidden), diagnostics

    def __call__(self, xs: Float[Array, "length width"]) -> Float[Array, "length width"]:
        return self.solve(xs)[0]


class RNNModel(eqx.Module):
    """A multi-layer residual recurrent sequence model.

    Encoder (token embedding, or a linear map of real inputs), `depth`
    [`RNNBlock`][sciml.pararnn.RNNBlock]s, a final layer norm and a linear head,
    applied to one sequence (vmap over a batch). Causal: output `t` depends on
    inputs `1..t` only.

    **Arguments:**

    - `input_size`: vocabulary size if `tokens`, else input features.
    - `output_size`: output features (logits for a language model).
    - `width`, `depth`: model width and number of blocks.
    - `cell`: `"paragru"`, `"paralstm"`, `"gru"`, `"lstm"`, or a function
      `(width, key) -> AbstractCell` for your own cell.
    - `num_heads`: heads of the ParaRNN input projections.
    - `mlp_ratio`: MLP width in units of `width`.
    - `mode`: mode of every [`RNN`][sciml.pararnn.RNN] layer; `batch_size`
      is their hint for `"auto"`.
    - `tokens`: inputs are integer tokens of shape `(length,)`.
    - `dtype`, `key`; `**newton_options` go to every layer.
    """

    encoder: eqx.nn.Embedding | eqx.nn.Linear
    blocks: tuple[RNNBlock, ...]
    norm: eqx.nn.LayerNorm
    head: eqx.nn.Linear
    tokens: bool = eqx.field(static=True)

    def __init__(
        self,
        input_size: int,
        output_size: int,
        width: int,
        depth: int,
        *,
        cell: str | Callable[[int, PRNGKeyArray], AbstractCell] = "paragru",
        num_heads: int = 1,
        mlp_ratio: int = 2,
        mode: str = "auto",
        batch_size: int = 1,
        tokens: bool = False,
        dtype=None,
        key: PRNGKeyArray,
        **newton_options: Any,
    ):
        if isinstance(depth, bool) or not isinstance(depth, int) or depth < 1:
            raise ValueError(f"depth must be a positive integer; got {depth!r}.")
        dtype = jnp.zeros(()).dtype if dtype is None else dtype
        keys = jax.random.split(key, 2 * depth + 2)
        if tokens:
            self.encoder = eqx.nn.Embedding(input_size, width, key=keys[0], dtype=dtype)
        else:
            self.encoder = eqx.nn.Linear(input_size, width, key=keys[0], dtype=dtype)
        blocks = []
        for i in range(depth):
            cell_key, block_key = keys[2 + 2 * i], keys[3 + 2 * i]
            if callable(cell):
                layer_cell = cell(width, cell_key)
            else:
                layer_cell = make_cell(
                    cell, width, width, num_heads=num_heads, dtype=dtype, key=cell_key
                )
            rnn = RNN(layer_cell, mode, batch_size=batch_size, **newton_options)
            blocks.append(RNNBlock(rnn, mlp_ratio, key=block_key))
        self.blocks = tuple(blocks)
        self.norm = eqx.nn.LayerNorm(width, dtype=dtype)
        self.head = eqx.nn.Linear(width, output_size, key=keys[1], dtype=dtype)
        self.tokens = bool(tokens)

    def with_mode(self, mode: str) -> RNNModel:
        """The same model (same parameters) with every layer in `mode`."""
        return jax.tree_util.tree_map(
            lambda node: node.with_mode(mode) if isinstance(node, RNN) else node,
            self,
            is_leaf=lambda node: isinstance(node, RNN),
        )

    def solve(
        self, xs: Int[Array | np.ndarray, " length"] | Float[Array | np.ndarray, "length input"]
    ) -> tuple[Float[Array, "length output"], tuple[NewtonDiagnostics | None, ...]]:
        """The outputs and the per-layer Newton diagnostics (`None` for sequential layers)."""
        expected = 1 if self.tokens else 2
        if jnp.ndim(xs) != expected:
            kind = "tokens of shape (length,)" if self.tokens else "shape (length, input_size)"
            raise ValueError(f"RNNModel expects {kind}; got shape {jnp.shape(xs)}.")
        hs = _pointwise(self.encoder, xs)
        diagnostics = []
        for block in self.blocks:
            hs, layer_diagnostics = block.solve(hs)
            diagnostics.append(layer_diagnostics)
        return _pointwise(self.head, _pointwise(self.norm, hs)), tuple(diagnostics)

    def __call__(
        self, xs: Int[Array | np.ndarray, " length"] | Float[Array | np.ndarray, "length input"]
    ) -> Float[Array, "length output"]:
        """Outputs `(length, output_size)` for tokens `(length,)` or features `(length, input)`."""
        return self.solve(xs)[0]
