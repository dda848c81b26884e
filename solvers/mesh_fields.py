r"""Lagrange finite-element fields on a structured triangle mesh of a rectangle.

The mesh baselines of the INSR elasticity comparison (Chen et al., ICML 2023):
a displacement `ℝ² → ℝ²` stored as nodal values, the same memory as a neural
field. `nx × ny` rectangular cells, each split along its diagonal from
`(i+1, j)` to `(i, j+1)`:

- [`P1Field`][solvers.mesh_fields.P1Field]: piecewise linear, the vertex values
  `(nx+1, ny+1, 2)` (exact for affine fields, error `O(h²)`);
- [`P2Field`][solvers.mesh_fields.P2Field]: piecewise quadratic, the vertex and
  edge-midpoint values `(2nx+1, 2ny+1, 2)` (exact for quadratic fields, `O(h³)`).

Each is an Equinox module whose only array is `values`, called on one point
`(2,) → (2,)`, so an INSR integrator steps it as it steps a network.
[`p1_field`][solvers.mesh_fields.p1_field] / [`p2_field`][solvers.mesh_fields.p2_field]
size a zero field to a budget of unknowns; [`interpolate`][solvers.mesh_fields.interpolate]
sets the nodal values from a function; [`fix_nodes`][solvers.mesh_fields.fix_nodes]
imposes homogeneous clamps and rollers exactly, by holding the nodal components
on their faces at zero (the finite-element way, no penalty);
[`quadrature_points`][solvers.mesh_fields.quadrature_points] gives the
element-wise Gauss points on which a mean is the integral over the body.
"""

from __future__ import annotations

import math

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np


class P1Field(eqx.Module):
    """Piecewise-linear displacement on a structured triangle mesh of the
    rectangle (`nx × ny` cells, each split along its diagonal); the nodal
    values `(nx+1, ny+1, 2)` are the unknowns."""

    values: jax.Array
    lower: tuple = eqx.field(static=True)
    upper: tuple = eqx.field(static=True)

    def __call__(self, x):
        nx, ny = self.values.shape[0] - 1, self.values.shape[1] - 1
        lo, hi = jnp.asarray(self.lower, x.dtype), jnp.asarray(self.upper, x.dtype)
        g = (x - lo) / (hi - lo) * jnp.array([nx, ny], x.dtype)
        i = jnp.clip(jnp.floor(g[0]).astype(int), 0, nx - 1)
        j = jnp.clip(jnp.floor(g[1]).astype(int), 0, ny - 1)
        s, t = g[0] - i, g[1] - j
        v00, v10 = self.values[i, j], self.values[i + 1, j]
        v01, v11 = self.values[i, j + 1], self.values[i + 1, j + 1]
        lower_tri = v00 + s * (v10 - v00) + t * (v01 - v00)
        upper_tri = v11 + (1 - s) * (v01 - v11) + (1 - t) * (v10 - v11)
        return jnp.where(s + t <= 1, lower_tri, upper_tri)


