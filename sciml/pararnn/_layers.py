"""Sequence layers around a cell: `RNN` (any solver) and a residual model."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float, Int, PRNGKeyArray

from .._checks import (
    check_choice,
    check_finite,
    check_float_dtype,
    check_positive_int,
    default_float_dtype,
)
from ..solution import Solution
from ._auto import Auto
from ._cells import GRU, LSTM, AbstractCell, ParaGRU, ParaLSTM
from ._solve import solve_recurrence
from ._solvers import AbstractSolver, check_solver_type, sequential_solve


class RNN(eqx.Module):
    """A recurrent layer: runs a cell over a sequence with a solver.

    Every solver gives the same outputs (to the Newton tolerance) and the same
    gradients from the same parameters:
    [`Sequential()`][sciml.pararnn.Sequential] is a `lax.scan` over the cell's
    steps with the input projections hoisted out of the loop;
    [`Newton`][sciml.pararnn.Newton] (usually inside
    [`Fallback`][sciml.pararnn.Fallback]) uses the cell's declared Jacobian
    structure and an implicit-function backward pass;
    [`Auto()`][sciml.pararnn.Auto] (default) picks per call from the backend,
    length, state size and its `batch_size`.

    **Arguments:**

    - `cell`: an [`AbstractCell`][sciml.pararnn.AbstractCell] (`ParaGRU`,
      `ParaLSTM`, `GRU`, `LSTM` or your own).
    - `solver`: an [`AbstractSolver`][sciml.pararnn.AbstractSolver].

    Non-finite input (the package's policy): a concrete `xs` or `h0` holding
    NaN or Inf (an eager call) raises a `ValueError` naming it before anything
    runs; inside `jit`/`vmap`/`grad` nothing is checked on the host (check a
    batch once, as `sciml.training.fit` does), and the parallel solvers report
    it in their [`Solution`][sciml.solution.Solution] (`recurrence_nonfinite`).
    """

    # checked in __check_init__, with messages that say how to fix the call
    cell: Any
    solver: Any = Auto()

    def __check_init__(self):
        if not isinstance(self.cell, AbstractCell):
            raise ValueError(
                f"cell must be an AbstractCell (ParaGRU, ParaLSTM, GRU, LSTM or a subclass); "
                f"got {type(self.cell).__name__}."
            )
        check_solver_type(self.solver)

    def with_solver(self, solver: AbstractSolver) -> RNN:
        """The same layer (same parameters) with another solver."""
        return RNN(self.cell, solver)

    def resolved_solver(self, length: int) -> AbstractSolver:
        """The solver a call on `length` steps runs (`Auto` resolved)."""
        return self.solver.select(length, self.cell.state_size, self.cell.structure)

    def _prepare(self, xs, h0):
        xs = jnp.asarray(xs)
        cell = self.cell
        if xs.ndim != 2 or xs.shape[1] != cell.input_size or xs.shape[0] < 1:
            raise ValueError(
                f"xs must have shape (length >= 1, input_size={cell.input_size}); got {xs.shape}. "
                "Layers take one sample: jax.vmap over a batch."
            )
        check_finite("xs", xs)  # concrete (eager) input only: see sciml._checks
        us = cell.project(xs)
        if h0 is None:
            floats = [
                u for u in jax.tree_util.tree_leaves(us) if jnp.issubdtype(u.dtype, jnp.floating)
            ]
            dtype = jnp.result_type(*floats) if floats else default_float_dtype()
            h0 = jnp.zeros(cell.state_size, dtype)
        h0 = jnp.asarray(h0)
        if h0.shape != (cell.state_size,):
            raise ValueError(
                f"h0 must have shape (state_size,) = ({cell.state_size},) for "
                f"{type(cell).__name__}(hidden_size={cell.hidden_size}); got {h0.shape}."
            )
        check_finite("h0", h0)
        return us, h0

    def solve(
        self,
        xs: Float[Array | np.ndarray, "..."],  # (length, input): checked, naming the fix
        h0: Float[Array | np.ndarray, "..."] | None = None,  # (state,): likewise
    ) -> tuple[Float[Array, "length state"], Solution | None]:
        """The states of the recurrence and, for the parallel solvers, the solution.

        **Arguments:** `xs` of shape `(length, input_size)`; `h0` of shape
        `(state_size,)`, default zeros.

        **Returns:** `(states, solution)`: states of shape `(length,
        state_size)`; the [`Solution`][sciml.solution.Solution] of
        [`solve_recurrence`][sciml.pararnn.solve_recurrence] (its `stats`
        hold the iterations, residual, fallback use), `None` when the call ran
        sequentially.
        """
        us, h0 = self._prepare(xs, h0)
        solver = self.resolved_solver(jnp.shape(xs)[0])
        if not solver.parallel:
            return sequential_solve(self.cell.step, h0, us, unroll=solver.unroll), None
        solution = solve_recurrence(self.cell.step, h0, us, solver, structure=self.cell.structure)
        return solution.value, solution

    def __call__(
        self,
        xs: Float[Array | np.ndarray, "..."],  # (length, input): checked, naming the fix
        h0: Float[Array | np.ndarray, "..."] | None = None,  # (state,): likewise
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
    check_choice("cell", name, sorted(CELLS))
    if name.startswith("para"):
        return CELLS[name](input_size, hidden_size, num_heads, dtype=dtype, key=key)
    return CELLS[name](input_size, hidden_size, dtype=dtype, key=key)


def _check_tokens(xs, vocabulary: int) -> None:
    """Token ids must be integers in `[0, vocabulary)`; values are checked only
    when concrete (an eager call), since JAX clamps out-of-range indices."""
    dtype = jnp.result_type(xs)
    if not jnp.issubdtype(dtype, jnp.integer):
        raise TypeError(
            f"`xs` must hold integer token ids (tokens=True); got dtype {dtype}. "
            "Cast with xs.astype(jnp.int32), or build the model with tokens=False."
        )
    if isinstance(xs, jax.core.Tracer) or jnp.size(xs) == 0:
        return
    low, high = int(jnp.min(xs)), int(jnp.max(xs))
    if low < 0 or high >= vocabulary:
        raise ValueError(
            f"`xs` token ids must lie in [0, {vocabulary}) (input_size={vocabulary}); got ids "
            f"from {low} to {high}. Under jit they would be clamped silently."
        )


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
        dtype = jnp.result_type(*params) if params else default_float_dtype()
        k1, k2 = jax.random.split(key)
        self.norm1 = eqx.nn.LayerNorm(width, dtype=dtype)
        self.rnn = rnn
        self.norm2 = eqx.nn.LayerNorm(width, dtype=dtype)
        self.mlp_in = eqx.nn.Linear(width, mlp_ratio * width, key=k1, dtype=dtype)
        self.mlp_out = eqx.nn.Linear(mlp_ratio * width, width, key=k2, dtype=dtype)

    def solve(
        self, xs: Float[Array, "length width"]
    ) -> tuple[Float[Array, "length width"], Solution | None]:
        """The block output and the solution of its RNN (`None` if it ran sequentially)."""
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
    - `solver`: the solver of every [`RNN`][sciml.pararnn.RNN] layer (default
      [`Auto()`][sciml.pararnn.Auto], `None`; set its `batch_size`).
    - `tokens`: inputs are integer tokens of shape `(length,)` with ids in
      `[0, input_size)`. A concrete (eager) input with an id out of range, or
      a non-integer dtype, raises `ValueError` / `TypeError`; under `jit` the
      ids cannot be checked, and an out-of-range id is clamped to the nearest
      valid one (JAX's indexing rule), so check token data before training.
    - `dtype`, `key`.

    Real-valued inputs (`tokens=False`) follow the non-finite policy of
    [`RNN`][sciml.pararnn.RNN]: checked when concrete, not under `jit`.
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
        solver: AbstractSolver | None = None,
        tokens: bool = False,
        dtype=None,
        key: PRNGKeyArray,
    ):
        check_positive_int("depth", depth)
        dtype = check_float_dtype("dtype", dtype)
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
            rnn = RNN(layer_cell, Auto() if solver is None else solver)
            blocks.append(RNNBlock(rnn, mlp_ratio, key=block_key))
        self.blocks = tuple(blocks)
        self.norm = eqx.nn.LayerNorm(width, dtype=dtype)
        self.head = eqx.nn.Linear(width, output_size, key=keys[1], dtype=dtype)
        self.tokens = bool(tokens)

    def with_solver(self, solver: AbstractSolver) -> RNNModel:
        """The same model (same parameters) with `solver` in every layer."""
        return jax.tree_util.tree_map(
            lambda node: node.with_solver(solver) if isinstance(node, RNN) else node,
            self,
            is_leaf=lambda node: isinstance(node, RNN),
        )

    def solve(
        self, xs: Int[Array | np.ndarray, " length"] | Float[Array | np.ndarray, "length input"]
    ) -> tuple[Float[Array, "length output"], tuple[Solution | None, ...]]:
        """The outputs and the per-layer solutions (`None` for layers run sequentially)."""
        expected = 1 if self.tokens else 2
        if jnp.ndim(xs) != expected:
            kind = "tokens of shape (length,)" if self.tokens else "shape (length, input_size)"
            raise ValueError(f"RNNModel expects {kind}; got shape {jnp.shape(xs)}.")
        if self.tokens:
            _check_tokens(xs, self.encoder.num_embeddings)
        else:
            check_finite("xs", xs)
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
