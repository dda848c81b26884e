"""Diagonal initialisations: S4D-Lin/Inv/LegS/Real, HiPPO-N blocks (S5), PTD, Δ.

All functions return numpy arrays (complex128 for the spectra): they are
initialisation constants, computed once in float64 and cast by the layers.

Conjugate symmetry: a real `N`-dimensional state whose spectrum is closed under
conjugation is stored as `N/2` modes, one of each conjugate pair, and outputs
are `2 Re(...)`. Where the modes come from a real matrix (LegS, PTD), the
stored ones are those with `Im λ < 0` with their eigenvectors; S4D-Lin and -Inv
list `Im λ ≥ 0` as in the papers (with `B = 1` and a random `C`, either half
gives the same layer).
"""

from __future__ import annotations

import jax
import numpy as np
import scipy.linalg
from jaxtyping import Array, PRNGKeyArray

from .._checks import check_float_dtype
from ._hippo import _check_size, hippo_legs, hippo_normal_eig
from ._ptd import ptd_eig


S4D_INITS = ("legs", "hippo-n", "lin", "inv", "real", "ptd", "diag")
S5_INITS = ("hippo-n", "legs", "lin", "inv", "real", "ptd")


def _check_even(N: int, name: str = "N") -> int:
    N = _check_size(N, name)
    if N % 2:
        raise ValueError(
            f"{name}={N} is odd, but conjugate symmetry stores N/2 complex modes; "
            f"accepted: an even {name} (or conj_sym=False where the layer offers it)."
        )
    return N


