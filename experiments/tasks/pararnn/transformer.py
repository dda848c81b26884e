"""A small causal Transformer language model: the baseline the ParaRNN paper
compares its language models with, at the size of this package's CPU runs.

GPT-style, pre-norm: token embedding plus a learned position embedding, `depth`
blocks of causal multi-head self-attention and a GELU MLP, each on a
layer-normed residual stream, then a final layer norm and a linear head.
Attention is `equinox.nn.MultiheadAttention` with a lower-triangular mask, so
output `t` depends on tokens `1..t` only, as the recurrent models' do.
"""

from __future__ import annotations

import equinox as eqx
import jax
import jax.numpy as jnp
from jaxtyping import Array, Float, Int, PRNGKeyArray


class TransformerBlock(eqx.Module):
    """`h + attention(norm(h))`, then `h + mlp(norm(h))`, on `(length, width)`."""

    attention_norm: eqx.nn.LayerNorm
    attention: eqx.nn.MultiheadAttention
    mlp_norm: eqx.nn.LayerNorm
    mlp_in: eqx.nn.Linear
    mlp_out: eqx.nn.Linear

    def __init__(self, width: int, num_heads: int, mlp_ratio: int, *, key: PRNGKeyArray):
        k_attention, k_in, k_out = jax.random.split(key, 3)
        self.attention_norm = eqx.nn.LayerNorm(width)
        self.attention = eqx.nn.MultiheadAttention(num_heads, width, key=k_attention)
        self.mlp_norm = eqx.nn.LayerNorm(width)
        self.mlp_in = eqx.nn.Linear(width, mlp_ratio * width, key=k_in)
        self.mlp_out = eqx.nn.Linear(mlp_ratio * width, width, key=k_out)

    def __call__(self, h: Float[Array, "length width"]) -> Float[Array, "length width"]:
        causal = jnp.tril(jnp.ones((h.shape[0], h.shape[0]), bool))
        x = jax.vmap(self.attention_norm)(h)
        h = h + self.attention(x, x, x, mask=causal)
        x = jax.vmap(self.mlp_norm)(h)
        return h + jax.vmap(lambda v: self.mlp_out(jax.nn.gelu(self.mlp_in(v))))(x)


class CausalTransformer(eqx.Module):
    """Byte-level causal Transformer: tokens `(length,)` → logits `(length, vocabulary)`.

    **Arguments:** `vocabulary` (256 for bytes), `width`, `depth` (blocks),
    `num_heads`, `mlp_ratio` (MLP width in units of `width`), `max_length`
    (positions embedded), `key`.
    """

    embedding: eqx.nn.Embedding
    positions: Float[Array, "max_length width"]
    blocks: tuple[TransformerBlock, ...]
    norm: eqx.nn.LayerNorm
    head: eqx.nn.Linear

    def __init__(
        self,
        vocabulary: int,
        width: int,
        depth: int,
        *,
        num_heads: int,
        mlp_ratio: int,
        max_length: int,
        key: PRNGKeyArray,
    ):
        if width % num_heads:
            raise ValueError(f"`width` ({width}) must be a multiple of `num_heads` ({num_heads}).")
        keys = jax.random.split(key, depth + 3)
        self.embedding = eqx.nn.Embedding(vocabulary, width, key=keys[0])
        self.positions = 0.02 * jax.random.normal(keys[1], (max_length, width))
        self.blocks = tuple(TransformerBlock(width, num_heads, mlp_ratio, key=k) for k in keys[3:])
        self.norm = eqx.nn.LayerNorm(width)
        self.head = eqx.nn.Linear(width, vocabulary, key=keys[2])

    def __call__(self, tokens: Int[Array, " length"]) -> Float[Array, "length vocabulary"]:
        length = tokens.shape[0]
        if length > self.positions.shape[0]:
            raise ValueError(
                f"CausalTransformer: {length} tokens, but only max_length="
                f"{self.positions.shape[0]} positions are embedded."
            )
        h = jax.vmap(self.embedding)(tokens) + self.positions[:length]
        for block in self.blocks:
            h = block(h)
        return jax.vmap(lambda v: self.head(self.norm(v)))(h)
