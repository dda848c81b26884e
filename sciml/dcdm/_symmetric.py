r"""A symmetric positive semi-definite direction generator `M = Nᵀ N`.

The paper's network is nonlinear in the residual. Inside the iteration that
costs what makes preconditioned CG work: with a fixed SPD preconditioner `M`
the directions of DCDM are those of PCG, A-conjugate to *every* earlier
direction although only the last `n_orthogonal` are stored, so the error
components a step removes stay removed. A nonlinear `f` gets that only
locally; measured here, a network with the one-step loss of an AMG V-cycle
then needs as many iterations as plain CG (`docs/benchmarks.md`).

This module keeps the paper's architecture and its scale-free training loss
but makes the direction linear and symmetric: `N` is the paper's network with
identity activations and no biases (a linear convolutional map, one pooling
level), and

$$f(r) = N^\top N\, r ,$$

with `Nᵀ` the exact transpose of `N` (`jax.linear_transpose`: the adjoint
convolutions, pooling ↔ upsampling). Bound to a scene by
[`direction_fn`][sciml.dcdm.direction_fn] (which masks to the fluid cells,
`D`) the generator is the matrix `D Nᵀ N D`: symmetric and positive
semi-definite, so [`solve`][sciml.dcdm.solve] with it *is* PCG with a learned
preconditioner, in the factored form `GᵀG` of factorised sparse approximate
inverses. One evaluation costs two passes of `N`.

It sees the geometry only through the fluid mask: the label channels of the
paper's follow-up would enter additively and break linearity (that work
predicts spatially varying kernels from the labels instead).
"""

from __future__ import annotations

import equinox as eqx
import jax
import jax.numpy as jnp
from jaxtyping import Array, Float, PRNGKeyArray

from ._network import DCDMNet


class SymmetricDCDMNet(eqx.Module):
    """`x ↦ Nᵀ N x` with `N` a linear [`DCDMNet`][sciml.dcdm.DCDMNet]: one sample
    `(1, *grid) → grid`.

    **Arguments:**

    - `dim`: 2 or 3 (spatial dimensions).
    - `pairs`: residual pairs of `N` at (full, half, full) resolution, as in
      [`DCDMNet`][sciml.dcdm.DCDMNet].
    - `width`: feature channels of `N`.
    - `dtype`: parameter dtype (float32 by default).
    - `key`: PRNG key for the initialisation.

    Calling: `net(x)` with `x` of shape `(1, *grid)`, every side of `grid`
    even; returns `grid`. Use it through
    [`direction_fn`][sciml.dcdm.direction_fn] and train it with
    [`dcdm_loss`][sciml.dcdm.dcdm_loss], like the paper's network.
    """

    factor: DCDMNet

    def __init__(
        self,
        dim: int = 3,
        *,
        pairs: tuple[int, int, int] = (2, 3, 2),
        width: int = 16,
        dtype=jnp.float32,
        key: PRNGKeyArray,
    ):
        self.factor = DCDMNet(
            dim,
            pairs=pairs,
            width=width,
            label_channels=False,
            activation=_identity,
            bias=False,
            dtype=dtype,
            key=key,
        )

    @property
    def dim(self) -> int:
        return self.factor.dim

    @property
    def in_channels(self) -> int:
        return self.factor.in_channels

    @property
    def dtype(self):
        """The parameter dtype (the network runs in it)."""
        return self.factor.dtype

    def __call__(self, x: Float[Array, " 1 *grid"]) -> Float[Array, "*grid"]:
        y = self.factor(x)  # checks the shape
        (z,) = jax.linear_transpose(self.factor, x)(y)
        return z[0]


def _identity(x: Array) -> Array:
    return x