def s4d_lin(N: int) -> np.ndarray:
    """S4D-Lin eigenvalues `Λ_n = −½ + iπn`, `n = 0, …, N/2 − 1`, shape `(N/2,)`."""
    n = np.arange(_check_even(N) // 2)
    return -0.5 + 1j * np.pi * n


def s4d_inv(N: int) -> np.ndarray:
    """S4D-Inv eigenvalues `Λ_n = −½ + i(N/π)(N/(2n+1) − 1)`, shape `(N/2,)`."""
    N = _check_even(N)
    n = np.arange(N // 2)
    return -0.5 + 1j * (N / np.pi) * (N / (2 * n + 1) - 1)


def s4d_real(N: int) -> np.ndarray:
    """S4D-Real eigenvalues `Λ_n = −(n + 1)`, shape `(N/2,)`."""
    return -(np.arange(_check_even(N) // 2) + 1.0) + 0j


def s4d_legs(
    N: int, b_scale: float = 1.0, b_clip: float | None = 2.0
) -> tuple[np.ndarray, np.ndarray]:
    r"""S4D-LegS: the spectrum of HiPPO-LegS's normal part, `B = b_scale · VᴴB_HiPPO`.

    `A_N = V diag(Λ) Vᴴ` comes from a Hermitian `eigh` (see
    [`hippo_normal_eig`][sciml.ssm.hippo_normal_eig]); the `N/2` modes with
    `Im Λ < 0` are kept. The reference code (`state-spaces/s4`) uses
    `b_scale = 1` and clips `Im B` to `[−b_clip, b_clip]` with `b_clip = 2`, the
    defaults here. Only `b_scale = ½` without clipping makes the kernel
    converge to HiPPO-LegS's as `N → ∞` (the S4D paper's theorem); the clip
    acts on `Im B`, so its effect depends on the (LAPACK-chosen) phases of the
    eigenvectors.

    **Arguments:**

    - `N`: state size (even).
    - `b_scale`: factor on `VᴴB_HiPPO` (`1` reference, `0.5` theory).
    - `b_clip`: clip `Im B` to `[−b_clip, b_clip]`; `None` for no clip.

    **Returns:** `(Lambda, B)`, complex128 arrays of shape `(N/2,)`.
    """
    Lambda, V = legs_modes(_check_even(N))
    _, B = hippo_legs(N)
    B = b_scale * (V.conj().T @ B)
    if b_clip is not None:
        if b_clip <= 0:
            raise ValueError(f"b_clip must be positive or None, got {b_clip}.")
        B = B.real + 1j * np.clip(B.imag, -b_clip, b_clip)
    return Lambda, B


def legs_modes(N: int) -> tuple[np.ndarray, np.ndarray]:
    """The conjugate half of HiPPO-N: `(Λ (N/2,), V (N, N/2))`, `Im Λ < 0`."""
    Lambda, V = hippo_normal_eig(_check_even(N))
    return Lambda[: N // 2], V[:, : N // 2]


def ptd_modes(N: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The conjugate half of the PTD spectrum: `(Λ̃, Ṽ, Ṽ⁻¹)` restricted to `Im Λ̃ < 0`.

    **Returns:** complex128 arrays `(N/2,)`, `(N, N/2)`, `(N/2, N)`.
    """
    Lambda, V, V_inv = ptd_eig(_check_even(N))
    half = N // 2
    if not np.all(Lambda[:half].imag < 0):
        raise ValueError(
            f"the PTD spectrum of size {N} has real eigenvalues, so it cannot be stored as "
            "conjugate pairs; use conj_sym=False."
        )
    return Lambda[:half], V[:, :half], V_inv[:half]


def s4d_ptd(N: int) -> tuple[np.ndarray, np.ndarray]:
    """S4-PTD: `Λ̃` and `B̃ = Ṽ⁻¹ B_HiPPO` of the perturbed HiPPO-LegS, conjugate half.

    **Returns:** `(Lambda, B)`, complex128 arrays of shape `(N/2,)`.
    """
    Lambda, _, V_inv = ptd_modes(N)
    _, B = hippo_legs(N)
    return Lambda, V_inv @ B


def s4d_init(
    init: str, N: int, *, b_scale: float = 1.0, b_clip: float | None = 2.0
) -> tuple[np.ndarray, np.ndarray]:
    """`(Λ, B)` of one S4D init, each `(N/2,)` complex128.

    `init` is one of `"legs"` (alias `"hippo-n"`), `"lin"`, `"inv"`, `"real"`,
    `"ptd"`; `B = 1` for Lin/Inv/Real. (`"diag"` mixes Inv and Lin across
    copies; the layer handles it.)
    """
    if init in ("legs", "hippo-n"):
        return s4d_legs(N, b_scale, b_clip)
    if init == "ptd":
        return s4d_ptd(N)
    spectra = {"lin": s4d_lin, "inv": s4d_inv, "real": s4d_real}
    if init not in spectra:
        raise ValueError(f"init must be one of {S4D_INITS}, got {init!r}.")
    Lambda = spectra[init](N)
    return Lambda, np.ones_like(Lambda)


def s5_init(
    init: str, P: int, blocks: int = 1, *, conj_sym: bool = True
) -> tuple[np.ndarray, np.ndarray | None, np.ndarray | None]:
    """Block-diagonal S5 initialisation: `J = blocks` copies of a size-`P/J` spectrum.

    - `"hippo-n"` (alias `"legs"`): each block is HiPPO-LegS's normal part,
      `Λ = −½ + i eigh(−iS)`, with its unitary eigenvectors.
    - `"ptd"`: each block is the PTD diagonalisation of size `P/J`.
    - `"lin"`, `"inv"`, `"real"`: the S4D spectra of size `P/J`, eigenvector
      matrix the identity (returned as `None`).

    With `conj_sym`, each block keeps its `P/(2J)` modes with `Im λ < 0`.

    **Returns:** `(Lambda, V, V_inv)`: `(P',)`, `(P, P')`, `(P', P)` with
    `P' = P/2` (conj_sym) or `P`; `V`, `V_inv` are `None` for Lin/Inv/Real.
    """
    P = _check_size(P, "state_size")
    blocks = _check_size(blocks, "blocks")
    if P % blocks:
        raise ValueError(f"blocks={blocks} must divide state_size={P}.")
    size = P // blocks
    if conj_sym:
        _check_even(size, "state_size / blocks")
    if init in ("hippo-n", "legs"):
        Lambda, V = hippo_normal_eig(size)
        V_inv = V.conj().T
    elif init == "ptd":
        _check_even(size, "state_size / blocks")  # PTD's spectrum is conjugate pairs
        Lambda, V, V_inv = ptd_eig(size)
        if conj_sym:
            Lambda, V, V_inv = ptd_modes(size)
    elif init in ("lin", "inv", "real"):
        if not conj_sym and size % 2:
            raise ValueError(
                f"init={init!r} builds conjugate pairs, so state_size / blocks must be even; "
                f"got {size}."
            )
        half = {"lin": s4d_lin, "inv": s4d_inv, "real": s4d_real}[init](size)
        Lambda = half if conj_sym else np.concatenate([half, np.conj(half)])
        return np.tile(Lambda, blocks), None, None
    else:
        raise ValueError(f"init must be one of {S5_INITS}, got {init!r}.")
    if conj_sym and init != "ptd":
        Lambda, V, V_inv = Lambda[: size // 2], V[:, : size // 2], V_inv[: size // 2]
    return (
        np.tile(Lambda, blocks),
        scipy.linalg.block_diag(*([V] * blocks)),
        scipy.linalg.block_diag(*([V_inv] * blocks)),
    )


def log_dt_init(
    key: PRNGKeyArray, shape: tuple[int, ...], dt_min: float, dt_max: float, dtype=None
) -> Array:
    """`log Δ ~ U[log dt_min, log dt_max]`: a jax array of `shape`."""
    check_dt_range(dt_min, dt_max)
    dtype = check_float_dtype("dtype", dtype)
    return jax.random.uniform(key, shape, dtype, np.log(dt_min), np.log(dt_max))


def check_dt_range(dt_min: float, dt_max: float) -> None:
    """Raises `ValueError` unless `0 < dt_min < dt_max`."""
    if not (dt_min > 0 and dt_max > 0):
        raise ValueError(f"dt_min and dt_max must be positive, got {dt_min}, {dt_max}.")
    if not dt_min < dt_max:
        raise ValueError(
            f"dt_min must be smaller than dt_max, got dt_min={dt_min} >= dt_max={dt_max}."
        )
