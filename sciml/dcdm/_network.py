r"""The convolutional approximate inverse of DCDM (Kaneda et al., ICML 2023).

A fully convolutional network `f` that maps a unit-norm residual on the grid to
a search direction approximating `A⁻¹ r` up to scale. The design follows the
paper's 3-D model (2-D is the same with 3×3 kernels):

```
stem  (linear 3×3(×3) conv, C_in → 16)
full-resolution residual pairs        ← the last feature `s` is kept
2×2(×2) average pool
half-resolution residual pairs
nearest-neighbour upsampling ×2, plus `s` (additive skip)
full-resolution residual pairs
head  (linear 1×1(×1) conv, 16 → 1)
```

A residual pair is `y = x + σ(conv₂ σ(conv₁ x))` with ReLU `σ` and "same"
padding (zeros outside the grid). Only convolutions and one pooling level, so
the same weights work on any grid whose sides are even: a model trained at 64³
is applied at 128³. The paper's N = 64 model has 2 + 3 + 2 pairs (4 + 6 + 4
convs), 97,457 parameters in 3-D.

Fidelity to the reference code (Keras): biases start at zero (Keras's
default), and with `reference_layout=True` the full-resolution stage is the
reference's chain `a = σ(conv s₀)`, pairs `a ← a + σ(conv σ(conv a))`, then the
skip `s = σ(conv a)`, taken after a ReLU rather than after a residual sum (the
same number of convolutions). The paper has no label channels; optionally (as
in Lan et al., ICML 2024) three more input channels carry the one-hot cell
labels (fluid / solid / air), so the network sees the geometry.

A network with biases or label channels has an even part (`f(−r) ≠ −f(r)`)
that adds the same field to every direction, whatever the residual; inside
the iteration that stalls it. `odd=True` keeps only the odd part,
`f(r) = (g(r) − g(−r)) / 2` (labels unchanged), twice the cost of a pass.
"""

from __future__ import annotations

from collections.abc import Callable

import equinox as eqx
import jax
import jax.numpy as jnp
from jaxtyping import Array, Float, PRNGKeyArray

from .._checks import check_positive_int


