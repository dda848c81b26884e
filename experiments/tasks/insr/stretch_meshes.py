"""The mesh side of the clamped-stretch comparison: converged P1 / P2 solutions
of `Elasticity2D.scene("clamped_stretch")` by the sparse Newton of
`solvers.hyperelastic_fem`, each kept in a file so that a resumed run does
not solve it again, and the relative L2 errors on an evaluation grid."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from sciml import insr
from solvers import hyperelastic_fem as fem
from solvers.mesh_fields import P1Field, P2Field, p1_field, p2_field


LARGE = 10_000  # nodal values of a solve that reports every Newton iteration


def square_mesh(order: int, cells: int, problem) -> P1Field | P2Field:
    """A zero P1 / P2 field of `cells × cells` cells on the problem's body."""
    nodes = order * cells + 1
    cls = P2Field if order == 2 else P1Field
    return cls(jnp.zeros((nodes, nodes, 2)), problem.lower, problem.upper)


def sized_mesh(order: int, budget: int, problem) -> P1Field | P2Field:
    """A zero P1 / P2 field of about `budget` nodal values (the memory of a
    network of `budget` weights)."""
    return (p2_field if order == 2 else p1_field)(problem, int(budget))


def dirichlet(mesh, problem) -> tuple[np.ndarray, np.ndarray]:
    """`(held, lift)` of `fem.solve`: both components of the nodes on the
    clamped faces held, at the problem's lift (`insr.boundary_lift`, full
    load), which is also the first guess elsewhere."""
    mx, my = mesh.values.shape[:2]
    axes = [np.linspace(lo, up, m) for lo, up, m in zip(problem.lower, problem.upper, (mx, my))]
    nodes = jnp.asarray(np.stack(np.meshgrid(*axes, indexing="ij"), -1))
    box = (problem.constraints, problem.lower, problem.upper)
    lift = jax.vmap(jax.vmap(lambda x: insr.boundary_lift(*box, x)))
    held = np.zeros((mx, my, 2), bool)
    faces = {"left": np.s_[0], "right": np.s_[-1], "bottom": np.s_[:, 0], "top": np.s_[:, -1]}
    for c in problem.constraints:
        if not isinstance(c, insr.Clamp):
            raise ValueError(f"the mesh solves hold clamped faces only, got {c!r}.")
        held[faces[c.face]] = True
    return held, np.asarray(lift(nodes))


def solve_cached(path: Path, mesh, problem, *, max_iterations: int, tol: float) -> dict:
    """The converged mesh of `mesh`'s kind and size: read from `path` (`.npz`)
    when an earlier (interrupted) run solved it, else solved and written there.

    **Returns:** `{"field", "energy", "iterations", "converged", "seconds"}`."""
    if path.exists():
        data = np.load(path)
        meta = json.loads(str(data["meta"]))
        return {"field": type(mesh)(jnp.asarray(data["values"]), mesh.lower, mesh.upper), **meta}
    held, lift = dirichlet(mesh, problem)
    name = f"{path.stem} ({mesh.values.size} values)"

    def progress(line: str) -> None:
        print(f"{name}: {line}", file=sys.stderr, flush=True)

    start = time.perf_counter()
    # a line per Newton iteration for the large solves (minutes), one at the end for all
    result = fem.solve(
        mesh,
        lambda F: insr.energy_density(F, problem.a, problem.b),
        held,
        lift,
        tol=tol,
        max_iterations=max_iterations,
        progress=progress if mesh.values.size > LARGE else None,
    )
    meta = {
        "energy": result.energy,
        "iterations": int(sum(result.iterations)),
        "converged": bool(result.converged),
        "seconds": time.perf_counter() - start,
    }
    progress(
        f"E = {result.energy:.10g} after {meta['iterations']} Newton iterations, "
        f"{'converged' if result.converged else 'NOT converged'}, {meta['seconds']:.1f} s"
    )
    path.parent.mkdir(parents=True, exist_ok=True)
    np.savez(path, values=np.asarray(result.field.values), meta=json.dumps(meta))
    return {"field": result.field, **meta}


@eqx.filter_jit
def _displacement(field, x):
    return jax.vmap(field)(x)


def displacement(field, x: jax.Array) -> np.ndarray:
    """`(n, 2)` displacement of a field at the points `x`."""
    return np.asarray(_displacement(field, x))


def relative_errors(u: np.ndarray, reference: np.ndarray, near: np.ndarray) -> dict:
    """Relative L2 error of `u` against `reference` `(n, 2)` over all points,
    over the `near` ones and over the others (each relative to the
    reference's norm on the same points)."""

    def rel(mask):
        return float(np.linalg.norm(u[mask] - reference[mask]) / np.linalg.norm(reference[mask]))

    every = np.ones(len(u), bool)
    return {"error": rel(every), "error_near_corner": rel(near), "error_interior": rel(~near)}
