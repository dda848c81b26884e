r"""A multilevel symmetric direction generator `M = Nᵀ N`, `N` a linear V-cycle.

One pooling level (the paper's network, [`SymmetricDCDMNet`][sciml.dcdm.SymmetricDCDMNet])
sees a radius of about twenty cells, so its iteration counts grow like the
grid side. Here `N` is a linear U-Net whose depth follows the grid: it pools
until the coarsest side is at most `coarsest` cells, `⌊log₂(n / coarsest)⌋`
levels for an `n`-cell side, with the same convolutions on every level, so
one set of weights serves every grid size. On each level

$$V(h) = S_{\text{post}}\big(s + g\,U\,V(P s)\big),\qquad s = S_{\text{pre}}(h),$$

with `P` 2×2(×2) average pooling, `U` nearest-neighbour upsampling, `S` a few
linear residual convolutions `h ↦ h + K h` (3×3(×3), `width` channels, no
bias), the coarsest level `S_coarse(s)` instead, and a learned gain `g`
(initialised to 2) for the coarse correction: the inverse of a Laplacian
grows by 4 per coarser level on the lowest modes, so `NᵀN` needs `g ≈ 2` per
level, which weights shared across levels could not produce. `N = V ∘ stem`
maps `(1, *grid)` to `(width, *grid)`, and

$$f(r) = N^\top N\, r$$

with `Nᵀ` the exact transpose, written out level by level: adjoint
convolutions (window reversed, channels swapped) in reverse order, and on each
level `t + g U Vᵀ(P t)` (the transposes of `P` and `U` are `U / 2^dim` and
`2^dim P`, whose factors cancel). Both passes run channels last
(`_channels_last`: the layout XLA's CPU convolution is fast in, inside
`solve`'s loop too), with each residual convolution `h + K h` as one
convolution by `K + I`. Bound to a scene by [`direction_fn`][sciml.dcdm.direction_fn]
(the fluid mask `D` on both sides) the generator is `D Nᵀ N D`: symmetric and
positive semi-definite by construction, definite on the fluid cells whenever
`N` is injective there (generic weights: `N` has `width` outputs per input
cell), so [`solve`][sciml.dcdm.solve] with it *is* PCG. One evaluation costs
two passes of `N`; train it with the A-norm loss
([`a_norm_loss`][sciml.dcdm.a_norm_loss]).

Two options serve grids deeper than the training ones and scenes with both
walls and air. `gains=L` gives every level its own gain `g_l`, counted from
the coarsest level (`g_1` joins the coarsest level to the one above it), so a
deeper grid reuses the trained coarse gains and only its extra top levels
repeat `g_L`. `geometry=True` scales the smoothed features on every level by
a mask that depends on the cell labels only,

$$s = m \odot S_{\text{pre}}(h),\qquad m = \phi\,W,$$

`φ` the `(fluid, solid, air)` fractions of the cells under each coarse cell
(the one-hot labels pooled to that level) and `W` a learned `3 × width`
matrix (initialised to ones: `m = 1` inside the grid), so a coarse level can
tell a face where the correction must vanish (air) from one where it must
not (solid). `m` is a fixed diagonal for a given scene, so `N` stays linear in
the residual and `NᵀN` symmetric positive semi-definite (the transpose
applies the same `m` at the mirrored place); the network then takes the
label channels after the residual (`in_channels == 4`), which
[`direction_fn`][sciml.dcdm.direction_fn] supplies from its `labels_onehot`.
"""

from __future__ import annotations

import equinox as eqx
import jax
import jax.numpy as jnp
from jaxtyping import Array, Float, PRNGKeyArray

from .._checks import check_positive_int
from ._channels_last import conv, kernel, pool, transposed, upsample


def _smooth(kernels: list[Array], h: Array) -> Array:
    for k in kernels:
        h = conv(h, k)
    return h


def _smooth_transpose(kernels: list[Array], h: Array) -> Array:
    for k in reversed(kernels):
        h = conv(h, transposed(k))
    return h


