"""DCDM's training set on disk: Ritz vectors and right-hand sides in HDF5.

One file may hold several data sets, each a group named by a hash of the scene
and the settings, so a changed scene or setting never reuses stale data. The
Lanczos run is stored once it is done; the right-hand sides are written in
chunks with a counter, so an interrupted generation resumes where it stopped
and a finished one is read back without any work. With a direct solver the
exact solutions `x* = A⁻¹ b` of the right-hand sides (for the A-norm loss,
[`a_norm_loss`][sciml.dcdm.a_norm_loss]) are stored beside them the same way.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from pathlib import Path

import h5py
import numpy as np

from .._custom_types import Real
from ._ritz import lanczos, ritz_pairs, ritz_rhs


def dataset_key(scene: np.ndarray, **settings) -> str:
    """A hex digest of the scene's bytes and shape and the settings (JSON)."""
    h = hashlib.sha256()
    scene = np.ascontiguousarray(scene)
    h.update(str((scene.shape, scene.dtype.str)).encode())
    h.update(scene.tobytes())
    h.update(json.dumps(settings, sort_keys=True).encode())
    return h.hexdigest()[:20]


def ritz_dataset(
    path: str | Path,
    apply_A: Callable[[np.ndarray], np.ndarray],
    scene: np.ndarray,
    *,
    n_rhs: int,
    n_ritz: int = 1600,
    factor: Real = 9.0,
    low_fraction: Real | None = 0.6,
    seed: int = 0,
    chunk: int = 256,
    progress: Callable[[str], None] | None = None,
    solve_A: Callable[[np.ndarray], np.ndarray] | None = None,
) -> dict[str, np.ndarray]:
    """Generates (or reads back) the Ritz training set of one scene.

    **Arguments:**

    - `path`: the HDF5 file (created if missing).
    - `apply_A`: `x ↦ A x` on numpy grids of the scene's shape.
    - `scene`: the label grid (keys the cache; its shape is the grid shape).
    - `n_rhs`: how many right-hand sides.
    - `n_ritz`: Lanczos steps (memory: see
      [`lanczos`][sciml.dcdm.lanczos]).
    - `factor`, `low_fraction`: the low-end bias of
      [`ritz_rhs`][sciml.dcdm.ritz_rhs].
    - `seed`: seeds the Lanczos start vector and the coefficients.
    - `chunk`: right-hand sides generated (and saved) at a time.
    - `progress`: called with a short message after each stage.
    - `solve_A`: `b ↦ A⁻¹ b` on numpy grids (e.g. a sparse direct solve;
      for a singular `A` the solution in its range). If given, the exact
      solutions of the right-hand sides are stored (and cached) too.

    **Returns:** `{"rhs": (n_rhs, *grid) float32, "ritz_values": (k,)
    float64, "key": the group name}`, plus `"solutions": (n_rhs, *grid)
    float32` with `solve_A`.
    """
    scene = np.asarray(scene)
    settings = dict(n_ritz=n_ritz, factor=factor, low_fraction=low_fraction, seed=seed)
    key = dataset_key(scene, **settings)
    shape = scene.shape
    with h5py.File(path, "a") as f:
        group = f.require_group(key)
        group.attrs["settings"] = json.dumps(settings, sort_keys=True)
        if "ritz_vectors" not in group:
            V, alpha, beta, _ = lanczos(apply_A, shape, n_ritz, seed=seed)
            theta, vectors, _ = ritz_pairs(V, alpha, beta)
            del V
            group.create_dataset("ritz_values", data=theta)
            group.create_dataset("ritz_vectors", data=vectors.astype(np.float32))
            f.flush()
            if progress:
                progress(
                    f"Lanczos: {theta.size} Ritz pairs, θ in [{theta[0]:.3g}, {theta[-1]:.3g}]"
                )
        theta = group["ritz_values"][...]
        vectors = group["ritz_vectors"][...]
        if "rhs" in group and group["rhs"].shape[0] < n_rhs:
            group["rhs"].resize(n_rhs, axis=0)
        if "rhs" not in group:
            group.create_dataset(
                "rhs", shape=(n_rhs, *shape), maxshape=(None, *shape), dtype=np.float32
            )
            group.attrs["rhs_done"] = 0
        done = int(group.attrs["rhs_done"])
        while done < n_rhs:
            n = min(chunk, n_rhs - done)
            b = ritz_rhs(
                vectors, n, seed=seed, factor=factor, low_fraction=low_fraction, start=done
            )
            group["rhs"][done : done + n] = b.reshape(n, *shape)
            done += n
            group.attrs["rhs_done"] = done
            f.flush()
            if progress:
                progress(f"right-hand sides: {done}/{n_rhs}")
        rhs = group["rhs"][:n_rhs]
        out = {"rhs": rhs, "ritz_values": theta, "key": key}
        if solve_A is not None:
            out["solutions"] = _solutions(group, rhs, solve_A, chunk, progress)
    return out


def _solutions(group, rhs: np.ndarray, solve_A, chunk: int, progress) -> np.ndarray:
    """`A⁻¹ b` for every stored right-hand side, cached in `group["solutions"]`
    and resumed like the right-hand sides."""
    n, shape = rhs.shape[0], rhs.shape[1:]
    if "solutions" not in group:
        group.create_dataset(
            "solutions", shape=rhs.shape, maxshape=(None, *shape), dtype=np.float32
        )
        group.attrs["solutions_done"] = 0
    if group["solutions"].shape[0] < n:
        group["solutions"].resize(n, axis=0)
    done = int(group.attrs["solutions_done"])
    while done < n:
        stop = min(done + chunk, n)
        for i in range(done, stop):
            group["solutions"][i] = np.asarray(solve_A(rhs[i].astype(np.float64)))
        done = stop
        group.attrs["solutions_done"] = done
        group.file.flush()
        if progress:
            progress(f"exact solutions: {done}/{n}")
    return group["solutions"][:n]