class P2Field(eqx.Module):
    """Piecewise-quadratic (P2 Lagrange) displacement on the mesh of
    `P1Field`: `nx × ny` cells split along the diagonal from `(i+1, j)` to
    `(i, j+1)`. The unknowns are the values at the vertices and edge midpoints,
    together the nodes of the doubled grid `(2nx+1, 2ny+1, 2)` (a cell's
    centre is the midpoint of its diagonal). On a triangle with barycentric
    coordinates `λ`, vertex `a` weighs `λ_a(2λ_a − 1)` and the midpoint of
    edge `ab` weighs `4λ_aλ_b`."""

    values: jax.Array
    lower: tuple = eqx.field(static=True)
    upper: tuple = eqx.field(static=True)

    def __call__(self, x):
        nx, ny = (self.values.shape[0] - 1) // 2, (self.values.shape[1] - 1) // 2
        lo, hi = jnp.asarray(self.lower, x.dtype), jnp.asarray(self.upper, x.dtype)
        g = (x - lo) / (hi - lo) * jnp.array([nx, ny], x.dtype)
        i = jnp.clip(jnp.floor(g[0]).astype(int), 0, nx - 1)
        j = jnp.clip(jnp.floor(g[1]).astype(int), 0, ny - 1)
        s, t = g[0] - i, g[1] - j

        def v(a, b):  # the node at (a, b) of the cell, in half-cell units
            return self.values[2 * i + a, 2 * j + b]

        def quadratic(la, lb, lc, va, vb, vc, vab, vac, vbc):
            vertices = la * (2 * la - 1) * va + lb * (2 * lb - 1) * vb + lc * (2 * lc - 1) * vc
            return vertices + 4 * (la * lb * vab + la * lc * vac + lb * lc * vbc)

        # lower triangle (0,0), (1,0), (0,1); upper triangle (1,1), (0,1), (1,0)
        lower_tri = quadratic(1 - s - t, s, t, v(0, 0), v(2, 0), v(0, 2), v(1, 0), v(0, 1), v(1, 1))
        upper_tri = quadratic(
            s + t - 1, 1 - s, 1 - t, v(2, 2), v(0, 2), v(2, 0), v(1, 2), v(2, 1), v(1, 1)
        )
        return jnp.where(s + t <= 1, lower_tri, upper_tri)


