"""Complex weight tensors: dense, CP, Tucker, tensor-train and joint Tucker.

Every tensor stores its complex entries as real arrays with a trailing axis of
size 2 (real, imaginary) and builds complex arrays when called. JAX's gradient
of a real loss with respect to a complex leaf is the complex conjugate of the
PyTorch convention, so a plain optimiser applied to complex leaves would move
imaginary parts the wrong way; with real pairs every optimiser sees ordinary
real parameters (Adam then acts per component, like torch's AdamW on a real
view).

Each tensor describes itself as einsum operands: `operands(modes)` returns the
subscripts and complex arrays whose einsum over `modes` is the full tensor. The
spectral convolution splices those operands into one contraction with its
input (the "factorized" implementation) or builds the tensor first
(`to_tensor()`, the "reconstructed" implementation).

Initialisation (tensorly-torch's rule): entries of the full tensor have
`E|w|² = std²`. Dense entries are complex normal with that variance; the factors
of a decomposition are complex normal with the variance that makes the product
have it (Tucker: `(std/√∏r)^{2/(N+1)}`; CP with unit weights:
`(std/√R)^{2/N}`; TT: `(std/√∏r)^{2/N}`).
"""

import math
import string
from collections.abc import Sequence

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Complex, Float, PRNGKeyArray

from .._checks import check_float_dtype
from ._ranks import cp_rank, tt_rank, tucker_rank


RANK_LETTERS = string.ascii_uppercase


def as_complex(pair: Float[Array, " *shape 2"]) -> Complex[Array, " *shape"]:
    """The complex array stored as a real `(..., 2)` pair."""
    return jax.lax.complex(pair[..., 0], pair[..., 1])


def complex_normal(key: PRNGKeyArray, shape: Sequence[int], std: float, dtype) -> Array:
    """Real pair `(*shape, 2)` of a complex normal with `E|z|² = std²`."""
    return complex_normals(key, [shape], std, dtype)[0]


def complex_normals(
    key: PRNGKeyArray, shapes: Sequence[Sequence[int]], std: float, dtype
) -> list[Array]:
    """Real pairs `(*shape, 2)` of complex normals with `E|z|² = std²`, one per shape.

    Drawn with a single `jax.random.normal` call and sliced: one random-number
    kernel per tensor instead of one per factor keeps eager construction fast.
    """
    shapes = [(*(int(n) for n in shape), 2) for shape in shapes]
    sizes = [math.prod(shape) for shape in shapes]
    flat = (std / math.sqrt(2.0)) * jax.random.normal(key, (sum(sizes),), dtype)
    out, start = [], 0
    for shape, size in zip(shapes, sizes):
        out.append(flat[start : start + size].reshape(shape))
        start += size
    return out


def _check_modes(modes: str, shape: tuple[int, ...]) -> None:
    if len(modes) != len(shape):
        raise ValueError(f"need {len(shape)} mode letters for shape {shape}, got {modes!r}.")


class DenseTensor(eqx.Module):
    """A dense complex tensor.

    **Arguments:** `shape`; `std` of the entries; `dtype` of the real storage;
    keyword-only `key`.
    """

    data: Float[Array, " *shape 2"]
    shape: tuple[int, ...] = eqx.field(static=True)

    def __init__(self, shape, *, std: float = 1.0, dtype=None, key: PRNGKeyArray):
        self.shape = tuple(int(s) for s in shape)
        self.data = complex_normal(key, self.shape, std, check_float_dtype("dtype", dtype))

    def operands(self, modes: str) -> tuple[list[str], list[Array]]:
        _check_modes(modes, self.shape)
        return [modes], [as_complex(self.data)]

    def to_tensor(self) -> Complex[Array, " *shape"]:
        return as_complex(self.data)


class CPTensor(eqx.Module):
    """CP (canonical polyadic) tensor `W = Σ_r λ_r a⁽¹⁾_r ⊗ … ⊗ a⁽ᴺ⁾_r`.

    **Arguments:** `shape`; `rank` (float fraction of the dense size or int R);
    `std` of the entries of the full tensor; `dtype`; keyword-only `key`.

    Fields: `weights` `(R, 2)` (λ, initialised to 1) and `factors[k]` `(n_k, R, 2)`.
    """

    weights: Float[Array, " rank 2"]
    factors: tuple[Float[Array, " dim rank 2"], ...]
    shape: tuple[int, ...] = eqx.field(static=True)
    rank: int = eqx.field(static=True)

    def __init__(self, shape, rank=0.1, *, std: float = 1.0, dtype=None, key: PRNGKeyArray):
        dtype = check_float_dtype("dtype", dtype)
        self.shape = tuple(int(s) for s in shape)
        self.rank = cp_rank(self.shape, rank)
        std_factors = (std / math.sqrt(self.rank)) ** (1.0 / len(self.shape))
        self.weights = jnp.zeros((self.rank, 2), dtype).at[:, 0].set(1.0)
        self.factors = tuple(
            complex_normals(key, [(n, self.rank) for n in self.shape], std_factors, dtype)
        )

    def operands(self, modes: str) -> tuple[list[str], list[Array]]:
        _check_modes(modes, self.shape)
        r = "Z"
        subs = [r] + [m + r for m in modes]
        return subs, [as_complex(self.weights)] + [as_complex(f) for f in self.factors]

    def to_tensor(self) -> Complex[Array, " *shape"]:
        return reconstruct(self)