def avg_pool2(x: Float[Array, " channels *grid"]) -> Float[Array, " channels *half"]:
    """2×2(×2) average pooling with stride 2 over every spatial axis."""
    c, *grid = x.shape
    split = [c]
    for n in grid:
        split += [n // 2, 2]
    return x.reshape(split).mean(axis=tuple(range(2, 2 + 2 * len(grid), 2)))


def upsample2(x: Float[Array, " channels *half"]) -> Float[Array, " channels *grid"]:
    """Nearest-neighbour upsampling ×2 over every spatial axis."""
    for axis in range(1, x.ndim):
        x = jnp.repeat(x, 2, axis=axis)
    return x


class _Pair(eqx.Module):
    conv1: eqx.nn.Conv
    conv2: eqx.nn.Conv
    activation: Callable = eqx.field(static=True)

    def __init__(self, dim, width, activation, bias, dtype, *, key):
        k1, k2 = jax.random.split(key)
        self.conv1 = _conv(dim, width, width, 3, bias, dtype, k1)
        self.conv2 = _conv(dim, width, width, 3, bias, dtype, k2)
        self.activation = activation

    def __call__(self, x):
        return x + self.activation(self.conv2(self.activation(self.conv1(x))))


def _stack(pairs, x):
    for pair in pairs:
        x = pair(x)
    return x


def _conv(dim, c_in, c_out, size, bias, dtype, key):
    """A "same" convolution whose bias (if any) starts at zero, as in Keras."""
    conv = eqx.nn.Conv(
        dim, c_in, c_out, size, padding=size // 2, use_bias=bias, dtype=dtype, key=key
    )
    if bias:
        conv = eqx.tree_at(lambda c: c.bias, conv, jnp.zeros_like(conv.bias))
    return conv


class DCDMNet(eqx.Module):
    """The DCDM network: one sample `(in_channels, *grid) → grid`.

    **Arguments:**

    - `dim`: 2 or 3 (spatial dimensions).
    - `pairs`: residual pairs at (full, half, full) resolution; the paper's
      N = 64 model is `(2, 3, 2)`, its N = 128 model `(3, 5, 3)`.
    - `width`: feature channels (16 in the paper).
    - `label_channels`: if True, three more input channels carry the one-hot
      fluid / solid / air labels (use [`label_channels`][sciml.dcdm.label_channels]).
    - `activation`: the nonlinearity (ReLU).
    - `bias`: whether the convolutions have biases (True in the paper;
      initialised to zero, as in Keras). With `bias=False` a ReLU network
      without label channels is positively homogeneous (`f(c r) = c f(r)`,
      `c > 0`); with an identity `activation` too it is a linear map (used by
      [`SymmetricDCDMNet`][sciml.dcdm.SymmetricDCDMNet]).
    - `odd`: keep only the odd part `(g(r) − g(−r)) / 2`, so `f(−r) = −f(r)`
      exactly.
    - `reference_layout`: the reference code's full-resolution stage (see the
      module docstring; needs `pairs[0] >= 1`).
    - `dtype`: parameter dtype (float32 by default, also when float64 is on:
      the outer iteration runs in float64, the network in float32).
    - `key`: PRNG key for the initialisation.

    Calling: `net(x)` with `x` of shape `(in_channels, *grid)` (`in_channels`
    = 1, or 4 with labels), every side of `grid` even; returns `grid`.
    """

    stem: eqx.nn.Conv
    down: tuple[_Pair, ...]
    mid: tuple[_Pair, ...]
    up: tuple[_Pair, ...]
    head: eqx.nn.Conv
    down_in: eqx.nn.Conv | None
    down_out: eqx.nn.Conv | None
    activation: Callable = eqx.field(static=True)
    dim: int = eqx.field(static=True)
    in_channels: int = eqx.field(static=True)
    odd: bool = eqx.field(static=True)

    def __init__(
        self,
        dim: int = 3,
        *,
        pairs: tuple[int, int, int] = (2, 3, 2),
        width: int = 16,
        label_channels: bool = False,
        activation: Callable = jax.nn.relu,
        bias: bool = True,
        odd: bool = False,
        reference_layout: bool = False,
        dtype=jnp.float32,
        key: PRNGKeyArray,
    ):
        if dim not in (2, 3):
            raise ValueError(f"`dim` must be 2 or 3, got {dim!r}.")
        if len(pairs) != 3 or any(
            isinstance(p, bool) or not isinstance(p, int) or p < 0 for p in pairs
        ):
            raise ValueError(
                f"`pairs` must be three integers >= 0 (full, half, full resolution), got {pairs!r}."
            )
        if reference_layout and pairs[0] < 1:
            raise ValueError(
                f"`reference_layout=True` needs pairs[0] >= 1 (two single convolutions around "
                f"pairs[0] − 1 pairs), got pairs={pairs!r}."
            )
        width = check_positive_int("width", width)
        self.dim = dim
        self.in_channels = 4 if label_channels else 1
        self.odd = bool(odd)
        self.activation = activation
        keys = iter(jax.random.split(key, 4 + sum(pairs)))
        bias = bool(bias)
        self.stem = _conv(dim, self.in_channels, width, 3, bias, dtype, next(keys))
        if reference_layout:
            pairs = (pairs[0] - 1, *pairs[1:])
            self.down_in, self.down_out = (
                _conv(dim, width, width, 3, bias, dtype, next(keys)) for _ in range(2)
            )
        else:
            self.down_in = self.down_out = None
        self.down, self.mid, self.up = (
            tuple(_Pair(dim, width, activation, bias, dtype, key=next(keys)) for _ in range(p))
            for p in pairs
        )
        self.head = _conv(dim, width, 1, 1, bias, dtype, next(keys))

    @property
    def dtype(self):
        """The parameter dtype (the network runs in it)."""
        return self.stem.weight.dtype

    def __call__(self, x: Float[Array, " channels *grid"]) -> Float[Array, "*grid"]:
        if x.ndim != self.dim + 1:
            raise ValueError(
                f"a {self.dim}-D DCDMNet takes `(channels, *grid)` with a {self.dim}-D grid, got "
                f"shape {x.shape} (a network built for {self.dim}-D cannot be applied to "
                f"{x.ndim - 1}-D data; build one with `dim={x.ndim - 1}`)."
            )
        if x.shape[0] != self.in_channels:
            raise ValueError(
                f"the network takes {self.in_channels} input channel(s), got {x.shape[0]} "
                "(`label_channels=True` needs the residual plus three one-hot label channels)."
            )
        if any(n % 2 for n in x.shape[1:]):
            raise ValueError(
                f"every side of the grid must be even (one 2× pooling level), got {x.shape[1:]}; "
                "pad the grid with SOLID cells to an even size."
            )
        x = x.astype(self.stem.weight.dtype)
        if not self.odd:
            return self._forward(x)
        return (self._forward(x) - self._forward(x.at[0].multiply(-1))) / 2

    def _forward(self, x):
        h = self.stem(x)
        if self.down_in is None:
            skip = _stack(self.down, h)
        else:  # the reference's chain: the skip is taken after a ReLU
            h = _stack(self.down, self.activation(self.down_in(h)))
            skip = self.activation(self.down_out(h))
        h = _stack(self.mid, avg_pool2(skip))
        h = _stack(self.up, upsample2(h) + skip)
        return self.head(h)[0]


def label_channels(
    labels, fluid: int = 0, solid: int = 1, air: int = 2
) -> Float[Array, " 3 *grid"]:
    """One-hot `(fluid, solid, air)` channels of an integer label grid."""
    labels = jnp.asarray(labels)
    return jnp.stack([labels == fluid, labels == solid, labels == air]).astype(jnp.float32)


def network_input(net, r: Float[Array, "*grid"], labels_onehot=None) -> Array:
    """The `(channels, *grid)` input of `net` (a [`DCDMNet`][sciml.dcdm.DCDMNet]
    or [`SymmetricDCDMNet`][sciml.dcdm.SymmetricDCDMNet]) for a residual `r` on
    the grid."""
    r = r.astype(net.dtype)[None]
    if net.in_channels == 1:
        return r
    if labels_onehot is None:
        raise ValueError("this network takes label channels: pass `labels_onehot`.")
    return jnp.concatenate([r, labels_onehot.astype(r.dtype)])


def direction_fn(
    net,
    fluid: Float[Array, "*grid"],
    labels_onehot: Float[Array, " 3 *grid"] | None = None,
) -> Callable[[Array], Array]:
    """Turns a trained network into a `direction_fn` for [`solve`][sciml.dcdm.solve].

    **Arguments:**

    - `net`: the network, a [`DCDMNet`][sciml.dcdm.DCDMNet] or a
      [`SymmetricDCDMNet`][sciml.dcdm.SymmetricDCDMNet].
    - `fluid`: `1` at the unknowns (fluid cells), `0` elsewhere, on the grid.
    - `labels_onehot`: the `(3, *grid)` label channels, for a network built
      with `label_channels=True`.

    **Returns:** `r ↦ fluid · net(fluid · r / rms(r))`, evaluated in the
    network's dtype and returned in the dtype of `r` (zero at non-fluid cells,
    so the direction lies in the space of unknowns).

    The residual is scaled to unit root-mean-square over the fluid cells
    before it enters the network. The paper scales it to unit 2-norm, which
    is the same up to the constant `sqrt(n_fluid)` on one grid, but then the
    per-cell input of a network trained at 64² is twice that at 128²; a ReLU
    network with biases is not scale-equivariant, so it would see inputs
    unlike its training data on a larger grid. With the RMS scale the
    direction does not depend on the scale of `r` (`q(c r) = q(r)` for
    `c > 0`) nor, through the input scale, on the grid size.
    """
    if net.in_channels == 4 and labels_onehot is None:
        raise ValueError("`net` was built with `label_channels=True`: pass `labels_onehot`.")
    fluid = jnp.asarray(fluid)
    n_fluid = jnp.maximum(jnp.sum(fluid != 0), 1)

    def apply(r):
        if jnp.shape(r) != fluid.shape:
            raise ValueError(
                f"this direction function was built for the grid of `fluid` {fluid.shape}, got "
                f"a residual of shape {jnp.shape(r)}: build it with the `fluid` mask of the "
                "grid of `b`."
            )
        mask = fluid.astype(r.dtype)
        r = r * mask
        rms = jnp.sqrt(jnp.sum(r * r) / n_fluid)
        r = r / jnp.where(rms > 0, rms, 1)
        q = net(network_input(net, r, labels_onehot))
        return q.astype(r.dtype) * mask

    return apply
