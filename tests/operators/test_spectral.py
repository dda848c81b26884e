"""Spectral convolution against an explicit-DFT reference (no FFT), mode handling, bad input."""

import itertools

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from sciml.operators import SpectralConv, kept_shape, spectral_conv


def dft_reference(x, weight, bias, n_modes, out_grid, separable=False):
    """Spectral conv written with explicit Fourier sums.

    `x̂_k = (1/∏N) Σ_j x_j e^{-2πi k·j/N}` for each kept frequency k (centred
    block on the leading axes, `0..m//2` on the last), `ŷ_k = x̂_k W_k`, and the
    real output `y(x) = Σ_k c_k Re(ŷ_k e^{2πi k·x})` with `c_k = 1` for the DC and
    Nyquist columns of the last axis and 2 otherwise (their conjugate partners).
    """
    grid = x.shape[1:]
    freqs = [np.arange(-(m // 2), m - m // 2) for m in n_modes[:-1]]
    freqs.append(np.arange(n_modes[-1] // 2 + 1))
    in_coords = np.meshgrid(*[np.arange(n) / n for n in grid], indexing="ij")
    out_coords = np.meshgrid(*[np.arange(n) / n for n in out_grid], indexing="ij")
    c_out = weight.shape[0] if separable else weight.shape[1]
    y = np.zeros((c_out, *out_grid))
    for index in itertools.product(*[range(len(f)) for f in freqs]):
        k = [f[i] for f, i in zip(freqs, index)]
        phase = np.exp(-2j * np.pi * sum(kk * xx for kk, xx in zip(k, in_coords)))
        x_hat = np.array([np.sum(channel * phase) for channel in x]) / np.prod(grid)
        if separable:
            y_hat = x_hat * weight[(slice(None), *index)]
        else:
            y_hat = x_hat @ weight[(slice(None), slice(None), *index)]
        weight_k = 1.0 if k[-1] == 0 or 2 * k[-1] == out_grid[-1] else 2.0
        wave = np.exp(2j * np.pi * sum(kk * xx for kk, xx in zip(k, out_coords)))
        y += weight_k * np.real(y_hat.reshape((-1,) + (1,) * len(grid)) * wave)
    return y + bias.reshape((-1,) + (1,) * len(grid))


class ArrayWeight:
    """A fixed complex weight with the tensor interface of `spectral_conv`."""

    def __init__(self, array):
        self.array = jnp.asarray(array)
        self.shape = self.array.shape

    def operands(self, modes):
        return [modes], [self.array]

    def to_tensor(self):
        return self.array


CASES = [
    ((9,), (5,), (16,)),  # 1-D, odd grid, super-resolution
    ((6, 7), (4, 5), (9, 8)),  # odd/even modes and grids, output larger
    ((6, 8), (6, 8), (6, 8)),  # every mode kept, Nyquist on both axes
    ((10, 10), (3, 4), (6, 6)),  # output smaller than input
    ((4, 5, 6), (3, 4, 5), (5, 6, 7)),  # 3-D
]


@pytest.mark.parametrize("channels_last", [False, True])
@pytest.mark.parametrize("transform", ["fft", "dft"])
@pytest.mark.parametrize("grid,n_modes,out_grid", CASES)
def test_dense_matches_explicit_dft(grid, n_modes, out_grid, transform, channels_last):
    rng = np.random.default_rng(len(grid))
    weight = rng.normal(size=(2, 3, *kept_shape(n_modes))) + 1j * rng.normal(
        size=(2, 3, *kept_shape(n_modes))
    )
    bias, x = rng.normal(size=3), rng.normal(size=(2, *grid))
    # channels last: the same sample and the reference with the channel axis moved
    move = (lambda a: np.moveaxis(a, 0, -1)) if channels_last else (lambda a: a)

    @jax.jit
    def conv(x):
        return spectral_conv(
            x,
            ArrayWeight(weight),
            bias,
            n_modes,
            output_shape=out_grid,
            transform=transform,
            channels_last=channels_last,
        )

    np.testing.assert_allclose(
        conv(move(x)), move(dft_reference(x, weight, bias, n_modes, out_grid)), atol=1e-12
    )


def test_module_matches_explicit_dft(getkey):
    conv = SpectralConv(2, 3, (6,), key=getkey())
    x = jax.random.normal(getkey(), (2, 8))
    y = eqx.filter_jit(conv)(x, output_shape=(12,))
    expected = dft_reference(
        np.asarray(x), np.asarray(conv.weight.to_tensor()), np.asarray(conv.bias), (6,), (12,)
    )
    np.testing.assert_allclose(np.asarray(y), expected, atol=1e-12)


@pytest.mark.parametrize("transform", ["fft", "dft"])
def test_float32_matches_float64_reference(getkey, transform):
    conv = SpectralConv(3, 2, (6, 6), dtype=jnp.float32, transform=transform, key=getkey())
    x = jax.random.normal(getkey(), (3, 12, 10), jnp.float32)
    y = eqx.filter_jit(conv)(x)
    assert y.dtype == jnp.float32
    expected = dft_reference(
        np.asarray(x, np.float64),
        np.asarray(conv.weight.to_tensor(), np.complex128),
        np.asarray(conv.bias, np.float64),
        (6, 6),
        (12, 10),
    )
    np.testing.assert_allclose(np.asarray(y), expected, atol=2e-6, rtol=1e-5)


def test_separable_matches_explicit_dft(getkey):
    conv = SpectralConv(3, 3, (4, 6), separable=True, key=getkey())
    assert conv.weight.shape == (3, 4, 4)
    x = jax.random.normal(getkey(), (3, 8, 9))
    expected = dft_reference(
        np.asarray(x),
        np.asarray(conv.weight.to_tensor()),
        np.asarray(conv.bias),
        (4, 6),
        (8, 9),
        separable=True,
    )
    np.testing.assert_allclose(np.asarray(eqx.filter_jit(conv)(x)), expected, atol=1e-12)


def test_single_mode_inside_and_outside_the_kept_block(getkey):
    n = 16
    conv = SpectralConv(1, 2, (6, 6), key=getkey())
    w = np.asarray(conv.weight.to_tensor())[0]  # (out, 6, 4), centred order on axis 0
    bias = np.asarray(conv.bias)[:, None, None]
    xx, yy = np.meshgrid(np.arange(n) / n, np.arange(n) / n, indexing="ij")
    # frequency (k1, k2) = (-2, 1): weight index (k1 + 3, k2); cos = (e + e*)/2 and the
    # rfft keeps the half with k2 > 0, so the output is Re(W e^{2πi k·x}).
    wave = np.exp(2j * np.pi * (-2 * xx + 1 * yy))
    conv = eqx.filter_jit(conv)
    y = conv(jnp.asarray(np.real(wave))[None])
    expected = np.real(w[:, 1, 1, None, None] * wave) + bias
    np.testing.assert_allclose(np.asarray(y), expected, atol=1e-13)
    # frequencies outside the block are removed exactly: the leading axis keeps -3..2,
    # so (3, 1) (stored at k1 = +3 in the real-FFT half) and (±4, 0) go; the last axis
    # keeps k2 <= 3, so (0, 4) goes.
    for k1, k2 in [(3, 1), (4, 0), (0, 4), (5, 5)]:
        outside = np.cos(2 * np.pi * (k1 * xx + k2 * yy))
        y = conv(jnp.asarray(outside)[None])
        np.testing.assert_allclose(np.asarray(y), np.broadcast_to(bias, y.shape), atol=1e-14)


def test_output_is_real_when_spectrum_is_not_hermitian(getkey):
    # With every mode kept on an even grid, W makes the DC and Nyquist columns of the
    # output spectrum complex; the layer must still return the real projection that the
    # explicit reference defines (checked in test_dense_matches_explicit_dft) and be
    # a linear map of the input.
    conv = SpectralConv(1, 1, (8, 8), bias=False, key=getkey())
    a, b = jax.random.normal(getkey(), (2, 1, 8, 8))
    conv = eqx.filter_jit(conv)
    np.testing.assert_allclose(conv(a + 2 * b), conv(a) + 2 * conv(b), atol=1e-12)
    assert jnp.isrealobj(conv(a))


def test_resolution_invariance_and_super_resolution(getkey):
    conv = SpectralConv(2, 2, (6, 6), key=getkey())
    coeffs = jax.random.normal(getkey(), (2, 2, 3, 3))

    def field(n):
        x = jnp.arange(n) / n
        waves = [jnp.cos(2 * jnp.pi * k * x) for k in range(3)]
        sines = [jnp.sin(2 * jnp.pi * k * x) for k in range(3)]
        return jnp.einsum("cij,ia,jb->cab", coeffs[0], jnp.stack(waves), jnp.stack(sines)) + (
            jnp.einsum("cij,ia,jb->cab", coeffs[1], jnp.stack(sines), jnp.stack(waves))
        )

    coarse, fine = field(16), field(32)
    conv = eqx.filter_jit(conv)
    y_fine = conv(fine)
    np.testing.assert_allclose(conv(coarse), y_fine[:, ::2, ::2], atol=1e-12)
    np.testing.assert_allclose(conv(coarse, output_shape=(32, 32)), y_fine, atol=1e-12)


def test_jit_vmap_and_unbatched_agree(getkey):
    conv = SpectralConv(2, 3, (5, 4), factorization="tucker", rank=0.5, key=getkey())
    xs = jax.random.normal(getkey(), (3, 2, 10, 8))
    batched = eqx.filter_jit(lambda m, x: jax.vmap(m)(x))(conv, xs)
    single = eqx.filter_jit(conv)
    for i in range(3):
        np.testing.assert_allclose(batched[i], single(xs[i]), atol=1e-12)


@pytest.mark.parametrize(
    "factorization,implementation",
    [
        ("dense", "factorized"),
        ("tucker", "factorized"),
        ("tucker", "reconstructed"),
        ("cp", "factorized"),
    ],
)
def test_pure_function_and_module_match_explicit_dft(getkey, factorization, implementation):
    # Both the free function and the module are checked against the explicit-DFT
    # reference above (not against each other: the module calls the function).
    # Measured error about 1e-16; atol=1e-12 leaves four orders of headroom while
    # a wrong mode, sign or scale moves the output by O(1).
    conv = SpectralConv(
        2,
        2,
        (4,),
        factorization=factorization,
        rank=0.5,
        implementation=implementation,
        key=getkey(),
    )
    x = jax.random.normal(getkey(), (2, 12))
    expected = dft_reference(
        np.asarray(x), np.asarray(conv.weight.to_tensor()), np.asarray(conv.bias), (4,), (24,)
    )
    y = spectral_conv(
        x, conv.weight, conv.bias, (4,), output_shape=(24,), implementation=implementation
    )
    np.testing.assert_allclose(np.asarray(y), expected, atol=1e-12)
    np.testing.assert_allclose(np.asarray(conv(x, output_shape=(24,))), expected, atol=1e-12)
    assert kept_shape((12, 12)) == (12, 7)


def test_bad_input_raises(getkey):
    conv = SpectralConv(2, 2, (12, 12), key=getkey())
    with pytest.raises(ValueError, match=r"n_modes`\[0\]=12 is larger"):
        conv(jnp.zeros((2, 8, 32)))
    with pytest.raises(ValueError, match=r"n_modes`\[-1\]=12"):
        conv(jnp.zeros((2, 32, 8)))
    with pytest.raises(ValueError, match="output grid"):
        conv(jnp.zeros((2, 32, 32)), output_shape=(8, 8))
    with pytest.raises(ValueError, match="in_channels=2 but the input `x` has 3"):
        conv(jnp.zeros((3, 32, 32)))
    with pytest.raises(ValueError, match="jax.vmap"):
        conv(jnp.zeros((4, 2, 32, 32)))
    with pytest.raises(ValueError, match="`factorization` must be one of"):
        SpectralConv(2, 2, (4, 4), factorization="svd", key=getkey())
    with pytest.raises(ValueError, match="`implementation` must be one of"):
        SpectralConv(2, 2, (4, 4), implementation="fast", key=getkey())
    with pytest.raises(ValueError, match="`n_modes` must be"):
        SpectralConv(2, 2, (4, 0), key=getkey())
    with pytest.raises(ValueError, match="separable"):
        SpectralConv(2, 3, (4, 4), separable=True, key=getkey())


@pytest.mark.parametrize(
    "grid,n_modes", [((9, 8), (5, 6)), ((6, 8), (6, 8)), ((4, 6, 7), (3, 4, 5))]
)
def test_pruned_transforms_match_numpy(grid, n_modes):
    """The pruned forward transform and the inverse of a block with only the kept
    columns equal numpy's full `rfftn` / `irfftn` of the zero-filled block (numpy's
    inverse real FFT also ignores the imaginary parts of the DC and Nyquist
    columns)."""
    from sciml.operators import inverse_rfftn, take_modes
    from sciml.operators._spectral import forward_modes

    rng = np.random.default_rng(3)
    x = rng.normal(size=(2, *grid))
    axes = tuple(range(1, len(grid) + 1))
    full = np.fft.rfftn(x, axes=axes, norm="forward")
    np.testing.assert_allclose(
        forward_modes(jnp.asarray(x), n_modes), take_modes(jnp.asarray(full), n_modes), atol=1e-14
    )
    k = n_modes[-1] // 2 + 1
    short = full[..., :k]
    padded = np.zeros_like(full)
    padded[..., :k] = short
    expected = np.fft.irfftn(padded, s=grid, axes=axes, norm="forward")
    np.testing.assert_allclose(inverse_rfftn(jnp.asarray(short), grid), expected, atol=1e-14)
    with pytest.raises(ValueError, match="columns"):
        inverse_rfftn(jnp.asarray(full), tuple(grid[:-1]) + (grid[-1] - 4,))


@pytest.mark.parametrize(
    "grid,n_modes,out_grid",
    [
        ((9,), (5,), (16,)),  # 1-D, super-resolution
        ((9, 8), (5, 6), (9, 8)),
        ((6, 8), (6, 8), (6, 8)),  # every mode kept: Nyquist columns on both axes
        ((6, 8), (6, 8), (7, 10)),  # super-resolution, odd leading output axis
        ((4, 6, 7), (3, 4, 5), (5, 6, 7)),  # 3-D
    ],
)
@pytest.mark.parametrize("channels_last", [False, True])
def test_dft_transforms_match_numpy(grid, n_modes, out_grid, channels_last):
    """The matrix-product transforms against numpy's full `rfftn` (forward, then
    the centred block) and `irfftn` of the zero-filled block on the output grid
    (including an even output grid whose Nyquist column is kept, and a grid
    where the block is zero-filled on both sides). Measured error 4e-16 in
    float64; a wrong sign, frequency or Nyquist weight is off by O(1). With
    `channels_last` the batch axis of 2 stands last, as channels do (the
    axes are then taken in the other order)."""
    from sciml.operators import take_modes
    from sciml.operators._dft import dft_forward_modes, dft_inverse

    rng = np.random.default_rng(5)
    x = rng.normal(size=(2, *grid))
    axes = tuple(range(1, len(grid) + 1))
    full = np.fft.rfftn(x, axes=axes, norm="forward")
    block = np.asarray(take_modes(jnp.asarray(full), n_modes))
    move = (lambda a: np.moveaxis(a, 0, -1)) if channels_last else (lambda a: a)
    layout = dict(channels_last=channels_last)
    np.testing.assert_allclose(
        dft_forward_modes(jnp.asarray(move(x)), n_modes, **layout), move(block), atol=1e-14
    )

    # numpy's inverse of the block zero-filled into the output grid's layout
    spectrum = np.zeros((2, *out_grid[:-1], out_grid[-1] // 2 + 1), complex)
    rows = [np.arange(-(m // 2), m - m // 2) % n for m, n in zip(n_modes[:-1], out_grid[:-1])]
    columns = np.arange(n_modes[-1] // 2 + 1)
    spectrum[np.ix_(np.arange(2), *rows, columns)] = block
    expected = np.fft.irfftn(spectrum, s=out_grid, axes=axes, norm="forward")
    np.testing.assert_allclose(
        dft_inverse(jnp.asarray(move(block)), n_modes, out_grid, **layout),
        move(expected),
        atol=1e-14,
    )


def test_auto_transform_choice_and_bad_transform(getkey):
    from sciml.operators._spectral import DFT_MAX_KEPT, resolve_transform

    assert resolve_transform("auto", (12, 12)) == "dft"
    assert resolve_transform("auto", (DFT_MAX_KEPT, 2 * DFT_MAX_KEPT - 2)) == "dft"
    assert resolve_transform("auto", (DFT_MAX_KEPT + 1, 4)) == "fft"
    assert resolve_transform("fft", (4, 4)) == "fft"
    with pytest.raises(ValueError, match="transform"):
        SpectralConv(2, 2, (4, 4), transform="matmul", key=getkey())
