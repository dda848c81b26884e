"""Plots of the INSR experiments: each takes `ax=None` / `axes=None` and returns them."""

from __future__ import annotations

import itertools
import math
from typing import Any

import numpy as np


def _axes(ax: Any, **subplots: Any) -> Any:
    """`ax`, or the axes of a new figure made with `plt.subplots(**subplots)`."""
    import matplotlib.pyplot as plt

    return plt.subplots(**subplots)[1] if ax is None else ax


def plot_errors(
    times: np.ndarray,
    curves: dict[str, np.ndarray],
    *,
    ylabel: str,
    title: str | None = None,
    legend: dict | None = None,
    ax: Any = None,
) -> Any:
    """Each error curve of `curves` (`{label: (n_steps + 1,)}`) over `times[1:]`, log scale.

    `legend`: keyword arguments of `ax.legend`. **Returns:** the axis.
    """
    ax = _axes(ax, figsize=(7, 4))
    # curves that coincide (the floor and a fine grid) stay apart by their styles
    for label, curve, style in zip(curves, curves.values(), itertools.cycle(("-", "--", "-", ":"))):
        ax.semilogy(times[1:], np.maximum(curve[1:], 1e-16), style, label=label)
    ax.set_xlabel("t")
    ax.set_ylabel(ylabel)
    if title is not None:
        ax.set_title(title)
    ax.legend(fontsize=7, **(legend or {}))
    return ax


def plot_profiles(
    nodes: np.ndarray,
    times: np.ndarray,
    steps: np.ndarray,
    exact: np.ndarray,
    insr_values: np.ndarray,
    grid_values: np.ndarray,
    ax: Any = None,
) -> Any:
    """1-D snapshots at `steps`: INSR (solid), exact (thick), a grid solution (dotted).

    `exact`, `insr_values`, `grid_values`: `(n_steps + 1, n)` on `nodes`.
    **Returns:** the axis.
    """
    ax = _axes(ax, figsize=(7, 4))
    for i, idx in enumerate(steps):
        color = f"C{i}"
        ax.plot(nodes, exact[idx], color=color, lw=3, alpha=0.3)
        ax.plot(nodes, insr_values[idx], color=color, lw=1, label=f"INSR t={times[idx]:.2f}")
        ax.plot(nodes, grid_values[idx], color=color, ls=":", lw=1)
    ax.set_xlabel("x")
    ax.set_ylabel("u")
    ax.set_title("INSR (solid), exact (thick), first-order grid (dotted)")
    ax.legend(fontsize=7)
    return ax


def vorticity(u: np.ndarray) -> np.ndarray:
    """`∂ₓu_y − ∂_y u_x` `(n, n)` of a periodic `(2, n, n)` field (spectral)."""
    n = u.shape[-1]
    k = np.fft.fftfreq(n, 1.0 / n)
    kx, ky = np.meshgrid(k, k, indexing="ij")
    return np.fft.ifft2(1j * kx * np.fft.fft2(u[1]) - 1j * ky * np.fft.fft2(u[0])).real


def plot_vorticity(
    times: np.ndarray, steps: np.ndarray, insr_values: np.ndarray, exact: np.ndarray, axes=None
) -> Any:
    """Vorticity snapshots on `[0, 2π]²`: INSR, exact and their difference (rows) at `steps`.

    `insr_values`, `exact`: `(n_steps + 1, 2, n, n)` velocities; `axes`: a
    `(3, len(steps))` array of axes. **Returns:** the axes.
    """
    new = axes is None
    axes = _axes(axes, nrows=3, ncols=len(steps), figsize=(3.2 * len(steps), 8.4), squeeze=False)
    fig = axes[0, 0].figure
    extent = (0, 2 * math.pi, 0, 2 * math.pi)
    for col, idx in enumerate(steps):
        w_insr, w_exact = vorticity(insr_values[idx]), vorticity(exact[idx])
        limit = np.abs(w_exact).max()
        for row, (w, label, lim) in enumerate(
            (
                (w_insr, "INSR", limit),
                (w_exact, "exact", limit),
                (w_insr - w_exact, "INSR − exact", max(np.abs(w_insr - w_exact).max(), 1e-12)),
            )
        ):
            ax = axes[row, col]
            image = ax.imshow(
                w.T, origin="lower", extent=extent, cmap="RdBu_r", vmin=-lim, vmax=lim
            )
            ax.set_title(f"{label}, t = {times[idx]:.2f}", fontsize=9)
            ax.set_xticks([])
            ax.set_yticks([])
            fig.colorbar(image, ax=ax, fraction=0.046, pad=0.04)
    if new:
        fig.suptitle("vorticity ∂ₓu_y − ∂_y u_x")
        fig.tight_layout()
    return axes


