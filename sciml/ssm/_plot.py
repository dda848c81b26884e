"""Convergence of diagonal initialisations to HiPPO-LegS: systems, table and plot."""

from __future__ import annotations

import numpy as np

from ._hippo import hippo_legs
from ._init import legs_modes, s4d_legs
from ._ptd import ptd_eig
from ._transfer import smooth_input_distance, transfer_distance


def diagonal_system(
    N: int, init: str = "legs", *, b_scale: float = 1.0, b_clip: float | None = 2.0
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The full diagonal system `(Λ, V, B̃)` (all `N` modes) of an S4D-LegS or PTD init.

    For `"legs"` the stored half and its conjugates (`B̃` scaled and clipped as
    in [`s4d_legs`][sciml.ssm.s4d_legs]); for `"ptd"` the eigen-decomposition
    of the perturbed matrix with `B̃ = Ṽ⁻¹B`. The input of
    [`transfer_distance`][sciml.ssm.transfer_distance] and
    [`smooth_input_distance`][sciml.ssm.smooth_input_distance].

    **Returns:** complex128 arrays `(N,)`, `(N, N)`, `(N,)`.
    """
    if init == "ptd":
        Lambda, V, V_inv = ptd_eig(N)
        return Lambda, V, V_inv @ hippo_legs(N)[1]
    if init != "legs":
        raise ValueError(f"init must be 'legs' or 'ptd', got {init!r}.")
    Lambda, B_tilde = s4d_legs(N, b_scale, b_clip)
    _, V = legs_modes(N)
    return tuple(np.concatenate([x, np.conj(x)], axis=-1) for x in (Lambda, V, B_tilde))


CONVERGENCE_SYSTEMS = {
    "S4D-LegS (B, clip 2: reference code)": {"init": "legs"},
    "S4D-LegS (B/2, no clip: theory)": {"init": "legs", "b_scale": 0.5, "b_clip": None},
    "PTD": {"init": "ptd"},
}


def convergence_table(sizes=(8, 16, 32, 64, 128)) -> dict[str, dict[str, list[float]]]:
    """Worst-case and smooth-input distances to HiPPO-LegS for each system and size.

    **Returns:** `{system: {"worst_case": [...], "smooth_input": [...]}}`, one
    entry per size, for the systems of `CONVERGENCE_SYSTEMS`.
    """
    table = {}
    for name, options in CONVERGENCE_SYSTEMS.items():
        systems = [diagonal_system(N, **options) for N in sizes]
        table[name] = {
            "worst_case": [transfer_distance(*s) for s in systems],
            "smooth_input": [smooth_input_distance(*s) for s in systems],
        }
    return table


def plot_convergence(sizes=(8, 16, 32, 64, 128), table=None, axes=None):
    """Plots [`convergence_table`][sciml.ssm.convergence_table] against the state size.

    Left: `sup_ω ‖Φ(iω) − Φ_H(iω)‖₂` (uniform convergence: only PTD); right:
    the state error for the smooth input `exp(−t²/2)` (weak convergence).

    **Arguments:** `sizes`; `table` (computed if `None`); `axes`, two matplotlib
    axes (a new figure if `None`).

    **Returns:** the matplotlib figure.
    """
    import matplotlib.pyplot as plt

    table = convergence_table(sizes) if table is None else table
    if axes is None:
        _, axes = plt.subplots(1, 2, figsize=(10, 3.8))
    titles = {
        "worst_case": "worst case over frequency",
        "smooth_input": "smooth input $e^{-t^2/2}$, state at $t=2$",
    }
    for ax, key in zip(axes, ("worst_case", "smooth_input")):
        for name, values in table.items():
            ax.loglog(sizes, np.maximum(values[key], 1e-16), "o-", label=name)
        ax.set(xlabel="state size N", ylabel="distance to HiPPO-LegS", title=titles[key])
        ax.set_xticks(list(sizes), [str(n) for n in sizes])
        ax.grid(True, which="both", alpha=0.3)
    axes[0].legend(fontsize=8)
    fig = axes[0].figure
    fig.tight_layout()
    return fig
