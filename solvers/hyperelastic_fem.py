r"""Static hyperelasticity by a sparse Newton method on P1 / P2 triangle meshes.

The converged mesh reference and baselines of the INSR clamped stretch (Chen
et al., ICML 2023): the displacement `u` of the rectangle minimises the stored
energy `E(u) = ∫ ψ(I + ∇u) dX` over the nodal values of a
[`P1Field`][solvers.mesh_fields.P1Field] or
[`P2Field`][solvers.mesh_fields.P2Field] (the same structured mesh: `nx × ny`
cells, each split along its diagonal from `(i+1, j)` to `(i, j+1)`), with some
nodal components held at prescribed values (Dirichlet nodes, held exactly).
The density `ψ(F)` is any JAX function of the `2 × 2` deformation gradient.

**Quadrature.** A P1 field has a constant `F` per triangle: one point is
exact. A P2 field's `F` is linear on a triangle, so `det F` is quadratic and a
volume term `(det F − 1)²` quartic: the degree-4 six-point rule (Dunavant) is
exact for it.

**Assembly.** The element energies, gradients and Hessians (`12 × 12` for P2)
come from JAX (`jax.vmap` of `jax.hessian` over the elements, compiled once per
mesh); the global Hessian is a `scipy.sparse` CSR matrix restricted to the free
components.

**Newton.** The prescribed values are applied in `load_steps` equal
increments (a load ramp): the first guess is the `lift` (a displacement
meeting the prescribed values, e.g. the linear interpolation between two
clamped faces) at the first increment, then the previous solution scaled to
the new load. Each iteration solves `H δ = −g` on the free components by a
sparse LU (`scipy.sparse.linalg.splu`) and takes Newton's step whole when it
passes the Armijo test `E(u + δ) ≤ E(u) + 10⁻⁴ gᵀδ`. Away from the minimiser a
non-convex `ψ` (ARAP under compression, the volume term) makes `H`
indefinite, and Newton's step may climb or overshoot; then every element's
Hessian block is replaced by its absolute value (eigenvalues `|λ|`, which
keeps its stiff and soft directions apart, unlike a shift `H + μI`), and the
step of that positive definite matrix is cut back by halving until the Armijo
test holds. A load step has converged when a whole Newton step is below `tol`
in the max-norm of the displacement; there Newton converges quadratically,
so the error left is about the square of that step.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import scipy.sparse as sp
import scipy.sparse.linalg as spla

from solvers.mesh_fields import P1Field, P2Field


# the degree-4 rule of a triangle (Dunavant): barycentric points and weights
# that sum to one (the mean over the triangle)
_DUNAVANT4 = (
    (0.108103018168070, 0.445948490915965, 0.223381589678011),
    (0.816847572980459, 0.091576213509771, 0.109951743655322),
)


def _rule(order: int) -> tuple[np.ndarray, np.ndarray]:
    """`(barycentric points (n_q, 3), weights (n_q,))` exact for the volume term."""
    if order == 1:
        return np.full((1, 3), 1 / 3), np.ones(1)
    points, weights = [], []
    for a, b, w in _DUNAVANT4:
        for k in range(3):
            points.append(np.roll([a, b, b], k))
            weights.append(w)
    return np.asarray(points), np.asarray(weights)


# the two triangles of a cell on the node grid of a P2 field (half-cell units):
# vertices a, b, c, then the midpoints of ab, ac, bc (the order of P2Field)
_LOWER = ((0, 0), (2, 0), (0, 2), (1, 0), (0, 1), (1, 1))
_UPPER = ((2, 2), (0, 2), (2, 0), (1, 2), (2, 1), (1, 1))


def _shape_gradients(order: int, corners: np.ndarray) -> np.ndarray:
    """`∂N/∂X` `(n_q, n_nodes, 2)` of one triangle with vertices `corners` (3, 2)
    at the quadrature points of its order."""
    lam, _ = _rule(order)
    # barycentric coordinates are affine in X: ∇λ from the vertex matrix
    m = np.vstack([corners.T, np.ones(3)])
    grad_lam = np.linalg.inv(m)[:, :2]  # (3, 2): ∇λ_a
    if order == 1:
        return np.broadcast_to(grad_lam, (len(lam), 3, 2)).copy()
    out = []
    for point in lam:
        vertices = [(4 * point[a] - 1) * grad_lam[a] for a in range(3)]
        edges = [
            4 * (point[a] * grad_lam[b] + point[b] * grad_lam[a])
            for a, b in ((0, 1), (0, 2), (1, 2))
        ]
        out.append(np.stack(vertices + edges))
    return np.asarray(out)


def mesh_arrays(field: P1Field | P2Field) -> tuple[np.ndarray, np.ndarray, np.ndarray, float]:
    """`(element node indices (n_el, n_nodes), element type (n_el,) of 0 lower /
    1 upper, shape gradients (2, n_q, n_nodes, 2), triangle area)` of the
    mesh of `field`; node `(p, q)` of `field.values` has index `p·m_y + q`."""
    order = 2 if isinstance(field, P2Field) else 1
    mx, my = field.values.shape[:2]
    nx, ny = (mx - 1) // order, (my - 1) // order
    hx = (field.upper[0] - field.lower[0]) / nx
    hy = (field.upper[1] - field.lower[1]) / ny
    local = [_LOWER, _UPPER] if order == 2 else [_LOWER[:3], _UPPER[:3]]
    i, j = np.meshgrid(np.arange(nx), np.arange(ny), indexing="ij")
    i, j = i.ravel(), j.ravel()
    elements, kinds, gradients = [], [], []
    for kind, nodes in enumerate(local):
        offsets = np.asarray(nodes) * order // 2  # half-cell units to node units
        p = order * i[:, None] + offsets[None, :, 0]
        q = order * j[:, None] + offsets[None, :, 1]
        elements.append(p * my + q)
        kinds.append(np.full(len(i), kind))
        corners = np.asarray(nodes[:3], float) / 2 * np.array([hx, hy])
        gradients.append(_shape_gradients(order, corners))
    return np.concatenate(elements), np.concatenate(kinds), np.stack(gradients), hx * hy / 2


@dataclasses.dataclass(frozen=True)
class NewtonResult:
    """What [`solve`][solvers.hyperelastic_fem.solve] returns.

    - `field`: the P1 / P2 field of the solution (nodal values `(m_x, m_y, 2)`).
    - `energy`: `E(u)`.
    - `iterations`: Newton iterations of every load step.
    - `step_norms`: the max-norm of every Newton step taken (line search
      included), in order; the last of each load step is below `tol`.
    - `gradient_norms`: the 2-norm of the free gradient before every step.
    - `converged`: whether every load step met `tol`.
    """

    field: P1Field | P2Field
    energy: float
    iterations: list[int]
    step_norms: list[float]
    gradient_norms: list[float]
    converged: bool


def _assemble(blocks: np.ndarray, dofs: np.ndarray, n: int) -> sp.csr_matrix:
    """The global `n × n` CSR matrix of element blocks `(n_el, k, k)` on `dofs` `(n_el, k)`."""
    k = dofs.shape[1]
    rows = np.repeat(dofs, k, axis=1).ravel()
    cols = np.tile(dofs, (1, k)).ravel()
    return sp.csr_matrix((blocks.ravel(), (rows, cols)), shape=(n, n))


def _absolute(blocks: jax.Array) -> jax.Array:
    """Each symmetric block with its eigenvalues replaced by their absolute values."""
    w, v = jnp.linalg.eigh(blocks)
    return jnp.einsum("eij,ej,ekj->eik", v, jnp.abs(w), v)


class _Energy:
    """The compiled element energy, gradient and Hessian of one mesh and density."""

    def __init__(self, field, density):
        elements, kinds, gradients, area = mesh_arrays(field)
        order = 2 if isinstance(field, P2Field) else 1
        _, weights = _rule(order)
        self.dofs = (2 * elements[:, :, None] + np.arange(2)).reshape(len(elements), -1)
        grads = jnp.asarray(gradients[kinds])  # (n_el, n_q, n_nodes, 2)
        w = jnp.asarray(weights * area)

        def element(u_e, g):  # u_e (n_nodes·2,), g (n_q, n_nodes, 2)
            F = jnp.eye(2) + jnp.einsum("na,qnb->qab", u_e.reshape(-1, 2), g)
            return jnp.sum(w * jax.vmap(density)(F))

        dofs = jnp.asarray(self.dofs)
        gradient, hessian = jax.vmap(jax.grad(element)), jax.vmap(jax.hessian(element))
        self.energy = jax.jit(lambda u: jnp.sum(jax.vmap(element)(u[dofs], grads)))
        self.gradient = jax.jit(lambda u: jnp.zeros_like(u).at[dofs].add(gradient(u[dofs], grads)))
        self.hessian = jax.jit(lambda u: hessian(u[dofs], grads))
        self.absolute_hessian = jax.jit(lambda u: _absolute(hessian(u[dofs], grads)))

    def step(self, u: np.ndarray, free: np.ndarray, g: np.ndarray, absolute: bool) -> Any:
        """`δ` solving `H δ = −g` on the `free` components (`|H|` blockwise if
        `absolute`), or `None` where the LU breaks down."""
        blocks = np.asarray((self.absolute_hessian if absolute else self.hessian)(jnp.asarray(u)))
        matrix = _assemble(blocks, self.dofs, u.size)[free][:, free].tocsc()
        try:
            # symmetric mode, no pivoting: the ordering of H + Hᵀ is kept (five
            # times faster than partial pivoting on these matrices)
            lu = spla.splu(
                matrix,
                permc_spec="MMD_AT_PLUS_A",
                diag_pivot_thresh=0.0,
                options={"SymmetricMode": True},
            )
        except RuntimeError:  # an exactly singular pivot of an indefinite H
            return None
        d = lu.solve(-g)
        return d if np.all(np.isfinite(d)) else None

    def decreases(self, u: np.ndarray, d: np.ndarray, slope: float, e0: float) -> bool:
        """The Armijo test of the step `d` (`slope = gᵀd`); a step whose predicted
        decrease is below round-off of `E` passes."""
        if -slope <= 1e-13 * max(abs(e0), 1.0):
            return True
        return float(self.energy(jnp.asarray(u + d))) <= e0 + 1e-4 * slope


def _iteration(problem: _Energy, u: np.ndarray, free: np.ndarray) -> tuple:
    """One iteration from `u`: `(new u, whether it was a whole Newton step,
    the step's max-norm, ‖g‖, E(u))`."""
    g = np.asarray(problem.gradient(jnp.asarray(u)))[free]
    e0 = float(problem.energy(jnp.asarray(u)))
    d = np.zeros_like(u)
    newton = problem.step(u, free, g, absolute=False)
    if newton is not None:
        d[free] = newton
        if g @ newton < 0 and problem.decreases(u, d, float(g @ newton), e0):
            return u + d, True, float(np.max(np.abs(newton))), float(np.linalg.norm(g)), e0
    d[free] = problem.step(u, free, g, absolute=True)
    slope = float(g @ d[free])
    for _ in range(40):
        if problem.decreases(u, d, slope, e0):
            break
        d, slope = d / 2, slope / 2
    return u + d, False, float(np.max(np.abs(d))), float(np.linalg.norm(g)), e0


def solve(
    field: Any,
    density: Callable[[jax.Array], jax.Array],
    held: np.ndarray,
    lift: np.ndarray,
    *,
    load_steps: int = 1,
    tol: float = 1e-10,
    max_iterations: int = 50,
    progress: Callable[[str], Any] | None = None,
) -> NewtonResult:
    """Minimises `E(u) = ∫ ψ(I + ∇u)` over the nodal values of `field`'s mesh
    with the components `held` at the values of `lift` (module docstring).

    **Arguments:**

    - `field`: a `P1Field` or `P2Field` (its mesh; its values are not used).
    - `density`: `ψ(F)`, a JAX function of a `(2, 2)` matrix to a scalar.
    - `held`: bool `(m_x, m_y, 2)`, the nodal components held (Dirichlet).
    - `lift`: `(m_x, m_y, 2)` displacement at full load; its `held`
      components are the prescribed values, the others the first guess.
    - `load_steps`: equal load increments (default 1).
    - `tol`: a load step has converged when a full Newton step's max-norm is
      below this (default 1e-10).
    - `max_iterations`: Newton iterations per load step at most (default 50).
    - `progress`: optional callable given one line per Newton iteration.

    **Returns:** a [`NewtonResult`][solvers.hyperelastic_fem.NewtonResult].
    """
    if not isinstance(field, P1Field | P2Field):
        raise ValueError(f"`field` must be a P1Field or P2Field, got {type(field).__name__}.")
    shape = field.values.shape
    held, lift = np.asarray(held, bool), np.asarray(lift, float)
    for name, value in (("held", held), ("lift", lift)):
        if value.shape != shape:
            raise ValueError(
                f"`{name}` must have the shape of `field.values` {shape}, got {value.shape}."
            )
    if not (isinstance(load_steps, int) and load_steps >= 1):
        raise ValueError(f"`load_steps` must be an int >= 1, got {load_steps!r}.")
    if not tol > 0:
        raise ValueError(f"`tol` must be > 0, got {tol!r}.")
    problem = _Energy(field, density)
    held, lift = held.ravel(), lift.ravel()
    free = np.flatnonzero(~held)
    u = np.zeros_like(lift)
    iterations, step_norms, gradient_norms, converged = [], [], [], True
    for step in range(1, load_steps + 1):
        u = lift / load_steps if step == 1 else u * step / (step - 1)
        u[held] = step / load_steps * lift[held]  # held exactly
        done = False
        for k in range(max_iterations):
            u, newton, size, g_norm, e0 = _iteration(problem, u, free)
            step_norms.append(size)
            gradient_norms.append(g_norm)
            if progress is not None:
                kind = "Newton" if newton else "|H|"
                progress(
                    f"load {step}/{load_steps} iteration {k + 1}: E = {e0:.10g}, "
                    f"|g| = {g_norm:.2e}, {kind} step {size:.2e}"
                )
            done = newton and size <= tol
            if done:
                break
        iterations.append(k + 1)
        converged = converged and done
    values = jnp.asarray(u.reshape(shape))
    solution = type(field)(values, field.lower, field.upper)
    energy = float(problem.energy(jnp.asarray(u)))
    return NewtonResult(solution, energy, iterations, step_norms, gradient_norms, converged)


def _direction(problem, u, free, g, *, projected: bool) -> np.ndarray:
    """`δ` solving `H δ = −g` on the free components (sparse LU)."""
    matrix = problem.matrix(u, projected)[free][:, free].tocsc()
    lu = spla.splu(
        matrix, permc_spec="MMD_AT_PLUS_A", diag_pivot_thresh=0.0, options={"SymmetricMode": True}
    )
    return lu.solve(-g)