class TuckerTensor(eqx.Module):
    """Tucker tensor `W = G ×₁ U⁽¹⁾ ×₂ … ×_N U⁽ᴺ⁾`.

    **Arguments:** `shape`; `rank` (float fraction, int, or one int per mode);
    `std` of the entries of the full tensor; `dtype`; keyword-only `key`.

    Fields: `core` `(*ranks, 2)` and `factors[k]` `(n_k, r_k, 2)`.
    """

    core: Float[Array, " *ranks 2"]
    factors: tuple[Float[Array, " dim rank 2"], ...]
    shape: tuple[int, ...] = eqx.field(static=True)
    rank: tuple[int, ...] = eqx.field(static=True)

    def __init__(self, shape, rank=0.1, *, std: float = 1.0, dtype=None, key: PRNGKeyArray):
        dtype = check_float_dtype("dtype", dtype)
        self.shape = tuple(int(s) for s in shape)
        self.rank = tucker_rank(self.shape, rank)
        order = len(self.shape)
        std_factors = (std / math.sqrt(float(np.prod(self.rank)))) ** (1.0 / (order + 1))
        shapes = [self.rank] + [(n, r) for n, r in zip(self.shape, self.rank)]
        self.core, *factors = complex_normals(key, shapes, std_factors, dtype)
        self.factors = tuple(factors)

    def operands(self, modes: str) -> tuple[list[str], list[Array]]:
        _check_modes(modes, self.shape)
        ranks = RANK_LETTERS[: len(modes)]
        subs = [ranks] + [m + r for m, r in zip(modes, ranks)]
        return subs, [as_complex(self.core)] + [as_complex(f) for f in self.factors]

    def to_tensor(self) -> Complex[Array, " *shape"]:
        return reconstruct(self)


class TTTensor(eqx.Module):
    """Tensor-train tensor `W[i₁…i_N] = G₁[:, i₁, :] G₂[:, i₂, :] ⋯ G_N[:, i_N, :]`.

    **Arguments:** `shape`; `rank` (float fraction, int, or the N+1 ranks with
    boundary ranks 1); `std` of the entries of the full tensor; `dtype`;
    keyword-only `key`.

    Fields: `cores[k]` `(r_k, n_k, r_{k+1}, 2)`.
    """

    cores: tuple[Float[Array, " rank_in dim rank_out 2"], ...]
    shape: tuple[int, ...] = eqx.field(static=True)
    rank: tuple[int, ...] = eqx.field(static=True)

    def __init__(self, shape, rank=0.1, *, std: float = 1.0, dtype=None, key: PRNGKeyArray):
        dtype = check_float_dtype("dtype", dtype)
        self.shape = tuple(int(s) for s in shape)
        self.rank = tt_rank(self.shape, rank)
        order = len(self.shape)
        std_factors = (std / math.sqrt(float(np.prod(self.rank)))) ** (1.0 / order)
        shapes = [(self.rank[k], n, self.rank[k + 1]) for k, n in enumerate(self.shape)]
        self.cores = tuple(complex_normals(key, shapes, std_factors, dtype))

    def operands(self, modes: str) -> tuple[list[str], list[Array]]:
        _check_modes(modes, self.shape)
        r = RANK_LETTERS[: len(modes) + 1]
        subs = [r[k] + m + r[k + 1] for k, m in enumerate(modes)]
        return subs, [as_complex(c) for c in self.cores]

    def to_tensor(self) -> Complex[Array, " *shape"]:
        return reconstruct(self)


