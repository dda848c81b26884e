# %% [markdown]
# # Multi-grid domain decomposition (MG-TFNO)
#
# At high resolution a neural operator's activations no longer fit in one
# device's memory. MG-TFNO (Kossaifi et al., TMLR 2024) cuts the field into
# $2^L \times 2^L$ tiles, widens each tile by a circular border, and gives it
# $L$ *context windows*: the field subsampled by $2^l$, centred on the same
# point, so the window covers $2^l$ times the tile's extent at the same pixel
# count. The windows are stacked on the channel axis, one TFNO maps every
# tile, and the borders are cropped before the tiles are stitched back.
#
# This page shows the tiles and windows on a Navier–Stokes vorticity field,
# checks that patching and stitching are exact inverses, and runs an MG-TFNO
# with its tiles sharded over four (virtual CPU) devices.

# %%
import os


# four virtual CPU devices, set before jax is imported
os.environ["XLA_FLAGS"] = (
    os.environ.get("XLA_FLAGS", "") + " --xla_force_host_platform_device_count=4"
)

import equinox as eqx
import jax
import jax.numpy as jnp
import matplotlib.pyplot as plt
import numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec
from matplotlib.patches import Rectangle

from sciml.operators import (
    MGTFNO,
    TFNO,
    domain_reduction,
    multigrid_patches,
    patch_padding,
    stitch_patches,
    window_indices,
)
from solvers import navier_stokes as ns


# %% [markdown]
# ## Tiles and context windows
#
# A 128² vorticity field, `levels=2` (4 × 4 tiles of 32²) and a border of
# 1/16 of the grid (8 pixels): every model input is a 48² window with
# $3 = L + 1$ channels, 7.1× fewer points than the field.

# %%
field = ns.make_dataset(
    1, 128, seed=3, viscosity=1e-3, t_final=2.0, record_every=2.0, dt=5e-3
)
omega = jnp.asarray(field["outputs"][0, -1])[None]  # (channels, H, W)
levels, fraction = 2, 1 / 16
tiles = multigrid_patches(omega, levels, fraction)
(pad, _) = patch_padding(omega.shape[1:], levels, fraction)
print("model inputs:", tiles.shape)
print(f"domain reduction: {domain_reduction(omega.shape[1:], levels, fraction):.2f}x")

# %%
tile = 5  # row 1, column 1 of the 4 x 4 tiles
row, col = divmod(tile, 2**levels)
colors = ["C1", "C2", "C3"]
fig, axes = plt.subplots(1, 4, figsize=(12, 3.6))
axes[0].imshow(np.asarray(omega[0]), origin="lower", cmap="RdBu_r")
for level, color in enumerate(colors):
    rows = window_indices(128, levels, level, pad)[row]
    cols = window_indices(128, levels, level, pad)[col]
    # the window's extent on the field (it wraps around the periodic border)
    for r0 in (rows[0], rows[0] - 128, rows[0] + 128):
        for c0 in (cols[0], cols[0] - 128, cols[0] + 128):
            axes[0].add_patch(
                Rectangle(
                    (c0 - 0.5, r0 - 0.5),
                    len(cols) * 2**level,
                    len(rows) * 2**level,
                    fill=False,
                    color=color,
                    lw=2,
                )
            )
axes[0].set(xlim=(-0.5, 127.5), ylim=(-0.5, 127.5))
axes[0].set_title("field, one tile's windows", fontsize=13)
for level, (ax, color) in enumerate(zip(axes[1:], colors)):
    ax.imshow(np.asarray(tiles[tile, level]), origin="lower", cmap="RdBu_r")
    ax.set_title(f"level {level} (stride {2**level})", color=color, fontsize=13)
    if level == 0:
        ax.add_patch(
            Rectangle((pad - 0.5, pad - 0.5), 32, 32, fill=False, color="k", ls="--")
        )
for ax in axes:
    ax.set_xticks([])
    ax.set_yticks([])
plt.tight_layout()

# %% [markdown]
# Level 0 (orange) is the tile itself plus its border (the dashed square is
# the part that is kept after the model); levels 1 (green) and 2 (red) see
# twice and four times the extent at half and a quarter of the resolution.
# The coarsest window is wider than the field (4 · 48 = 192 > 128 pixels) and
# wraps around it, so with two levels every tile sees the whole periodic
# field at low resolution. All three windows share their centre pixel:

# %%
centre = tiles.shape[-1] // 2
print([float(tiles[tile, level, centre, centre]) for level in range(levels + 1)])

# %% [markdown]
# Cropping the borders of the level-0 channel and reassembling the tiles gives
# the field back exactly:

# %%
back = stitch_patches(tiles[:, :1], omega.shape[1:], levels, fraction)
print("max |stitch(patch(x)) - x| =", float(jnp.max(jnp.abs(back - omega))))

# %% [markdown]
# ## The model, with tiles on four devices
#
# `MGTFNO` wraps a built model for one tile (here a TFNO: Tucker, rank 0.1) in
# patching and stitching: it takes and returns whole fields. Before patching it
# appends the *global* coordinates `j / N` to the field, so every tile (and
# context window) carries where it lies in the domain: without them, tiles that
# look alike could not learn a position-dependent response such as the
# Navier–Stokes forcing (the results page shows what happens without them). With
# `tile_sharding`, the stacked tiles are laid out along a device mesh axis, so
# each device holds the activations of 16 / 4 = 4 tiles; the result is the same
# as on one device.

# %%
mesh = Mesh(np.array(jax.devices()[:4]), ("tiles",))
sharding = NamedSharding(mesh, PartitionSpec("tiles"))
# the tile model sees the field and its 2 coordinates at levels + 1 scales
tile_in = MGTFNO.tile_channels(1, 2, levels, "grid")
tfno = TFNO((12, 12), tile_in, 1, 16, positional_embedding=None, key=jax.random.key(0))
model = MGTFNO(tfno, levels=levels, padding_fraction=fraction)
sharded = MGTFNO(tfno, levels=levels, padding_fraction=fraction, tile_sharding=sharding)

out = eqx.filter_jit(model)(omega)
out_sharded = eqx.filter_jit(sharded)(omega)
print("devices:", jax.devices())
print(
    "output",
    out.shape,
    "max difference sharded vs one device:",
    float(jnp.max(jnp.abs(out - out_sharded))),
)

# %% [markdown]
# For training, `MGTFNO.training_pair(x, y)` gives `(prediction, target)`:
# the stitched field when `stitching=True` (the loss sees the whole field, and
# periodic finite differences stay valid), or the cropped tiles and the
# matching tiles of `y` when `stitching=False` (each tile a separate sample,
# so a batch can hold tiles of different fields). The experiment configs
# `ns_mgtfno.py` and `ns_compression.py` train it on Navier–Stokes; the
# benchmarks page measures its peak memory against a dense FNO.
