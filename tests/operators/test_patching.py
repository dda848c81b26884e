"""Multi-grid domain decomposition and MG-TFNO: shapes, round trips, centring, a
pad-and-slice reference, sharding on 4 CPU devices, bad input."""

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.sharding import Mesh, NamedSharding, PartitionSpec

from sciml.operators import (
    FNO,
    MGTFNO,
    TFNO,
    domain_reduction,
    grid_embedding,
    multigrid_patches,
    patch_padding,
    split_tiles,
    stitch_patches,
)


def mgtfno(n_modes, in_channels, *args, levels=1, positional_embedding="grid", **kwargs):
    """An MG-TFNO from the field's arguments: a TFNO for one tile, wrapped."""
    mg = {
        k: kwargs.pop(k) for k in ("padding_fraction", "stitching", "tile_sharding") if k in kwargs
    }
    tile_in = MGTFNO.tile_channels(in_channels, len(n_modes), levels, positional_embedding)
    model = TFNO(n_modes, tile_in, *args, positional_embedding=None, **kwargs)
    return MGTFNO(model, levels=levels, positional_embedding=positional_embedding, **mg)


def reference_patches(x, levels, fraction):
    """The paper's recipe with np.pad(mode="wrap") and slices, for a 2-D field (C, H, W).

    Level 0: pad by p and cut n×n tiles of (h+2p)×(w+2q) with stride (h, w). Level l:
    subsample u[::2^l, ::2^l], pad circularly by ceil(h(1-2^-l)/2)+p, cut windows of the
    same size with stride h/2^l. Tiles row-major, channels level-major.
    """
    _, height, width = x.shape
    n = 2**levels
    h, w = height // n, width // n
    p, q = round(height * fraction), round(width * fraction)
    out = [[] for _ in range(n * n)]
    for level in range(levels + 1):
        s = 2**level
        sub = x[:, ::s, ::s]
        pad_h = int(np.ceil(h * (1 - 1 / s) / 2)) + p
        pad_w = int(np.ceil(w * (1 - 1 / s) / 2)) + q
        sub = np.pad(sub, ((0, 0), (pad_h, pad_h), (pad_w, pad_w)), mode="wrap")
        for i in range(n):
            for j in range(n):
                top, left = i * (h // s), j * (w // s)
                out[i * n + j].append(sub[:, top : top + h + 2 * p, left : left + w + 2 * q])
    return np.stack([np.concatenate(levels_, axis=0) for levels_ in out])


@pytest.mark.parametrize(
    "levels,fraction,expected",
    [
        (1, 0.0, (4, 2, 32, 32)),
        (1, 1 / 16, (4, 2, 40, 40)),
        (2, 1 / 16, (16, 3, 24, 24)),
        (2, 1 / 8, (16, 3, 32, 32)),
    ],
)
def test_shapes(levels, fraction, expected):
    out = jax.eval_shape(lambda x: multigrid_patches(x, levels, fraction), jnp.zeros((1, 64, 64)))
    assert out.shape == expected


@pytest.mark.parametrize(
    "grid,levels,fraction",
    [
        ((64, 64), 1, 1 / 16),
        ((64, 64), 2, 1 / 16),
        ((32, 32), 2, 1 / 8),
        ((64, 32), 1, 1 / 8),
        ((32, 32), 1, 0.5),
    ],
)
def test_matches_pad_and_slice_reference(grid, levels, fraction):
    # h / 2^(l+1) is an integer in every case, where the two constructions coincide;
    # fraction 0.5 makes the windows wrap around the domain more than once.
    x = np.random.default_rng(0).normal(size=(2, *grid))
    got = jax.jit(lambda x: multigrid_patches(x, levels, fraction))(x)
    np.testing.assert_array_equal(got, reference_patches(x, levels, fraction))


@pytest.mark.parametrize(
    "grid,levels,fraction",
    [((32,), 2, 0.1), ((16, 24), 1, 0.25), ((8, 8, 16), 1, 0.125), ((16, 16), 0, 0.25)],
)
def test_patch_then_stitch_is_exact(grid, levels, fraction):
    x = np.random.default_rng(1).normal(size=(3, *grid))

    @jax.jit
    def roundtrip(x):
        tiles = multigrid_patches(x, levels, fraction)
        return stitch_patches(tiles[:, :3], grid, levels, fraction), split_tiles(x, levels)

    back, tiles = roundtrip(x)
    np.testing.assert_array_equal(back, x)
    np.testing.assert_array_equal(stitch_patches(tiles, grid, levels, 0.0), x)


@pytest.mark.parametrize(
    "grid,levels,fraction", [((64, 64), 2, 1 / 16), ((48, 40), 2, 0.1), ((24,), 3, 0.2)]
)
def test_context_windows_share_their_centre_and_widen(grid, levels, fraction):
    # Patch the coordinate fields themselves: channel a of every window then holds
    # the field index along axis a of each window pixel.
    d = len(grid)
    coords = np.stack(np.meshgrid(*[np.arange(n) for n in grid], indexing="ij")).astype(float)
    tiles = np.asarray(jax.jit(lambda x: multigrid_patches(x, levels, fraction))(coords))
    window = tiles.shape[2:]
    centre = tuple(w // 2 for w in window)
    padding = patch_padding(grid, levels, fraction)
    n = 2**levels
    for t in range(n**d):
        tile_index = np.unravel_index(t, (n,) * d)
        for a in range(d):
            h = grid[a] // n
            expected_centre = (tile_index[a] * h - padding[a] + centre[a]) % grid[a]
            for level in range(levels + 1):
                channel = tiles[t, level * d + a]
                assert channel[centre] == expected_centre
                # along axis a, neighbouring pixels of level l are 2^l apart (mod H)
                line = np.moveaxis(channel, a, 0)[(slice(None),) + centre[:a] + centre[a + 1 :]]
                np.testing.assert_array_equal(np.diff(line) % grid[a], 2**level % grid[a])


def test_domain_reduction():
    # H = 128: L=1, p=16 -> 128²/96² = 1.78 ("1.8x"); L=2, p=8 -> 128²/48² = 7.1 ("7x").
    np.testing.assert_allclose(domain_reduction((128, 128), 1, 16 / 128), 128**2 / 96**2)
    np.testing.assert_allclose(domain_reduction((128, 128), 2, 8 / 128), 128**2 / 48**2)


def test_bad_input_raises():
    with pytest.raises(ValueError, match="not divisible by 2\\*\\*levels = 4"):
        multigrid_patches(jnp.zeros((1, 30, 32)), 2, 0.0)
    with pytest.raises(ValueError, match="`levels` must be an int >= 0"):
        multigrid_patches(jnp.zeros((1, 32, 32)), -1, 0.0)
    with pytest.raises(ValueError, match="`padding_fraction`"):
        multigrid_patches(jnp.zeros((1, 32, 32)), 1, -0.1)
    model = eqx.filter_eval_shape(mgtfno, (4, 4), 2, 1, 4, levels=1, key=jax.random.key(0))
    with pytest.raises(ValueError, match="in_channels=2 but the input `x` has 1"):
        eqx.filter_eval_shape(model, jnp.zeros((1, 32, 32)))
    with pytest.raises(ValueError, match="not divisible"):
        eqx.filter_eval_shape(model, jnp.zeros((2, 33, 32)))


@pytest.fixture(scope="module")
def mg_model():
    return mgtfno(
        (6, 6), 1, 1, 8, n_layers=2, levels=2, padding_fraction=1 / 16, key=jax.random.key(2)
    )


def test_mgtfno_wraps_patch_model_stitch(mg_model):
    x = jax.random.normal(jax.random.key(3), (1, 32, 32))
    assert mg_model.model.in_channels == 9  # (field + 2 coordinates) x 3 levels
    assert mg_model.in_channels == 1

    @eqx.filter_jit
    def run(model, x):
        tiles = multigrid_patches(grid_embedding(x), 2, 1 / 16)
        outputs = jax.vmap(model.model)(tiles)
        return model(x), stitch_patches(outputs, (32, 32), 2, 1 / 16), model.training_pair(x, x)

    full, manual, (pred, target) = run(mg_model, x)
    np.testing.assert_allclose(full, manual, atol=1e-13)
    assert pred.shape == target.shape == (1, 1, 32, 32)


def test_mgtfno_per_tile_training_pair():
    model = mgtfno(
        (4, 4),
        1,
        1,
        4,
        n_layers=1,
        levels=1,
        padding_fraction=0.125,
        stitching=False,
        key=jax.random.key(4),
    )
    x = jax.random.normal(jax.random.key(5), (1, 16, 16))
    pred, target = eqx.filter_jit(lambda m, x: m.training_pair(x, 2 * x))(model, x)
    assert pred.shape == target.shape == (4, 1, 8, 8)
    np.testing.assert_array_equal(stitch_patches(target, (16, 16), 1, 0.0), 2 * x)
    np.testing.assert_allclose(
        stitch_patches(pred, (16, 16), 1, 0.0), eqx.filter_jit(model)(x), atol=1e-13
    )


def test_zero_levels_is_the_plain_model():
    kwargs = dict(n_layers=1, factorization="tucker", rank=0.1, key=jax.random.key(6))
    model = mgtfno((4, 4), 1, 1, 4, levels=0, padding_fraction=0.0, **kwargs)
    plain_model = FNO((4, 4), 1, 1, 4, **kwargs)
    x = jax.random.normal(jax.random.key(7), (1, 16, 16))
    mg, plain = eqx.filter_jit(lambda m, p, x: (m(x), p(x)))(model, plain_model, x)
    np.testing.assert_allclose(mg, plain, atol=1e-13)


def test_tiles_carry_global_coordinates():
    """Every tile sees where it lies in the field: its coordinate channels are
    the global `j / N` of its pixels (circularly wrapped in the border)."""
    n, levels, padding = 16, 2, 2
    model = mgtfno(
        (4, 4),
        1,
        1,
        4,
        n_layers=1,
        levels=levels,
        padding_fraction=padding / n,
        key=jax.random.key(9),
    )
    tiles = eqx.filter_jit(lambda m, x: m.patch(x))(model, jnp.zeros((1, n, n)))
    h = n // 2**levels
    for tile in range(4**levels):
        row, col = divmod(tile, 2**levels)
        rows = (row * h - padding + np.arange(h + 2 * padding)) % n
        cols = (col * h - padding + np.arange(h + 2 * padding)) % n
        np.testing.assert_allclose(tiles[tile, 1], np.broadcast_to(rows[:, None] / n, (8, 8)))
        np.testing.assert_allclose(tiles[tile, 2], np.broadcast_to(cols[None, :] / n, (8, 8)))
    plain = mgtfno(
        (4, 4), 1, 1, 4, n_layers=1, levels=1, positional_embedding=None, key=jax.random.key(9)
    )
    assert plain.model.in_channels == 2
    with pytest.raises(ValueError, match="`positional_embedding` must be one of"):
        mgtfno((4, 4), 1, 1, 4, levels=1, positional_embedding="tile", key=jax.random.key(9))


def test_sharded_tiles_match_unsharded(mg_model):
    assert jax.device_count() == 4, "conftest sets 4 virtual CPU devices"
    mesh = Mesh(np.array(jax.devices()), ("tiles",))
    sharding = NamedSharding(mesh, PartitionSpec("tiles"))
    sharded = mgtfno(
        (6, 6),
        1,
        1,
        8,
        n_layers=2,
        levels=2,
        padding_fraction=1 / 16,
        tile_sharding=sharding,
        key=jax.random.key(2),
    )
    xs = jax.random.normal(jax.random.key(8), (2, 1, 32, 32))
    apply = eqx.filter_jit(lambda m, x: (jax.vmap(m)(x), jax.vmap(m.patch)(x)))
    plain, _ = apply(mg_model, xs)
    out, tiles = apply(sharded, xs)
    np.testing.assert_allclose(out, plain, atol=1e-12)
    # the 16 tiles of each sample are spread over the 4 devices
    assert tiles.sharding.spec == PartitionSpec(None, "tiles")
    assert len({shard.device for shard in tiles.addressable_shards}) == 4
