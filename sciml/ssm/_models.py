"""Sequence models built from S4D / S5 layers, and their optimiser group.

- `SequenceBlock`: (pre-)norm → SSM → activation (GELU, GLU or S5's gated
  variants) with dropout tied along the sequence → residual (→ post-norm).
- `SequenceModel`: linear encoder, `n_layers` blocks, (final norm), pooling
  (`"mean"`, `"last"` or none) and a linear decoder: a classifier or regressor
  of one sequence, or a sequence-to-sequence map; with step mode for
  autoregressive generation.
- `ssm_labels`: the `(Λ, B, Δ)` parameters in their own optimiser group
  (smaller learning rate, no weight decay, as S4 and S5 train; its docstring
  shows the two-line optimiser).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import equinox as eqx
import jax
import jax.numpy as jnp
from jaxtyping import Array, Float, PRNGKeyArray, PyTree

from .._checks import check_choice, check_finite, check_float_dtype
from ._diagonal import _DiagonalSSM
from ._recurrent import check_real_input
from ._s4d import S4D
from ._s5 import S5


LAYERS = {"s4d": S4D, "s5": S5}
NORMS = ("layer", "none")
ACTIVATIONS = ("gelu", "glu", "full_glu", "half_glu1", "half_glu2")
POOLINGS = ("mean", "last", "none")
SSM_GROUP = "ssm"


def _per_token(layer, x: Array) -> Array:
    """Applies a per-feature-vector module to `(features,)` or `(length, features)`."""
    return layer(x) if x.ndim == 1 else jax.vmap(layer)(x)


class SequenceBlock(eqx.Module):
    """One residual block around an S4D or S5 layer.

    `x + post(SSM(norm(x)))` (pre-norm) or `norm(x + post(SSM(x)))`
    (post-norm), where `post` is, for activation

    - `"gelu"`: dropout(GELU(y)) → Linear(H→H) (S4 with no GLU);
    - `"glu"`: dropout(GELU(y)) → Linear(H→2H) → GLU (S4's default);
    - `"full_glu"`: h = dropout(GELU(y)); dropout(W₁h ⊙ σ(W₂h)) (S5);
    - `"half_glu1"`: h = dropout(GELU(y)); dropout(h ⊙ σ(Wh)) (S5's default);
    - `"half_glu2"`: h = dropout(GELU(y)); dropout(y ⊙ σ(Wh)) (S5).

    Dropout masks are tied along the sequence (one mask per feature) and only
    active when a `key` is passed.

    **Arguments:**

    - `ssm`: an [`S4D`][sciml.ssm.S4D] or [`S5`][sciml.ssm.S5] layer.
    - `activation`, `dropout` (rate), `prenorm`, `norm` (`"layer"` or `"none"`).
    - `key`: PRNG key for the linear layers.
    """

    ssm: _DiagonalSSM
    norm: eqx.nn.LayerNorm | None
    out1: eqx.nn.Linear | None
    out2: eqx.nn.Linear | None
    activation: str = eqx.field(static=True)
    dropout: float = eqx.field(static=True)
    prenorm: bool = eqx.field(static=True)

    def __init__(
        self,
        ssm: _DiagonalSSM,
        *,
        activation: str = "glu",
        dropout: float = 0.0,
        prenorm: bool = True,
        norm: str = "layer",
        key: PRNGKeyArray,
    ):
        check_choice("activation", activation, ACTIVATIONS)
        check_choice("norm", norm, NORMS)
        if not 0.0 <= dropout < 1.0:
            raise ValueError(f"dropout must be in [0, 1), got {dropout}.")
        H = ssm.features
        dtype = ssm.D.dtype
        k1, k2 = jax.random.split(key)
        width = {"gelu": H, "glu": 2 * H, "full_glu": H}.get(activation)
        self.out1 = None if width is None else eqx.nn.Linear(H, width, key=k1, dtype=dtype)
        gated = activation in ("full_glu", "half_glu1", "half_glu2")
        self.out2 = eqx.nn.Linear(H, H, key=k2, dtype=dtype) if gated else None
        self.norm = eqx.nn.LayerNorm(H, dtype=dtype) if norm == "layer" else None
        self.ssm, self.activation, self.dropout, self.prenorm = ssm, activation, dropout, prenorm

    def _drop(self, x: Array, key: PRNGKeyArray | None) -> Array:
        if key is None or self.dropout == 0.0:
            return x
        keep = jax.random.bernoulli(key, 1.0 - self.dropout, x.shape[-1:])
        return jnp.where(keep, x / (1.0 - self.dropout), 0.0)

    def _post(self, y: Array, key: PRNGKeyArray | None) -> Array:
        k1, k2 = (None, None) if key is None else jax.random.split(key)
        h = self._drop(jax.nn.gelu(y), k1)
        if self.activation == "gelu":
            return _per_token(self.out1, h)
        if self.activation == "glu":
            return jax.nn.glu(_per_token(self.out1, h), axis=-1)
        gate = jax.nn.sigmoid(_per_token(self.out2, h))
        value = {"full_glu": lambda: _per_token(self.out1, h), "half_glu1": lambda: h}.get(
            self.activation, lambda: y
        )()
        return self._drop(value * gate, k2)

    def _norm(self, x: Array) -> Array:
        return x if self.norm is None else _per_token(self.norm, x)

    def __call__(
        self, x: Float[Array, "length features"], *, key: PRNGKeyArray | None = None
    ) -> Float[Array, "length features"]:
        """Applies the block to one sequence `(L, H)`; dropout only with a `key`."""
        y = self.ssm(self._norm(x) if self.prenorm else x)
        x = x + self._post(y, key)
        return x if self.prenorm else self._norm(x)

    def init_state(self) -> Array:
        return self.ssm.init_state()

    def step(self, state: Array, x_t: Float[Array, " features"]) -> tuple[Array, Array]:
        """One token `(H,)` through the block in recurrent mode (no dropout)."""
        state, y = self.ssm.step(state, self._norm(x_t) if self.prenorm else x_t)
        x_t = x_t + self._post(y, None)
        return state, (x_t if self.prenorm else self._norm(x_t))


class SequenceModel(eqx.Module):
    """Encoder → `n_layers` [`SequenceBlock`][sciml.ssm.SequenceBlock]s → (norm) → pooling → decoder.

    **Arguments:**

    - `d_input`, `d_output`: input features per step, outputs (classes or
      regression targets).
    - `layer`: `"s4d"` or `"s5"`; `ssm_kwargs` go to its constructor (e.g.
      `{"init": "ptd", "bidirectional": True}`).
    - `d_model`: `H`; `n_layers`; `state_size`: `N` (S4D) or `P` (S5).
    - `pooling`: `"mean"` over time, `"last"` step, or `"none"` (one output per
      step).
    - `activation`: see [`SequenceBlock`][sciml.ssm.SequenceBlock] (default
      `"glu"` for S4D, `"half_glu1"` for S5); `dropout`, `prenorm`, `norm`.
    - `key`: PRNG key.

    `__call__` maps one sequence `(L, d_input)` to `(d_output,)` (or
    `(L, d_output)` with `pooling="none"`). In step mode (`init_state`,
    `step`; faster on `model.recurrent()`), every token gets its read-out
    `decoder(h_t)`: with `"last"` pooling the final one is the model's output;
    with `"mean"` the model's output is their running mean (the decoder is
    linear).
    """

    encoder: eqx.nn.Linear
    blocks: tuple[SequenceBlock, ...]
    final_norm: eqx.nn.LayerNorm | None
    decoder: eqx.nn.Linear
    d_input: int = eqx.field(static=True)
    pooling: str = eqx.field(static=True)

    def __init__(
        self,
        d_input: int,
        d_output: int,
        *,
        layer: str = "s4d",
        d_model: int = 128,
        n_layers: int = 4,
        state_size: int = 64,
        pooling: str = "mean",
        activation: str | None = None,
        dropout: float = 0.0,
        prenorm: bool = True,
        norm: str = "layer",
        ssm_kwargs: Mapping[str, Any] | None = None,
        dtype=None,
        key: PRNGKeyArray,
    ):
        if layer not in LAYERS:
            raise ValueError(f"layer must be one of {tuple(LAYERS)}, got {layer!r}.")
        check_choice("pooling", pooling, POOLINGS)
        if n_layers < 1:
            raise ValueError(f"n_layers must be positive, got {n_layers}.")
        if activation is None:
            activation = "glu" if layer == "s4d" else "half_glu1"
        dtype = check_float_dtype("dtype", dtype)
        keys = jax.random.split(key, 2 * n_layers + 2)
        self.encoder = eqx.nn.Linear(d_input, d_model, key=keys[0], dtype=dtype)
        self.decoder = eqx.nn.Linear(d_model, d_output, key=keys[1], dtype=dtype)
        blocks = []
        for i in range(n_layers):
            ssm = LAYERS[layer](
                d_model, state_size, **dict(ssm_kwargs or {}), dtype=dtype, key=keys[2 + 2 * i]
            )
            blocks.append(
                SequenceBlock(
                    ssm,
                    activation=activation,
                    dropout=dropout,
                    prenorm=prenorm,
                    norm=norm,
                    key=keys[3 + 2 * i],
                )
            )
        self.blocks = tuple(blocks)
        self.final_norm = (
            eqx.nn.LayerNorm(d_model, dtype=dtype) if prenorm and norm == "layer" else None
        )
        self.d_input, self.pooling = d_input, pooling

    def _check(self, x: Any, ndim: int) -> Array:
        x = check_real_input("SequenceModel", "x", x)
        if x.ndim != ndim or x.shape[-1] != self.d_input:
            shape = "(length, d_input)" if ndim == 2 else "(d_input,)"
            raise ValueError(
                f"SequenceModel: input must have shape {shape} with d_input={self.d_input}, "
                f"got {x.shape}."
            )
        return x

    def _final_norm(self, h: Array) -> Array:
        return h if self.final_norm is None else _per_token(self.final_norm, h)

    def __call__(
        self,
        x: Any,  # Float[Array, "length d_input"]: checked in `_check`, naming the fix
        *,
        key: PRNGKeyArray | None = None,
    ) -> Float[Array, "..."]:
        """One sequence `(L, d_input)` → `(d_output,)`, or `(L, d_output)` without pooling.

        A concrete (eager) `x` holding NaN or Inf raises `ValueError`; traced
        inputs are not checked (see [`S4D`][sciml.ssm.S4D]) unless the layers
        are built with `ssm_kwargs={"check_finite": "always"}`."""
        x = self._check(x, 2)
        check_finite("x", x)
        h = _per_token(self.encoder, x)
        keys = [None] * len(self.blocks) if key is None else jax.random.split(key, len(self.blocks))
        for block, block_key in zip(self.blocks, keys):
            h = block(h, key=block_key)
        h = self._final_norm(h)
        if self.pooling == "mean":
            h = jnp.mean(h, axis=0)
        elif self.pooling == "last":
            h = h[-1]
        return _per_token(self.decoder, h)

    def recurrent(self) -> SequenceModel:
        """This model with every SSM layer discretised once, for fast step mode.

        Each layer is replaced by its [`RecurrentSSM`][sciml.ssm.RecurrentSSM]
        (see [`S4D.recurrent`][sciml.ssm.S4D.recurrent]); `step` gives the same
        numbers without discretising at every token, and `__call__` runs the
        recurrence sequentially.
        """
        return eqx.tree_at(
            lambda m: [b.ssm for b in m.blocks], self, [b.ssm.recurrent() for b in self.blocks]
        )

    def init_state(self) -> tuple[Array, ...]:
        """Zero recurrent states, one per block."""
        return tuple(block.init_state() for block in self.blocks)

    def step(
        self, state: tuple[Array, ...], x_t: Float[Array, " d_input"]
    ) -> tuple[tuple[Array, ...], Float[Array, " d_output"]]:
        """One input token `(d_input,)` → `(state, decoder(h_t))` in recurrent mode."""
        self._check(x_t, 1)
        h = self.encoder(x_t)
        new_state = []
        for block, s in zip(self.blocks, state):
            s, h = block.step(s, h)
            new_state.append(s)
        return tuple(new_state), self.decoder(self._final_norm(h))


def ssm_labels(tree: PyTree, *, label: str = SSM_GROUP, default: str = "default") -> PyTree:
    """Labels the `(Λ, B, Δ)` parameters of every S4D / S5 layer in `tree` with `label`.

    Every other array leaf (including `C` and `D`) gets `default`. Works on a
    model or on its filtered parameters (`eqx.filter(model,
    eqx.is_inexact_array)`); use it as `label_fn` of
    `sciml.training.make_optimizer`, with the group's own settings under
    `groups`, as S4 and S5 train (a smaller rate, no weight decay):

    ```python
    from sciml.ssm import ssm_labels
    from sciml.training import make_optimizer

    config = {"name": "adamw", "learning_rate": 1e-2, "weight_decay": 0.05,
              "groups": {"ssm": {"learning_rate": 1e-3, "weight_decay": 0.0}}}
    optimizer = make_optimizer(config, ssm_labels)
    ```

    or with optax directly, passing the function itself as `param_labels`:

    ```python
    import equinox as eqx
    import jax
    import optax
    from sciml.ssm import SequenceModel, ssm_labels

    model = SequenceModel(2, 3, d_model=8, n_layers=1, state_size=4, key=jax.random.key(0))
    params = eqx.filter(model, eqx.is_inexact_array)
    optimizer = optax.multi_transform(
        {"ssm": optax.adam(1e-3), "default": optax.adamw(1e-2)}, ssm_labels
    )
    state = optimizer.init(params)
    ```

    Pass `ssm_labels`, not `ssm_labels(params)`: the labels of an Equinox model
    form an Equinox module, which is callable, so optax would call it on the
    parameters as if it were the labelling function (the layers raise a
    `TypeError` saying so).

    **Returns:** a pytree of strings with the structure of `tree`.
    """

    def visit(node):
        labels = jax.tree_util.tree_map(lambda _: default, node)
        if not isinstance(node, _DiagonalSSM):
            return labels
        names = [n for n in node.ssm_parameters if getattr(node, n) is not None]
        return eqx.tree_at(lambda m: [getattr(m, n) for n in names], labels, [label] * len(names))

    return jax.tree_util.tree_map(visit, tree, is_leaf=lambda x: isinstance(x, _DiagonalSSM))
