"""MG-TFNO: multi-grid patching + TFNO + stitching, as one model."""

from collections.abc import Sequence

import equinox as eqx
import jax
from jaxtyping import Array, Float

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
    channels (`multigrid_patches`); one FNO built by the caller (a TFNO in
    the paper) maps every tile; the borders are cropped and the tiles
    stitched back.

    The positional embedding is *global*: the coordinate channels are appended
    to the whole field before it is patched (as `neuraloperator`'s data
    pipeline does), so a tile knows where it lies in the domain. With
    tile-local coordinates, tiles that look alike are indistinguishable and a
    position-dependent map (a forcing term) cannot be learned.

    **Arguments:**

    - `model`: the `FNO` (e.g. a `TFNO`) that maps one tile; built with
      `positional_embedding=None` and `tile_channels(...)` input channels: the
      field's `in_channels` (plus `d` coordinates with `"grid"` embedding in `d`
      dimensions) times `levels + 1`. The field's channel count is read from it.
    - `levels`: number of coarse levels L (`2^L` tiles per axis); grid sizes must
      be multiples of `2^L`.
    - `padding_fraction`: border of each tile as a fraction of the grid size.
    - `stitching`: how `training_pair` forms the loss: on the stitched full
      field (True) or per tile (False).
    - `tile_sharding`: a `jax.sharding.Sharding` for the stacked tiles
      `(tiles, channels, *window)` (e.g. `NamedSharding(mesh, P("tiles"))`), so
      tiles are processed on different devices; None leaves placement to XLA.
    - `positional_embedding`: `"grid"` (default; global coordinates
      `x_i = j / N_i` of the full field, patched with it) or None.

    ```python
    import jax
    from sciml.operators import MGTFNO, TFNO

    # a one-channel 2-D field, one level: the tile model sees (1 + 2) x 2 channels
    tile_in = MGTFNO.tile_channels(1, n_dims=2, levels=1, positional_embedding="grid")
    tfno = TFNO((12, 12), tile_in, 1, 16, positional_embedding=None, key=jax.random.key(0))
    model = MGTFNO(tfno, levels=1)
    assert model(jax.numpy.ones((1, 32, 32))).shape == (1, 32, 32)
    ```
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
        model: FNO,
        *,
        levels: int = 1,
        padding_fraction: Real | Sequence[Real] = 0.125,
        stitching: bool = True,
        tile_sharding: jax.sharding.Sharding | None = None,
        positional_embedding: str | None = "grid",
    ):
        if not isinstance(model, FNO):
            raise TypeError(f"`model` must be an FNO (e.g. a TFNO), got {type(model).__name__}.")
        if model.positional_embedding is not None:
            raise ValueError(
                "`model` must be built with positional_embedding=None: MGTFNO appends "
                "the global coordinates to the field before patching, got "
                f"positional_embedding={model.positional_embedding!r}."
            )
        n_dims = len(model.n_modes)
        check_choice("positional_embedding", positional_embedding, EMBEDDINGS)
        _check((2**levels,) * n_dims, levels, padding_fraction)
        coords = n_dims if positional_embedding == "grid" else 0
        field_channels, rest = divmod(model.in_channels, levels + 1)
        if rest or field_channels <= coords:
            raise ValueError(
                f"`model` has in_channels={model.in_channels}, which is not (C + {coords}) * "
                f"{levels + 1} for a field of C >= 1 channels (levels={levels}, "
                f"positional_embedding={positional_embedding!r}); build it with "
                "MGTFNO.tile_channels(C, n_dims, levels, positional_embedding) channels."
            )
        self.model = model
        self.in_channels = field_channels - coords
        self.positional_embedding = positional_embedding
        self.levels = levels
        self.padding_fraction = (
            float(padding_fraction)
            if isinstance(padding_fraction, int | float)
            else tuple(float(f) for f in padding_fraction)
        )
        self.stitching = bool(stitching)
        self.tile_sharding = tile_sharding

    @staticmethod
    def tile_channels(
        in_channels: int, n_dims: int, levels: int, positional_embedding: str | None
    ) -> int:
        """The input channels of the model that maps one tile of a field of
        `in_channels` channels in `n_dims` dimensions: `(in_channels + n_dims)
        * (levels + 1)` with `"grid"` embedding, `in_channels * (levels + 1)`
        without."""
        check_positive_int("in_channels", in_channels)
        check_choice("positional_embedding", positional_embedding, EMBEDDINGS)
        coords = n_dims if positional_embedding == "grid" else 0
        return (in_channels + coords) * (levels + 1)

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