def plot_deformed(
    x: np.ndarray,
    u: np.ndarray,
    times: np.ndarray,
    steps: np.ndarray,
    *,
    floor: float | None = None,
    title: str = "",
    axes=None,
) -> Any:
    """The deformed body at `steps`: grid lines, its outline and the reference outline.

    `x`: `(n², 2)` cell midpoints of an `n × n` grid of the body; `u`:
    `(n_steps + 1, n², 2)` displacements there; `floor`: the height of a floor
    (drawn when given); `axes`: a `(1, len(steps))` array of axes (default: a
    new figure with panels as tall as the body). **Returns:** the axes.
    """
    n = math.isqrt(len(x))
    x = np.asarray(x)
    if axes is None:
        deformed = x[None] + u[steps]
        extent = deformed.max(axis=(0, 1)) - deformed.min(axis=(0, 1))
        height = 3.2 * float(np.clip(extent[1] / extent[0], 0.25, 2.0))
        axes = _axes(
            None,
            nrows=1,
            ncols=len(steps),
            figsize=(3.2 * len(steps), height + 0.9),
            squeeze=False,
            layout="constrained",
        )
        axes[0][0].figure.suptitle(title)
    ref_x = x.reshape(n, n, 2)
    for ax, idx in zip(axes[0], steps):
        q = (x + u[idx]).reshape(n, n, 2)
        step = max(1, n // 16)
        for k in range(0, n, step):
            ax.plot(q[k, :, 0], q[k, :, 1], "C0", lw=0.6)
            ax.plot(q[:, k, 0], q[:, k, 1], "C0", lw=0.6)
        ax.plot(*_outline(ref_x), "k--", lw=0.8, label="reference")
        ax.plot(*_outline(q), "C0", lw=1.5, label="INSR")
        if floor is not None:
            ax.axhline(floor, color="C3", lw=1.5, label="floor")
        ax.set_aspect("equal")
        ax.set_title(f"t = {times[idx]:.2f}")
    axes[0][0].legend(fontsize=7, loc="upper left")
    return axes


def _outline(q: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The boundary polygon of an `(n, n, 2)` grid of (cell-midpoint) positions."""
    ring = np.concatenate([q[:, 0], q[-1, 1:], q[-2::-1, -1], q[0, -2::-1]])
    return ring[:, 0], ring[:, 1]


def plot_energy(
    times: np.ndarray,
    energy: dict[str, np.ndarray],
    reference_totals: dict[str, np.ndarray],
    *,
    title: str = "",
    ax: Any = None,
) -> Any:
    """INSR's energies (the total thicker) and the references' totals (dashed) over time.

    **Returns:** the axis.
    """
    ax = _axes(ax, figsize=(7, 4))
    for label, curve in energy.items():
        ax.plot(times, curve, label=f"INSR {label}", lw=2 if label == "total" else 1)
    for label, curve in reference_totals.items():
        ax.plot(times, curve, ls="--", label=f"{label.replace('_', ' ')} total")
    ax.set_xlabel("t")
    ax.set_ylabel("energy (mean per sample)")
    ax.set_title(title)
    ax.legend(fontsize=7)
    return ax


def plot_error_vs_memory(
    rows: dict[str, list[dict]],
    *,
    reference_error: float | None = None,
    title: str = "",
    ax: Any = None,
) -> Any:
    """Relative L2 error against memory, log-log: one marker (a single row) or
    curve per label of `rows` (`{label: [{"bytes", "error", ...}, ...]}`), and
    the reference's own refinement error as a horizontal line.

    **Returns:** the axis.
    """
    ax = _axes(ax, figsize=(6.5, 4.5))
    for (label, entries), marker in zip(rows.items(), itertools.cycle("*os^")):
        entries = sorted(entries, key=lambda r: r["bytes"])
        memory = [r["bytes"] / 1024 for r in entries]
        errors = [r["error"] for r in entries]
        size = 14 if len(entries) == 1 else 6
        ax.loglog(memory, errors, marker=marker, ms=size, label=label)
    if reference_error is not None:
        ax.axhline(
            reference_error, color="k", ls=":", lw=1, label="reference's own refinement error"
        )
    ax.set_xlabel("memory of the weights or nodal values (KiB, float32)")
    ax.set_ylabel("relative L2 error of the displacement")
    ax.set_title(title, fontsize=10)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)
    return ax