class JointTuckerTensor(eqx.Module):
    """One Tucker tensor for the weights of all layers, with the layer as a mode.

    The full tensor has shape `(n_layers, *shape)`: `W[l] = (G ×₀ U_L[l]) ×₁ U⁽¹⁾
    … ×_N U⁽ᴺ⁾`, so every layer shares the core and the factors of the other
    modes and owns one row of the layer factor `U_L` (the global factorisation of
    Kossaifi et al., MG-TFNO).

    **Arguments:** `n_layers`; `shape` of one layer's weight; `rank` (float
    fraction of the dense size of all layers together, int, or `N+1` ints with
    the layer mode first); `std`; `dtype`; keyword-only `key`.
    """

    core: Float[Array, " *ranks 2"]
    layer_factor: Float[Array, " n_layers rank 2"]
    factors: tuple[Float[Array, " dim rank 2"], ...]
    shape: tuple[int, ...] = eqx.field(static=True)
    rank: tuple[int, ...] = eqx.field(static=True)

    def __init__(
        self, n_layers: int, shape, rank=0.1, *, std: float = 1.0, dtype=None, key: PRNGKeyArray
    ):
        dtype = check_float_dtype("dtype", dtype)
        self.shape = (int(n_layers), *(int(s) for s in shape))
        self.rank = tucker_rank(self.shape, rank)
        order = len(self.shape)
        std_factors = (std / math.sqrt(float(np.prod(self.rank)))) ** (1.0 / (order + 1))
        shapes = [self.rank] + [(n, r) for n, r in zip(self.shape, self.rank)]
        self.core, self.layer_factor, *factors = complex_normals(key, shapes, std_factors, dtype)
        self.factors = tuple(factors)

    @property
    def n_layers(self) -> int:
        return self.shape[0]

    def layer(self, index: int) -> "JointTuckerLayer":
        """The Tucker tensor of layer `index` (its core `G ×₀ U_L[index]`)."""
        if not 0 <= index < self.n_layers:
            raise ValueError(f"layer `index` must be in [0, {self.n_layers}), got {index}.")
        return JointTuckerLayer(self, index)

    def operands(self, modes: str) -> tuple[list[str], list[Array]]:
        _check_modes(modes, self.shape)
        ranks = RANK_LETTERS[: len(modes)]
        subs = [ranks] + [m + r for m, r in zip(modes, ranks)]
        arrays = [as_complex(self.core), as_complex(self.layer_factor)]
        return subs, arrays + [as_complex(f) for f in self.factors]

    def to_tensor(self) -> Complex[Array, " n_layers *shape"]:
        return reconstruct(self)


class JointTuckerLayer(eqx.Module):
    """Layer `index` of a `JointTuckerTensor`, usable wherever a tensor is."""

    joint: JointTuckerTensor
    index: int = eqx.field(static=True)

    @property
    def shape(self) -> tuple[int, ...]:
        return self.joint.shape[1:]

    def operands(self, modes: str) -> tuple[list[str], list[Array]]:
        _check_modes(modes, self.shape)
        ranks = RANK_LETTERS[: len(modes) + 1]
        core = as_complex(self.joint.core)
        row = as_complex(self.joint.layer_factor)[self.index]
        layer_core = jnp.tensordot(row, core, axes=1)
        subs = [ranks[1:]] + [m + r for m, r in zip(modes, ranks[1:])]
        return subs, [layer_core] + [as_complex(f) for f in self.joint.factors]

    def to_tensor(self) -> Complex[Array, " *shape"]:
        return reconstruct(self)


def reconstruct(tensor) -> Complex[Array, " *shape"]:
    """The full complex tensor: the einsum of `tensor.operands`."""
    modes = string.ascii_lowercase[: len(tensor.shape)]
    subs, arrays = tensor.operands(modes)
    return jnp.einsum(f"{','.join(subs)}->{modes}", *arrays, optimize="optimal")


def make_tensor(
    factorization: str, shape, rank=0.1, *, std: float = 1.0, dtype=None, key: PRNGKeyArray
):
    """Builds a `DenseTensor`, `CPTensor`, `TuckerTensor` or `TTTensor`.

    **Arguments:** `factorization` in `"dense"`, `"cp"`, `"tucker"`, `"tt"`
    (`None` means dense); `shape`; `rank` (ignored for dense); `std`; `dtype`;
    keyword-only `key`.
    """
    if factorization is None or factorization == "dense":
        return DenseTensor(shape, std=std, dtype=dtype, key=key)
    cls = {"cp": CPTensor, "tucker": TuckerTensor, "tt": TTTensor}.get(
        factorization.lower() if isinstance(factorization, str) else factorization
    )
    if cls is None:
        raise ValueError(
            f"`factorization` must be one of None, 'dense', 'cp', 'tucker', 'tt', got {factorization!r}."
        )
    return cls(shape, rank, std=std, dtype=dtype, key=key)
