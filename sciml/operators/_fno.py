"""FNO and TFNO (Li et al. 2021; Kossaifi et al., MG-TFNO), neuraloperator's conventions."""

import functools
from collections.abc import Callable, Sequence

import equinox as eqx
import jax
import jax.numpy as jnp
from jaxtyping import Array, Float, PRNGKeyArray

from .._checks import (
    check_choice,
    check_finite,
    check_float_dtype,
    check_positive_int,
)
from .._custom_types import Real
from ._layers import (
    NORMS,
    SKIPS,
    ChannelMLP,
    check_activation,
    grid_embedding,
    make_norm,
    make_skip,
    pad_domain,
    padding_widths,
    unpad_domain,
)
from ._spectral import (
    SpectralConv,
    _check_n_modes,
    apply_conv,
    check_input,
    conv_options,
)
from ._tensors import JointTuckerTensor


EMBEDDINGS = (None, "grid")
STABILIZERS = (None, "tanh")


class JointSpectralConv(eqx.Module):
    """The spectral convolutions of `n_layers` layers with one joint Tucker weight.

    The weights of all layers form one tensor `(n_layers, C_in, C_out, *modes)`
    stored as a `JointTuckerTensor`: a shared core and shared channel/mode
    factors, and one row of the layer factor per layer. Each layer keeps its
    own bias.

    **Arguments:** `n_layers` (first, as the weight's layer mode), then as
    `SpectralConv` (its keyword options: `conv_options`); `rank` is a fraction
    of the dense parameter count of all layers together (or explicit Tucker
    ranks, layer mode first).
    """

    weight: JointTuckerTensor
    bias: Float[Array, " n_layers out_channels"] | None
    n_modes: tuple[int, ...] = eqx.field(static=True)
    implementation: str = eqx.field(static=True)
    separable: bool = eqx.field(static=True)
    transform: str = eqx.field(static=True)

    def __init__(
        self,
        n_layers: int,
        in_channels: int,
        out_channels: int,
        n_modes,
        *,
        rank=0.1,
        key: PRNGKeyArray,
        **options,
    ):
        opts = conv_options(in_channels, out_channels, n_modes, **options)
        self.n_modes, self.implementation = opts.n_modes, opts.implementation
        self.separable, self.transform = opts.separable, opts.transform
        key_w, key_b = jax.random.split(key)
        self.weight = JointTuckerTensor(
            n_layers, opts.weight_shape, rank, std=opts.std, dtype=opts.dtype, key=key_w
        )
        self.bias = opts.draw_bias(key_b, (n_layers, out_channels))

    def __call__(
        self,
        x: Float[Array, " ..."],
        *,
        layer: int,
        output_shape=None,
        channels_last: bool = False,
    ) -> Float[Array, " ..."]:
        """The spectral convolution of layer `layer` (a Python int)."""
        bias = None if self.bias is None else self.bias[layer]
        return apply_conv(self, x, self.weight.layer(layer), bias, output_shape, channels_last)


class FNOBlock(eqx.Module):
    """One Fourier layer with its skips, channel MLP and norms (neuraloperator's `FNOBlocks`).

    Post-activation (default), with σ the activation and `last` the last layer:
    `z = norm(K v) + skip_fno(v)`, σ unless last; `z = MLP(z) + skip_mlp(v)`,
    norm, σ unless last. Preactivation: `v ← norm(σ(v))` first, then
    `z = K v + skip_fno(v)`, σ unless last, norm, `z = MLP(z) + skip_mlp(v)`.
    With `stabilizer="tanh"` the convolution sees `tanh(v)`.

    Called on one sample `(channels, *grid)`, or `(*grid, channels)` with
    `channels_last=True` (how `FNO` calls it); `conv` replaces the block's own
    spectral convolution (it takes `channels_last` too).
    """

    conv: SpectralConv | None
    fno_skip: eqx.Module
    channel_mlp: ChannelMLP | None
    channel_mlp_skip: eqx.Module | None
    norms: tuple
    activation: Callable = eqx.field(static=True)
    last: bool = eqx.field(static=True)
    preactivation: bool = eqx.field(static=True)
    stabilizer: str | None = eqx.field(static=True)

    def __call__(
        self,
        x: Float[Array, " ..."],
        *,
        conv: Callable | None = None,
        channels_last: bool = False,
    ):
        conv = self.conv if conv is None else conv
        act = self.activation
        layout = dict(channels_last=channels_last)
        if self.preactivation:
            x = act(x)
            if self.norms:
                x = self.norms[0](x, **layout)
        skip_fno = self.fno_skip(x, **layout)
        skip_mlp = None if self.channel_mlp is None else self.channel_mlp_skip(x, **layout)
        x_conv = conv(jnp.tanh(x) if self.stabilizer == "tanh" else x, **layout)
        if self.norms and not self.preactivation:
            x_conv = self.norms[0](x_conv, **layout)
        x = x_conv + skip_fno
        if self.preactivation:
            if self.channel_mlp is not None:
                if not self.last:
                    x = act(x)
                if self.norms:
                    x = self.norms[1](x, **layout)
                x = self.channel_mlp(x, **layout) + skip_mlp
            return x
        if not self.last:
            x = act(x)
        if self.channel_mlp is not None:
            x = self.channel_mlp(x, **layout) + skip_mlp
            if self.norms:
                x = self.norms[1](x, **layout)
            if not self.last:
                x = act(x)
        return x


