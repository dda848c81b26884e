r"""PTD: perturb HiPPO-LegS, then diagonalise (Yu, Nigmetov, Morozov, Mahoney, Erichson).

HiPPO-LegS `A` is diagonalisable (eigenvalues `−1, …, −N`) but its eigenvector
matrix has a condition number that grows exponentially with `N`. PTD picks a
small perturbation `E` for which `A + E = Ṽ Λ̃ Ṽ⁻¹` is well conditioned and
initialises a diagonal layer with `Λ̃` and `B̃ = Ṽ⁻¹ B`. Its transfer function
is then uniformly close to HiPPO-LegS's (error `O(κ(Ṽ) ‖E‖ log N)`), which
S4D-LegS's is not.

`E` is *optimised*, not drawn at random: writing `E = ‖A‖₂ X`, minimise

$$\kappa(\tilde V(X)) + \gamma \|X\|_F + \beta \|d\|_p + \mu \Big(\sum_n \mathrm{relu}(\mathrm{Re}\,\tilde\lambda_n + m)^2
  + \sum_n \mathrm{relu}(g - |\mathrm{Im}\,\tilde\lambda_n|)^2\Big)$$

with Adam, where `κ` is the 2-norm condition number of `Ṽ` with unit columns
and `d_k = ‖Φ_X(iω_k) − Φ_H(iω_k)‖₂` is the distance between the state
transfer functions `Φ(iω) = (iω − M)⁻¹B` of `M = A + E` and of HiPPO-LegS on a
grid of frequencies (`‖·‖_p` with `p = 8`, a smooth stand-in for the maximum).
The first penalty keeps every eigenvalue left of `−m` (stability); the second
keeps them off the real axis (for even `N`), so the spectrum of the real matrix
`A + E` consists of `N/2` conjugate pairs and a layer can store half of it. The
eigenvector derivatives come from `jax.lax.linalg.eig(...,
enable_eigvec_derivs=True)`. The start is a small strictly-upper-triangular `E`
(all eigenvalues already complex) and the best feasible iterate is returned.

The transfer term is ours, not the paper's (which minimises `κ² + λ‖E‖_F`
alone). Without it the optimiser settles at the same `κ ≈ 6` and
`‖E‖₂/‖A‖₂ ≈ 0.046` for every `N`; as `‖A‖₂` grows like `N²`, so does the
absolute perturbation, and the worst-case distance to HiPPO-LegS grows from
0.32 (`N = 16`) to 1.09 (`N = 128`), largest at low frequency (0.92 at
`ω = 0`). With it (`β = 10`) the distance is 0.05–0.08 for `N ≤ 32`.
At larger `N` two settings of the optimisation matter as much as the term:
Adam steps scaled per entry by HiPPO-LegS's own entry size
(`entry_scaling`, see `optimize_perturbation`) and a learning rate of 3e-4
instead of 1e-3. The low modes' entries of `A` are `O(1)` while `‖A‖₂` is
`O(N²)`, so a step that is small against `‖A‖₂` still moves them by a large
fraction of themselves. Measured worst-case distances (`python -m
sciml.ssm.make_ptd` prints them): `N = 64`: 0.21 with neither, 0.13 with the
scaling, 0.08 with both; `N = 128`: 0.81, 0.77, 0.44 (the paper reports
0.41 for its own `N = 128` perturbation), at condition numbers 5–7. At
`N = 256` the same settings stop at 0.91; a learning rate of 1e-4 for 3,000
steps reaches 0.72 (κ = 5.5), and a heavier transfer term (`β = 30`) does
worse (0.85): `N = 256` is not yet at the smaller sizes' quality.

Perturbations for the common sizes are shipped in `ptd_perturbations.npz`
(regenerate with `python -m sciml.ssm.make_ptd`; the file records the
settings of each size: `N ≤ 32` were optimised before the two settings
above, which give them the same distances to within 1%, and `N = 256`
with the lower learning rate); others are
optimised on first use (seconds for `N ≤ 64`, about two minutes for
`N = 128` on an otherwise idle 2-core CPU, several times longer on a busy
one) and cached for the session.
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import optax

from ._hippo import _check_size, hippo_legs
from ._transfer import hippo_transfer


DATA_FILE = Path(__file__).with_name("ptd_perturbations.npz")
PTD_DEFAULTS = {
    "gamma": 100.0,
    "steps": 1500,
    "learning_rate": 3e-4,
    "init_scale": 0.05,
    "margin": 0.5,
    "gap": 0.25,
    "penalty": 10.0,
    "transfer_weight": 10.0,
    "entry_scaling": True,
    "seed": 0,
}
TRANSFER_POWER = 8


class TransferTarget(NamedTuple):
    """HiPPO-LegS's state transfer function on the PTD objective's frequency grid.

    - `B`: HiPPO-LegS's input matrix, shape `(N,)`.
    - `omega`: frequencies `(M,)`, from 0 up.
    - `reference`: `Φ_H(iω) = (iω − A)⁻¹B`, complex `(M, N)`.
    """

    B: Any
    omega: Any
    reference: Any


def ptd_frequencies(N: int) -> np.ndarray:
    """The objective's frequency grid: `ω₀ = 0`, `ω_{k+1} = ω_k + 0.25 + 0.02 ω_k`, up to `N²/2`.

    Only `ω ≥ 0` is needed (both systems are real, so `Φ(−iω)` is the conjugate
    of `Φ(iω)`). The spacing is 0.25 at low frequency, half the smallest
    damping the margin allows (a pole at `−m + iν` gives a peak of half-width
    `m = 0.5`), and grows by 2% per point where the spectrum is more damped;
    `N²/2` is beyond the largest pole frequency of every perturbation here
    (about `N²/6`). 124 points for `N = 16`, 329 for `N = 128`.

    **Returns:** float64 array `(M,)`.
    """
    N = _check_size(N)
    omega = [0.0]
    while omega[-1] < N**2 / 2:
        omega.append(omega[-1] + 0.25 + 0.02 * omega[-1])
    return np.array(omega)


def legs_transfer_target(N: int) -> TransferTarget:
    """HiPPO-LegS's transfer function on [`ptd_frequencies`][sciml.ssm.ptd_frequencies]`(N)` (numpy)."""
    omega = ptd_frequencies(N)
    return TransferTarget(hippo_legs(N)[1], omega, hippo_transfer(N, omega))