class MultilevelDCDMNet(eqx.Module):
    """`x ↦ Nᵀ N x` with `N` a linear V-cycle: one sample `(1, *grid) → grid`.

    **Arguments:**

    - `dim`: 2 or 3 (spatial dimensions).
    - `width`: feature channels of `N` (also its output channels).
    - `smooth`: linear residual convolutions before and after the coarse
      correction on every level, and on the coarsest level.
    - `coarsest`: pool while every side is even and the smallest exceeds this.
    - `gains`: `1` for one coarse-correction gain shared by every level (the
      shipped networks), or the number of per-level gains, counted from the
      coarsest level (levels above the last one reuse it).
    - `geometry`: per-level masks from the pooled cell labels (module
      docstring); the input then carries the `(fluid, solid, air)` one-hot
      channels after the residual.
    - `dtype`: parameter dtype (float32 by default).
    - `key`: PRNG key for the initialisation.

    Calling: `net(x)` with `x` of shape `(in_channels, *grid)` (the residual,
    then with `geometry` the label channels of
    [`label_channels`][sciml.dcdm.label_channels]); returns `grid`. Use it
    through [`direction_fn`][sciml.dcdm.direction_fn] like the other
    generators. `net.factor(x)` is `N x` (`(width, *grid)`),
    `net.factor_transpose(y, labels_onehot)` is `Nᵀ y`, and
    `net.levels(grid)` is the number of levels used on `grid`.
    """

    stem: eqx.nn.Conv
    pre: tuple[eqx.nn.Conv, ...]
    post: tuple[eqx.nn.Conv, ...]
    coarse: tuple[eqx.nn.Conv, ...]
    gain: Float[Array, ""] | Float[Array, " gains"]
    geometry: Float[Array, "3 width"] | None
    dim: int = eqx.field(static=True)
    coarsest: int = eqx.field(static=True)

    def __init__(
        self,
        dim: int = 2,
        *,
        width: int = 8,
        smooth: int = 2,
        coarsest: int = 4,
        gains: int = 1,
        geometry: bool = False,
        dtype=jnp.float32,
        key: PRNGKeyArray,
    ):
        if dim not in (2, 3):
            raise ValueError(f"`dim` must be 2 or 3, got {dim!r}.")
        width = check_positive_int("width", width)
        smooth = check_positive_int("smooth", smooth)
        self.coarsest = check_positive_int("coarsest", coarsest)
        gains = check_positive_int("gains", gains)
        if not isinstance(geometry, bool):
            raise ValueError(f"`geometry` must be True or False, got {geometry!r}.")
        self.dim = dim
        keys = iter(jax.random.split(key, 1 + 3 * smooth))

        def conv(c_in, scale):
            c = eqx.nn.Conv(
                dim, c_in, width, 3, padding=1, use_bias=False, dtype=dtype, key=next(keys)
            )
            return eqx.tree_at(lambda c: c.weight, c, c.weight * scale)

        self.stem = conv(1, 1.0)
        # small residual branches: N starts near a (pooled) identity
        self.pre, self.post, self.coarse = (
            tuple(conv(width, 0.3) for _ in range(smooth)) for _ in range(3)
        )
        # one shared gain keeps the shape the shipped weights were saved with
        self.gain = jnp.full(() if gains == 1 else (gains,), 2.0, dtype)
        self.geometry = jnp.ones((3, width), dtype) if geometry else None

    @property
    def in_channels(self) -> int:
        """1 (the residual), or 4 with `geometry` (the residual and the label channels)."""
        return 1 if self.geometry is None else 4

    @property
    def gains(self) -> int:
        """How many coarse-correction gains (1: one shared by every level)."""
        return 1 if self.gain.ndim == 0 else self.gain.shape[0]

    def level_gain(self, levels: int) -> Float[Array, ""]:
        """The gain of the coarse correction on a level `levels` pools above
        the coarsest (`levels ≥ 1`; beyond `gains`, the last gain)."""
        if self.gain.ndim == 0:
            return self.gain
        return self.gain[min(levels, self.gain.shape[0]) - 1]

    @property
    def dtype(self):
        """The parameter dtype (the network runs in it)."""
        return self.stem.weight.dtype

    def levels(self, grid: tuple[int, ...]) -> int:
        """How many times `grid` is pooled (0: the coarsest level only)."""
        levels = 0
        while min(grid) > self.coarsest and all(n % 2 == 0 for n in grid):
            grid = tuple(n // 2 for n in grid)
            levels += 1
        return levels

    def _kernels(self) -> dict[str, list[Array]]:
        """The channels-last kernels of every convolution, residual ones with `+ I`."""
        kernels = {"stem": [kernel(self.stem.weight, residual=False)]}
        for name in ("pre", "post", "coarse"):
            kernels[name] = [kernel(c.weight, residual=True) for c in getattr(self, name)]
        return kernels

    def masks(self, labels_onehot: Float[Array, " 3 *grid"] | None) -> list[Array] | None:
        """The geometry masks `m = φ W` of every level, finest first (channels
        last, `(*grid_l, width)`), or `None` without `geometry`."""
        if self.geometry is None:
            return None
        fractions = jnp.moveaxis(jnp.asarray(labels_onehot, self.dtype), 0, -1)
        masks = [fractions @ self.geometry]
        for _ in range(self.levels(fractions.shape[:-1])):
            fractions = pool(fractions)
            masks.append(fractions @ self.geometry)
        return masks

    def _vcycle(self, k: dict, h: Array, masks: list[Array] | None) -> Array:
        s = _smooth(k["pre"], h)
        if masks is not None:
            s = masks[0] * s
        levels = self.levels(s.shape[:-1])
        if levels == 0:
            return _smooth(k["coarse"], s)
        coarse = self._vcycle(k, pool(s), None if masks is None else masks[1:])
        return _smooth(k["post"], s + self.level_gain(levels) * upsample(coarse))

    def _vcycle_transpose(self, k: dict, t: Array, masks: list[Array] | None) -> Array:
        levels = self.levels(t.shape[:-1])
        if levels == 0:
            t = _smooth_transpose(k["coarse"], t)
        else:
            t = _smooth_transpose(k["post"], t)
            coarse = self._vcycle_transpose(k, pool(t), None if masks is None else masks[1:])
            t = t + self.level_gain(levels) * upsample(coarse)
        if masks is not None:
            t = masks[0] * t
        return _smooth_transpose(k["pre"], t)

    def _check(self, x: Array, channels: int, name: str) -> None:
        if x.ndim != self.dim + 1 or x.shape[0] != channels:
            raise ValueError(
                f"a {self.dim}-D MultilevelDCDMNet's {name} takes `({channels}, *grid)` with a "
                f"{self.dim}-D grid, got shape {x.shape}."
            )

    def _factor(self, k: dict, x: Array, masks: list[Array] | None) -> Array:
        """`N x` channels last: `(*grid, 1) → (*grid, width)`."""
        return self._vcycle(k, conv(x, k["stem"][0]), masks)

    def _factor_transpose(self, k: dict, y: Array, masks: list[Array] | None) -> Array:
        """`Nᵀ y` channels last: `(*grid, width) → (*grid, 1)`."""
        return conv(self._vcycle_transpose(k, y, masks), transposed(k["stem"][0]))

    def factor(self, x: Float[Array, " in_channels *grid"]) -> Float[Array, " width *grid"]:
        """`N x`, the linear V-cycle (`x`: the residual, then with `geometry`
        the label channels)."""
        self._check(x, self.in_channels, "factor")
        masks = None if self.geometry is None else self.masks(x[1:])
        y = self._factor(self._kernels(), jnp.moveaxis(x[:1].astype(self.dtype), 0, -1), masks)
        return jnp.moveaxis(y, -1, 0)

    def factor_transpose(
        self, y: Float[Array, " width *grid"], labels_onehot: Float[Array, " 3 *grid"] | None = None
    ) -> Float[Array, " 1 *grid"]:
        """`Nᵀ y`, the exact transpose of `factor` (with `geometry`, for the
        scene of `labels_onehot`)."""
        self._check(y, self.stem.weight.shape[0], "factor_transpose")
        got = None if labels_onehot is None else tuple(jnp.shape(labels_onehot))
        if self.geometry is not None and got != (3, *y.shape[1:]):
            raise ValueError(
                "this MultilevelDCDMNet has geometry masks: `labels_onehot` must be the label "
                f"channels `(3, *grid)` of the grid of `y` {y.shape[1:]}, got {got}."
            )
        masks = self.masks(labels_onehot)
        z = self._factor_transpose(
            self._kernels(), jnp.moveaxis(y.astype(self.dtype), 0, -1), masks
        )
        return jnp.moveaxis(z, -1, 0)

    def __call__(self, x: Float[Array, " in_channels *grid"]) -> Float[Array, "*grid"]:
        self._check(x, self.in_channels, "input")
        masks = None if self.geometry is None else self.masks(x[1:])
        k = self._kernels()
        h = x[0].astype(self.dtype)[..., None]
        return self._factor_transpose(k, self._factor(k, h, masks), masks)[..., 0]
