"""MG-TFNO: multi-grid patching + TFNO + stitching, as one model."""

from collections.abc import Sequence

import equinox as eqx
import jax
from jaxtyping import Array, Float, PRNGKeyArray

from .._checks import check_choice, check_finite, check_positive_int
from .._custom_types import Real
from ._fno import EMBEDDINGS, FNO
from ._layers import grid_embedding
from ._patching import (
    _check,
    domain_reduction,
    multigrid_patches,
    split_tiles,
    stitch_patches,
)
from ._spectral import check_input


class MGTFNO(eqx.Module):
    """Multi-grid tensorized FNO (Kossaifi et al., TMLR 2024).

    The input field is cut into `2^levels` tiles per axis, each widened by a
    circular border and given `levels` coarser context windows on extra
    channels (`multigrid_patches`); one FNO (Tucker-factorised by default)
    maps every tile; the borders are cropped and the tiles stitched back.

    The positional embedding is *global*: the coordinate channels are appended
    to the whole field before it is patched (as `neuraloperator`'s data
    pipeline does), so a tile knows where it lies in the domain. With
    tile-local coordinates, tiles that look alike are indistinguishable and a
    position-dependent map (a forcing term) cannot be learned.

    **Arguments:**

    - `n_modes`, `in_channels`, `out_channels`, `hidden_channels`, `n_layers`:
      as `FNO`; `in_channels` is the channel count of the *field* (the inner
      model sees `(in_channels + d) · (levels + 1)` with `"grid"` embedding in
      `d` dimensions, `in_channels · (levels + 1)` without).
    - `positional_embedding`: `"grid"` (default; global coordinates
      `x_i = j / N_i` of the full field, patched with it) or None.
    - `levels`: number of coarse levels L (`2^L` tiles per axis); grid sizes must
      be multiples of `2^L`.
    - `padding_fraction`: border of each tile as a fraction of the grid size.
    - `stitching`: how `training_pair` forms the loss: on the stitched full
      field (True) or per tile (False).
    - `tile_sharding`: a `jax.sharding.Sharding` for the stacked tiles
      `(tiles, channels, *window)` (e.g. `NamedSharding(mesh, P("tiles"))`), so
      tiles are processed on different devices; None leaves placement to XLA.
    - `factorization` (default `"tucker"`), `rank` (default 0.1) and any other
      `FNO` keyword argument; keyword-only `key`.
    """

    model: FNO
    in_channels: int = eqx.field(static=True)
    positional_embedding: str | None = eqx.field(static=True)
    levels: int = eqx.field(static=True)
    padding_fraction: Real | tuple[Real, ...] = eqx.field(static=True)
    stitching: bool = eqx.field(static=True)
    tile_sharding: jax.sharding.Sharding | None = eqx.field(static=True)

    def __init__(
        self,
        n_modes: int | Sequence[int],
        in_channels: int,
        out_channels: int,
        hidden_channels: int,
        n_layers: int = 4,
        *,
        levels: int = 1,
        padding_fraction: Real | Sequence[Real] = 0.125,
        stitching: bool = True,
        tile_sharding: jax.sharding.Sharding | None = None,
        factorization: str | None = "tucker",
        rank: float | int | Sequence[int] = 0.1,
        positional_embedding: str | None = "grid",
        key: PRNGKeyArray,
        **fno_kwargs,
    ):
        n_dims = 1 if isinstance(n_modes, int) else len(n_modes)
        check_choice("positional_embedding", positional_embedding, EMBEDDINGS)
        _check((2**levels,) * n_dims, levels, padding_fraction)
        self.levels = levels
        self.padding_fraction = (
            float(padding_fraction)
            if isinstance(padding_fraction, int | float)
            else tuple(float(f) for f in padding_fraction)
        )
        self.stitching = bool(stitching)
        self.tile_sharding = tile_sharding
        check_positive_int("in_channels", in_channels)
        self.in_channels = in_channels
        self.positional_embedding = positional_embedding
        field_channels = in_channels + (n_dims if positional_embedding == "grid" else 0)
        self.model = FNO(
            n_modes,
            field_channels * (levels + 1),
            out_channels,
            hidden_channels,
            n_layers,
            factorization=factorization,
            rank=rank,
            positional_embedding=None,
            key=key,
            **fno_kwargs,
        )

    @property
    def out_channels(self) -> int:
        return self.model.out_channels

    def patch(
        self, x: Float[Array, " in_channels *grid"]
    ) -> Float[Array, " tiles channels *window"]:
        """The model inputs: `multigrid_patches(x, levels, padding_fraction)` of
        the field with its global coordinate channels (if any)."""
        check_input(x, self.in_channels, len(self.model.n_modes), "MGTFNO")
        check_finite("x", x)  # concrete (eager) input only; see `sciml._checks`
        if self.positional_embedding == "grid":
            x = grid_embedding(x)
        tiles = multigrid_patches(x, self.levels, self.padding_fraction)
        if self.tile_sharding is not None:
            tiles = jax.lax.with_sharding_constraint(tiles, self.tile_sharding)
        return tiles

    def tiles(
        self, x: Float[Array, " in_channels *grid"]
    ) -> Float[Array, " tiles out_channels *core"]:
        """Model outputs on every tile, border cropped, not stitched: `(2^{Ld}, C_out, *core)`."""
        grid = x.shape[1:]
        out = jax.vmap(self.model)(self.patch(x))
        if self.tile_sharding is not None:
            out = jax.lax.with_sharding_constraint(out, self.tile_sharding)
        n = 2**self.levels
        padding = _check(grid, self.levels, self.padding_fraction)[1]
        crop = tuple(slice(p, p + size // n) for p, size in zip(padding, grid))
        return out[(slice(None), slice(None)) + crop]

    def __call__(
        self, x: Float[Array, " in_channels *grid"]
    ) -> Float[Array, " out_channels *grid"]:
        """Patch, apply the model to every tile, stitch. `(C_in, *grid) → (C_out, *grid)`."""
        return stitch_patches(self.tiles(x), x.shape[1:], self.levels, 0.0)

    def training_pair(
        self, x: Float[Array, " in_channels *grid"], y: Float[Array, " out_channels *grid"]
    ) -> tuple[Array, Array]:
        """`(prediction, target)` for the loss: stitched fields `(1, C, *grid)` if
        `stitching`, else the tiles `(2^{Ld}, C, *core)` as independent samples."""
        check_finite("y", y)
        if self.stitching:
            return self(x)[None], y[None]
        return self.tiles(x), split_tiles(y, self.levels)

    def domain_reduction(self, grid: Sequence[int]) -> float:
        """Grid points of the full field over grid points of one model input."""
        return domain_reduction(grid, self.levels, self.padding_fraction)