class FNO(eqx.Module):
    """Fourier neural operator on one sample `(in_channels, N_1, ..., N_d)`.

    Grid embedding → lifting MLP → optional zero domain padding → `n_layers`
    Fourier blocks → crop → projection MLP. Argument names follow
    `neuraloperator.FNO`.

    **Arguments:**

    - `n_modes`: total Fourier modes kept per axis (int for 1-D); its length is
      the number of spatial dims `d`.
    - `in_channels`, `out_channels`, `hidden_channels`, `n_layers` (default 4).
    - `lifting_channel_ratio`, `projection_channel_ratio` (default 2): hidden
      width of the lifting/projection MLPs in units of `hidden_channels`
      (0: a single linear map).
    - `positional_embedding`: `"grid"` (append `x_i = j/N_i`) or None.
    - `non_linearity`: activation, a callable (default `jax.nn.gelu`; a
      name such as `"gelu"` is refused: pass the function).
    - `norm`: None, `"instance"` or `"group"`.
    - `use_channel_mlp`, `channel_mlp_expansion` (0.5), `channel_mlp_skip`
      (`"soft-gating"`), `fno_skip` (`"linear"`): skips in
      `"linear"`, `"soft-gating"`, `"identity"`, `"none"`.
    - `domain_padding`: fraction in [0, 1] (or one per axis) of zero padding on
      both sides, `round(f·N)` points each side (neuraloperator uses 0.125–0.25).
    - `preactivation`, `stabilizer` (None or `"tanh"`).
    - `factorization` (None/"dense", "cp", "tucker", "tt"), `rank`,
      `implementation` ("factorized"/"reconstructed"), `separable`: spectral weights.
    - `transform`: `"auto"` (default), `"fft"` or `"dft"`: how the spectral
      convolutions compute their kept modes (see `spectral_conv`).
    - `joint_factorization`: one Tucker tensor for the weights of all layers
      (needs `factorization="tucker"`).
    - `dtype`: real floating parameter dtype (a `TypeError` otherwise;
      `float64` needs `jax_enable_x64`, without it a warning and float32);
      `key`: keyword-only PRNG key.
    """

    lifting: ChannelMLP
    blocks: tuple[FNOBlock, ...]
    joint_conv: JointSpectralConv | None
    projection: ChannelMLP
    n_modes: tuple[int, ...] = eqx.field(static=True)
    in_channels: int = eqx.field(static=True)
    out_channels: int = eqx.field(static=True)
    hidden_channels: int = eqx.field(static=True)
    n_layers: int = eqx.field(static=True)
    positional_embedding: str | None = eqx.field(static=True)
    domain_padding: Real | tuple[Real, ...] | None = eqx.field(static=True)

    def __init__(
        self,
        n_modes: int | Sequence[int],
        in_channels: int,
        out_channels: int,
        hidden_channels: int,
        n_layers: int = 4,
        *,
        lifting_channel_ratio: Real = 2,
        projection_channel_ratio: Real = 2,
        positional_embedding: str | None = "grid",
        non_linearity: Callable = jax.nn.gelu,
        norm: str | None = None,
        use_channel_mlp: bool = True,
        channel_mlp_expansion: Real = 0.5,
        channel_mlp_skip: str = "soft-gating",
        fno_skip: str = "linear",
        domain_padding: Real | Sequence[Real] | None = None,
        preactivation: bool = False,
        stabilizer: str | None = None,
        factorization: str | None = None,
        rank: float | int | Sequence[int] = 1.0,
        implementation: str = "factorized",
        transform: str = "auto",
        separable: bool = False,
        joint_factorization: bool = False,
        dtype=None,
        key: PRNGKeyArray,
    ):
        self.n_modes = _check_n_modes(n_modes)
        d = len(self.n_modes)
        check_activation("non_linearity", non_linearity)
        dtype = check_float_dtype("dtype", dtype)
        for name, value in (
            ("in_channels", in_channels),
            ("out_channels", out_channels),
            ("hidden_channels", hidden_channels),
            ("n_layers", n_layers),
        ):
            check_positive_int(name, value)
        check_choice("positional_embedding", positional_embedding, EMBEDDINGS)
        check_choice("norm", norm, NORMS)
        check_choice("stabilizer", stabilizer, STABILIZERS)
        check_choice("fno_skip", fno_skip, SKIPS)
        check_choice("channel_mlp_skip", channel_mlp_skip, SKIPS)
        if joint_factorization and (factorization or "").lower() != "tucker":
            raise ValueError(
                "`joint_factorization=True` needs factorization='tucker', "
                f"got factorization={factorization!r}."
            )
        padding_widths(domain_padding, (1,) * d)  # validates the number of fractions
        self.in_channels, self.out_channels = in_channels, out_channels
        self.hidden_channels, self.n_layers = hidden_channels, n_layers
        self.positional_embedding = positional_embedding
        self.domain_padding = (
            domain_padding
            if domain_padding is None or isinstance(domain_padding, int | float)
            else tuple(domain_padding)
        )

        keys = iter(jax.random.split(key, 4 + 4 * n_layers))
        lift_in = in_channels + (d if positional_embedding == "grid" else 0)

        def pointwise(c_in, c_out, ratio):  # one hidden layer of `ratio` hidden channels, if any
            width = round(ratio * hidden_channels)
            return ChannelMLP(
                c_in,
                c_out,
                width,
                n_layers=2 if width > 0 else 1,
                activation=non_linearity,
                dtype=dtype,
                key=next(keys),
            )

        self.lifting = pointwise(lift_in, hidden_channels, lifting_channel_ratio)
        self.projection = pointwise(hidden_channels, out_channels, projection_channel_ratio)
        conv_kwargs = dict(
            rank=rank,
            implementation=implementation,
            transform=transform,
            separable=separable,
            dtype=dtype,
        )
        if joint_factorization:
            self.joint_conv = JointSpectralConv(
                n_layers,
                hidden_channels,
                hidden_channels,
                self.n_modes,
                key=next(keys),
                **conv_kwargs,
            )
        else:
            self.joint_conv = None
        mlp_hidden = round(channel_mlp_expansion * hidden_channels)
        blocks = []
        for layer in range(n_layers):
            conv = None
            if not joint_factorization:
                conv = SpectralConv(
                    hidden_channels,
                    hidden_channels,
                    self.n_modes,
                    factorization=factorization,
                    key=next(keys),
                    **conv_kwargs,
                )
            n_norms = 2 if use_channel_mlp else 1
            blocks.append(
                FNOBlock(
                    conv=conv,
                    fno_skip=make_skip(
                        fno_skip, hidden_channels, hidden_channels, dtype=dtype, key=next(keys)
                    ),
                    channel_mlp=(
                        ChannelMLP(
                            hidden_channels,
                            hidden_channels,
                            mlp_hidden,
                            n_layers=2,
                            activation=non_linearity,
                            dtype=dtype,
                            key=next(keys),
                        )
                        if use_channel_mlp
                        else None
                    ),
                    channel_mlp_skip=(
                        make_skip(
                            channel_mlp_skip,
                            hidden_channels,
                            hidden_channels,
                            dtype=dtype,
                            key=next(keys),
                        )
                        if use_channel_mlp
                        else None
                    ),
                    norms=tuple(
                        make_norm(norm, hidden_channels, dtype=dtype)
                        for _ in range(n_norms if norm is not None else 0)
                    ),
                    activation=non_linearity,
                    last=layer == n_layers - 1,
                    preactivation=preactivation,
                    stabilizer=stabilizer,
                )
            )
        self.blocks = tuple(blocks)

    def __call__(
        self, x: Float[Array, " in_channels *grid"]
    ) -> Float[Array, " out_channels *grid"]:
        """**Arguments:** one sample `(in_channels, N_1, ..., N_d)` of a real
        floating dtype (any grid size that holds the kept modes; integer, bool
        or complex input is a `TypeError`). **Returns:** `(out_channels, N_1,
        ..., N_d)`.

        A concrete (eager) `x` holding NaN or Inf raises a `ValueError`; under
        `jit`/`vmap` nothing is checked (the package's non-finite policy).

        The layers compute with the channels last, `(*grid, channels)`: under
        `vmap` the 1×1 convolutions are then plain products of contiguous
        rows, where channels first XLA's CPU backend transposed the hidden
        state around each of them (a 64² TFNO train step 1.3× faster,
        docs/benchmarks/operators.md). The same function up to rounding."""
        check_input(x, self.in_channels, len(self.n_modes), type(self).__name__)
        check_finite("x", x)
        if self.positional_embedding == "grid":
            x = grid_embedding(x)
        layout = dict(channels_last=True)
        x = self.lifting(jnp.moveaxis(x, 0, -1), **layout)
        widths = padding_widths(self.domain_padding, x.shape[:-1])
        if any(widths):
            x = pad_domain(x, widths, **layout)
        for layer, block in enumerate(self.blocks):
            if self.joint_conv is None:
                x = block(x, **layout)
            else:
                conv = functools.partial(self.joint_conv, layer=layer)
                x = block(x, conv=conv, **layout)
        if any(widths):
            x = unpad_domain(x, widths, **layout)
        return jnp.moveaxis(self.projection(x, **layout), -1, 0)


def TFNO(*args, factorization: str | None = "tucker", rank=0.1, **kwargs) -> FNO:
    """Tensorized FNO: an `FNO` with Tucker-factorised spectral weights by default.

    Takes `FNO`'s arguments, with defaults `factorization="tucker"` and
    `rank=0.1` (10% of the dense spectral parameters per layer); returns an `FNO`.
    """
    return FNO(*args, factorization=factorization, rank=rank, **kwargs)