def _enable_x64():
    """float64 inside a block, whatever the global setting (the API moved in jax 0.5)."""
    if hasattr(jax, "enable_x64"):
        return jax.enable_x64(True)
    from jax.experimental import enable_x64

    return enable_x64()


def _unit_columns(V):
    return V / jnp.linalg.norm(V, axis=0)


def _real_pair_distance(w: jax.Array, tol: float | jax.Array) -> jax.Array:
    """Σ over real eigenvalues of the distance to the nearest other real one.

    Real eigenvalues of a real matrix stay real under small perturbations (the
    gap penalty has no gradient there) until two of them meet and leave the
    axis as a conjugate pair: this term pulls them together.
    """
    real = jnp.abs(w.imag) < tol
    distance = jnp.abs(w.real[:, None] - w.real[None, :])
    others = real[:, None] & real[None, :] & ~jnp.eye(w.shape[0], dtype=bool)
    nearest = jnp.min(jnp.where(others, distance, jnp.inf), axis=1)
    return jnp.sum(jnp.where(real & jnp.isfinite(nearest), nearest, 0.0))


def transfer_errors(w: jax.Array, V: jax.Array, target: TransferTarget) -> jax.Array:
    """`d_k = ‖V (iω_k − diag w)⁻¹ V⁻¹ B − Φ_H(iω_k)‖₂` for `M = V diag(w) V⁻¹`.

    **Arguments:** eigenvalues `w (N,)` and eigenvectors `V (N, N)` of the
    perturbed matrix; the `target` (`B`, frequencies `(K,)`, reference `(K, N)`).

    **Returns:** real array `(K,)`.
    """
    B_tilde = jnp.linalg.solve(V, jnp.asarray(target.B, V.dtype))
    omega = jnp.asarray(target.omega, w.real.dtype)
    phi = (B_tilde / (1j * omega[:, None] - w)) @ V.T
    return jnp.linalg.norm(phi - jnp.asarray(target.reference, V.dtype), axis=1)