def p1_field(problem, n_values: int) -> P1Field:
    """A zero P1 field on `problem.lower`..`problem.upper` (any object with
    those corners) with about `n_values` nodal unknowns, cells near-square."""
    width, height = (u - lo for lo, u in zip(problem.lower, problem.upper))
    nodes = max(n_values // 2, 4)
    ny = max(1, round(math.sqrt(nodes * height / width)) - 1)
    nx = max(1, nodes // (ny + 1) - 1)
    return P1Field(jnp.zeros((nx + 1, ny + 1, 2)), problem.lower, problem.upper)


def p2_field(problem, n_values: int) -> P2Field:
    """A zero P2 field with about `n_values` nodal unknowns (vertices and edge
    midpoints), cells near-square."""
    width, height = (u - lo for lo, u in zip(problem.lower, problem.upper))
    nodes = max(n_values // 2, 9)
    ny = max(1, round((math.sqrt(nodes * height / width) - 1) / 2))
    nx = max(1, (nodes // (2 * ny + 1) - 1) // 2)
    return P2Field(jnp.zeros((2 * nx + 1, 2 * ny + 1, 2)), problem.lower, problem.upper)


def interpolate(mesh, function):
    """`mesh` with its nodal values set to `function` (one point `(2,) → (2,)`)."""
    shape = mesh.values.shape[:2]
    axes = [np.linspace(lo, u, n) for lo, u, n in zip(mesh.lower, mesh.upper, shape)]
    nodes = jnp.asarray(np.stack(np.meshgrid(*axes, indexing="ij"), -1))
    return eqx.tree_at(lambda m: m.values, mesh, jax.vmap(jax.vmap(function))(nodes))


class FixedNodes(eqx.Module):
    """A P1 / P2 field whose nodal components at the flat indices `held` (of
    `mesh.values`) are held at zero. `held` is static, so the only weights are
    `mesh.values` (stacked fields of `insr.integrate` keep one `held`); the
    held values get no gradient."""

    mesh: P1Field | P2Field
    held: tuple[int, ...] = eqx.field(static=True)

    def __call__(self, x):
        values = self.mesh.values
        flat = values.reshape(-1).at[jnp.asarray(self.held, int)].set(0.0)
        return eqx.tree_at(lambda m: m.values, self.mesh, flat.reshape(values.shape))(x)


def fix_nodes(mesh, constraints) -> FixedNodes:
    """`mesh` with the zero-displacement `constraints` (`sciml.insr`'s `Clamp`
    and `Roller`: a `face`, a `displacement` and a `residual`, of one normal
    component for a roller) imposed on its face nodes exactly."""
    free = np.ones(mesh.values.shape, bool)
    last = {"left": 0, "right": -1, "bottom": 0, "top": -1}
    for c in constraints:
        face = getattr(c, "face", None)
        if face not in last or np.any(np.asarray(c.displacement) != 0):
            raise ValueError(f"`constraints` must be zero clamps or rollers on a face, got {c!r}.")
        axis = 0 if face in ("left", "right") else 1
        # a roller's residual is its normal component alone, a clamp's both
        components = [axis] if c.residual(jnp.zeros(2), 1.0).size == 1 else [0, 1]
        nodes = (last[face], slice(None)) if axis == 0 else (slice(None), last[face])
        for k in components:
            free[(*nodes, k)] = False
    return FixedNodes(mesh, tuple(int(i) for i in np.flatnonzero(~free)))


# the degree-2 Gauss rule of a triangle: three points of equal weight at the
# barycentric coordinates (2/3, 1/6, 1/6) and its permutations
_GAUSS3 = np.array([[2 / 3, 1 / 6, 1 / 6], [1 / 6, 2 / 3, 1 / 6], [1 / 6, 1 / 6, 2 / 3]])


def _reference_points(subdivisions: int) -> np.ndarray:
    """`(3·k², 2)` points `(s, t)` in the reference triangle `s, t ≥ 0, s + t ≤ 1`:
    the three-point rule on each of its `k²` congruent sub-triangles."""
    k = subdivisions
    points = []
    for a in range(k):
        for b in range(k - a):
            corners = [((a, b), (a + 1, b), (a, b + 1))]
            if a + b < k - 1:  # the inverted sub-triangle above this one
                corners.append(((a + 1, b + 1), (a, b + 1), (a + 1, b)))
            points += [_GAUSS3 @ (np.array(c, float) / k) for c in corners]
    return np.concatenate(points)


def quadrature_points(mesh, subdivisions: int = 1) -> jax.Array:
    """The Gauss points of every triangle of `mesh`'s structured mesh
    (a `P1Field`, `P2Field` or `FixedNodes`), `(2·nx·ny·3·k², 2)`.

    The degree-2 rule (three points of equal weight) on each of
    `k = subdivisions` ² congruent sub-triangles of every element. All the
    mesh's triangles have the same area, so the plain **mean** of a function
    over these points is its integral over the rectangle divided by the
    area: exact for piecewise quadratics on the mesh (a P1 field's mass and
    strain energies, a P2 field's strain energy in the small-strain limit),
    and for `k > 1` a finer composite rule. Random or grid points are not a
    quadrature of a mesh field: its gradient jumps across element edges, and
    a solve on them lowers the energy where the points are sparse (measured:
    the P2 column step on a 4,000-point grid gained 2 % energy where implicit
    Euler loses 4 %; on these 600 points it loses 3.80 %, implicit Euler's
    value to four digits).
    """
    if not isinstance(subdivisions, int) or isinstance(subdivisions, bool) or subdivisions < 1:
        raise ValueError(f"`subdivisions` must be an int >= 1, got {subdivisions!r}.")
    inner = mesh.mesh if isinstance(mesh, FixedNodes) else mesh
    if isinstance(inner, P2Field):
        nx, ny = (inner.values.shape[0] - 1) // 2, (inner.values.shape[1] - 1) // 2
    elif isinstance(inner, P1Field):
        nx, ny = inner.values.shape[0] - 1, inner.values.shape[1] - 1
    else:
        raise ValueError(f"`mesh` must be a P1Field, P2Field or FixedNodes, got {type(mesh)}.")
    lower_tri = _reference_points(subdivisions)
    # the upper triangle (1,1), (0,1), (1,0) is the lower one reflected through the cell centre
    in_cell = np.concatenate([lower_tri, 1.0 - lower_tri])
    i, j = np.meshgrid(np.arange(nx), np.arange(ny), indexing="ij")
    cells = np.stack([i.ravel(), j.ravel()], -1).astype(float)
    lo, hi = np.asarray(inner.lower, float), np.asarray(inner.upper, float)
    size = (hi - lo) / np.array([nx, ny])
    points = lo + (cells[:, None, :] + in_cell[None]) * size
    return jnp.asarray(points.reshape(-1, 2))