def ptd_objective(
    X: jax.Array,
    A: jax.Array,
    target: TransferTarget | None = None,
    *,
    gamma: float = PTD_DEFAULTS["gamma"],
    penalty: float = PTD_DEFAULTS["penalty"],
    margin: float = PTD_DEFAULTS["margin"],
    gap: float = PTD_DEFAULTS["gap"],
    transfer_weight: float = PTD_DEFAULTS["transfer_weight"],
    pairs: bool = True,
) -> tuple[jax.Array, dict[str, jax.Array]]:
    r"""The PTD objective for `E = ‖A‖₂ X` (see the module docstring).

    **Arguments:**

    - `X`: real perturbation in units of `‖A‖₂`, shape `(N, N)`.
    - `A`: the matrix to perturb, `(N, N)` (HiPPO-LegS).
    - `target`: the transfer function to stay close to
      ([`legs_transfer_target`][sciml.ssm.legs_transfer_target]); `None` drops
      the transfer term (the paper's objective).
    - `gamma`: weight of `‖X‖_F`; `transfer_weight`: `β`, weight of the
      transfer term; `penalty`: weight of the two penalties; `margin`:
      eigenvalues are pushed left of `−margin`; `gap`: and (if `pairs`) at
      least `gap` away from the real axis.

    **Returns:** `(loss, aux)` with `aux` holding `kappa`, `size` (`‖X‖_F`),
    `transfer` (`max_k d_k`, 0 without a target), `violation` (the penalty
    sum) and `eigenvalues`.
    """
    scale = jnp.linalg.norm(A, 2)
    M = (A + scale * X).astype(jnp.result_type(X.dtype, jnp.complex64))
    w, V = jax.lax.linalg.eig(M, compute_left_eigenvectors=False, enable_eigvec_derivs=True)
    sv = jnp.linalg.svd(_unit_columns(V), compute_uv=False)
    kappa = sv[0] / sv[-1]
    violation = jnp.sum(jax.nn.relu(w.real + margin) ** 2)
    if pairs:
        violation = violation + jnp.sum(jax.nn.relu(gap - jnp.abs(w.imag)) ** 2)
        violation = violation + _real_pair_distance(w, 1e-9 * scale)
    size = jnp.linalg.norm(X)
    loss = kappa + gamma * size + penalty * violation
    transfer = jnp.zeros((), size.dtype)
    if target is not None:
        d = transfer_errors(w, V, target)
        transfer = jnp.max(d)
        loss = loss + transfer_weight * jnp.sum(d**TRANSFER_POWER) ** (1 / TRANSFER_POWER)
    aux = {"kappa": kappa, "size": size, "transfer": transfer, "violation": violation}
    return loss, {**aux, "eigenvalues": w}


def optimize_perturbation(
    N: int,
    *,
    gamma: float = PTD_DEFAULTS["gamma"],
    steps: int = PTD_DEFAULTS["steps"],
    learning_rate: float = PTD_DEFAULTS["learning_rate"],
    init_scale: float = PTD_DEFAULTS["init_scale"],
    margin: float = PTD_DEFAULTS["margin"],
    gap: float = PTD_DEFAULTS["gap"],
    penalty: float = PTD_DEFAULTS["penalty"],
    transfer_weight: float = PTD_DEFAULTS["transfer_weight"],
    entry_scaling: bool = PTD_DEFAULTS["entry_scaling"],
    seed: int = PTD_DEFAULTS["seed"],
) -> np.ndarray:
    """Optimises the PTD perturbation `E` of HiPPO-LegS of size `N` (float64, on CPU).

    Adam with a cosine-decaying learning rate and gradient clipping on
    [`ptd_objective`][sciml.ssm.ptd_objective] (with HiPPO-LegS's transfer
    function as the target unless `transfer_weight = 0`), started from
    `E₀ = init_scale ‖A‖₂ (U + 0.01 G) / ‖U + 0.01 G‖₂` with `U` the strict upper
    triangle of ones and `G` Gaussian (`seed`). Returns the feasible iterate
    (all eigenvalues left of the imaginary axis and, for even `N`, none real)
    of lowest `κ + γ‖X‖_F + β max_k d_k`. If none is found (a start too small
    to make every eigenvalue complex), the run is repeated from twice the
    start, up to 8×.

    With `entry_scaling` Adam works on `Y` with `X = W ∘ Y`,
    `W_nk = √((2n+1)(2k+1)) / (2N−1)` (the relative size of HiPPO-LegS's own
    entries), so each entry of `E` moves at a rate proportional to the entry of
    `A` it perturbs: the low modes, which set the transfer function at low
    frequency, move least. The objective is unchanged (a function of `E`).

    **Arguments:** `N` and the objective's settings (see the module docstring);
    `steps`, `learning_rate`, `entry_scaling`, `seed` of the optimisation.

    **Returns:** `E`, a float64 numpy array `(N, N)`.
    """
    N = _check_even_size(N)
    if steps < 1:
        raise ValueError(f"steps must be >= 1, got {steps}.")
    if not (np.isfinite(transfer_weight) and transfer_weight >= 0):
        raise ValueError(f"transfer_weight must be finite and >= 0, got {transfer_weight}.")
    A_np, q = hippo_legs(N)  # B_n = q_n = √(2n+1), also the scale of A's entries
    scale = np.linalg.norm(A_np, 2)
    rng = np.random.default_rng(seed)
    start = np.triu(np.ones((N, N)), 1) + 0.01 * rng.standard_normal((N, N))
    start /= np.linalg.norm(start, 2)
    weights = np.outer(q, q) / (2 * N - 1) if entry_scaling else np.ones((N, N))
    pairs = N % 2 == 0
    target = legs_transfer_target(N) if transfer_weight > 0 else None
    objective = functools.partial(
        ptd_objective,
        target=target,
        gamma=gamma,
        penalty=penalty,
        margin=margin,
        gap=gap,
        transfer_weight=transfer_weight,
        pairs=pairs,
    )
    optimizer = optax.chain(
        optax.clip_by_global_norm(10.0),
        optax.adam(optax.cosine_decay_schedule(learning_rate, steps, alpha=0.01)),
    )

    with jax.default_device(jax.devices("cpu")[0]), _enable_x64():
        A = jnp.asarray(A_np, jnp.float64)
        W = jnp.asarray(weights, jnp.float64)

        def body(carry, _):
            Y, opt_state, best, best_Y = carry
            (loss, aux), grad = jax.value_and_grad(lambda Y: objective(W * Y, A), has_aux=True)(Y)
            w = aux["eigenvalues"]
            feasible = jnp.all(w.real < 0) & jnp.all(jnp.isfinite(grad))
            if pairs:
                feasible &= jnp.all(jnp.abs(w.imag) > 1e-6 * scale)
            value = aux["kappa"] + gamma * aux["size"] + transfer_weight * aux["transfer"]
            better = feasible & (value < best)
            best, best_Y = jnp.where(better, value, best), jnp.where(better, Y, best_Y)
            grad = jnp.where(jnp.isfinite(grad), grad, 0.0)
            updates, opt_state = optimizer.update(grad, opt_state)
            return (optax.apply_updates(Y, updates), opt_state, best, best_Y), None

        @jax.jit
        def run(Y):
            carry = (Y, optimizer.init(Y), jnp.asarray(jnp.inf), Y)
            (_, _, best, best_Y), _ = jax.lax.scan(body, carry, None, length=steps)
            return best, best_Y

        # A start too small to push every eigenvalue off the real axis (N = 2)
        # finds nothing feasible: try again from larger ones.
        for attempt in range(4):
            best, best_Y = run(jnp.asarray(init_scale * 2**attempt * start / weights, jnp.float64))
            if np.isfinite(float(best)):
                return scale * np.asarray(W * best_Y, np.float64)
    raise RuntimeError(
        f"PTD optimisation for N={N} found no feasible perturbation in {steps} steps "
        f"from init_scale {init_scale} to {init_scale * 8}; raise steps or init_scale."
    )


@functools.cache
def _shipped() -> dict[int, np.ndarray]:
    if not DATA_FILE.is_file():
        return {}
    with np.load(DATA_FILE) as data:
        return {int(k[1:]): np.array(data[k]) for k in data.files if k.startswith("N")}


def shipped_ptd_sizes() -> tuple[int, ...]:
    """State sizes whose PTD perturbation ships with the package."""
    return tuple(sorted(_shipped()))


def _check_even_size(N: Any) -> int:
    N = _check_size(N)
    if N % 2:
        raise ValueError(
            f"`N` must be even for PTD, got N={N}: the perturbation moves every eigenvalue "
            "off the real axis into conjugate pairs, which a real matrix of odd size cannot "
            "have (one eigenvalue stays real). Use an even N."
        )
    return N


@functools.cache
def _computed(N: int) -> np.ndarray:
    return optimize_perturbation(N)


def ptd_perturbation(N: int) -> np.ndarray:
    """The optimised perturbation `E` for HiPPO-LegS of size `N`.

    Loaded from the package data for the shipped sizes
    ([`shipped_ptd_sizes`][sciml.ssm.shipped_ptd_sizes]), otherwise computed
    with [`optimize_perturbation`][sciml.ssm.optimize_perturbation]'s defaults
    and cached.

    **Arguments:** `N`, an even positive integer (odd sizes raise
    `ValueError`: a real matrix of odd size keeps a real eigenvalue, so no
    perturbation gives the conjugate-pair spectrum PTD needs).

    **Returns:** float64 numpy array `(N, N)` (a copy).
    """
    N = _check_even_size(N)
    shipped = _shipped()
    E = shipped[N] if N in shipped else _computed(N)
    return E.copy()


def ptd_eig(N: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    r"""Eigen-decomposition `A + E = Ṽ diag(Λ̃) Ṽ⁻¹` of the perturbed HiPPO-LegS.

    Columns of `Ṽ` have unit norm; eigenvalues are sorted by imaginary part,
    then real part, so for even `N` the first `N/2` have `Im Λ̃ < 0` and the
    last `N/2` are their conjugates in reverse order. Any eigenvalue with
    `Re Λ̃ ≥ 0` (none for the shipped perturbations) is reflected to
    `−|Re Λ̃|`, as S4-PTD does.

    **Returns:** `(Lambda, V, V_inv)`: complex128 arrays `(N,)`, `(N, N)`, `(N, N)`.
    """
    A, _ = hippo_legs(N)
    w, V = np.linalg.eig(A + ptd_perturbation(N))
    order = np.lexsort((w.real, w.imag))
    w, V = w[order], V[:, order]
    V = V / np.linalg.norm(V, axis=0)
    w = -np.abs(w.real) + 1j * w.imag
    return w.astype(np.complex128), V.astype(np.complex128), np.linalg.inv(V)
