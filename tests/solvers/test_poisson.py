"""Voxel Poisson systems: matrix-free vs CSR, spectra, null spaces, convergence."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from solvers import poisson as P
from solvers.poisson import AIR, FLUID, SOLID


@pytest.fixture(scope="module", params=[(2, 24), (3, 8)], ids=["2d", "3d"])
def scene(request):
    dim, n = request.param
    return P.make_scene(n, dim=dim, seed=5, n_obstacles=3, free_surface=True)


def test_matrix_free_equals_csr(scene):
    matrix = P.assemble(scene)
    op = P.PoissonOperator(scene)
    rng = np.random.default_rng(0)
    xs = rng.standard_normal((3, *scene.shape))
    expected = np.stack([(matrix @ x.ravel()).reshape(scene.shape) for x in xs])
    got = jax.jit(jax.vmap(op))(jnp.asarray(xs))
    np.testing.assert_allclose(np.asarray(got), expected, atol=1e-12)
    np.testing.assert_allclose(
        np.asarray(P.apply_poisson(scene, jnp.asarray(xs[0]))), expected[0], atol=1e-12
    )
    got32 = op(jnp.asarray(xs[1], jnp.float32))
    assert got32.dtype == jnp.float32
    np.testing.assert_allclose(np.asarray(got32), expected[1], atol=1e-5)
    # Non-fluid rows and columns are empty, and the reduced matrix is the fluid block.
    fluid = (scene == FLUID).ravel()
    assert matrix[~fluid].nnz == 0 and matrix[:, ~fluid].nnz == 0
    reduced = P.assemble(scene, reduced=True)
    assert (abs(reduced - matrix[fluid][:, fluid]) > 0).nnz == 0


def test_symmetric_and_semidefinite(scene):
    matrix = P.assemble(scene, reduced=True)
    assert (abs(matrix - matrix.T) > 0).nnz == 0
    if matrix.shape[0] <= 1200:
        eig = np.linalg.eigvalsh(matrix.toarray())
        assert eig.min() > -1e-12
    diag = matrix.diagonal()
    np.testing.assert_array_equal(diag, P.neighbour_counts(scene)[scene == FLUID])


def test_closed_box_null_space_is_constants():
    labels = np.full((8, 8), FLUID, np.int8)
    dense = P.assemble(labels, reduced=True).toarray()
    eig, vec = np.linalg.eigh(dense)
    assert abs(eig[0]) < 1e-12 and eig[1] > 1e-2
    np.testing.assert_allclose(np.abs(vec[:, 0]), 1 / 8, atol=1e-12)
    # Neumann spectrum: sums of 4 sin²(πk/(2n)), k = 0..n−1.
    lam = 4 * np.sin(np.pi * np.arange(8) / 16) ** 2
    np.testing.assert_allclose(eig, np.sort((lam[:, None] + lam[None, :]).ravel()), atol=1e-12)
    # A solid wall splits the box in two closed components: two constant null vectors.
    labels[4, :] = SOLID
    dense = P.assemble(labels, reduced=True).toarray()
    eig, vec = np.linalg.eigh(dense)
    assert np.sum(np.abs(eig) < 1e-12) == 2 and eig[2] > 1e-2
    comps = P.closed_components(labels)
    assert len(comps) == 2
    basis = np.stack([c[labels == FLUID] for c in comps], 1).astype(float)
    proj = basis @ np.linalg.lstsq(basis, vec[:, :2], rcond=None)[0]
    np.testing.assert_allclose(proj, vec[:, :2], atol=1e-12)


def test_air_border_gives_dirichlet_spectrum():
    n = 6
    labels = np.full((n + 2, n + 2, n + 2), AIR, np.int8)
    labels[1:-1, 1:-1, 1:-1] = FLUID
    eig = np.linalg.eigvalsh(P.assemble(labels, reduced=True).toarray())
    lam = 4 * np.sin(np.pi * np.arange(1, n + 1) / (2 * (n + 1))) ** 2
    expected = np.sort((lam[:, None, None] + lam[None, :, None] + lam[None, None, :]).ravel())
    np.testing.assert_allclose(eig, expected, atol=1e-12)
    assert P.closed_components(labels) == []


def _manufactured_error(n, dim):
    # Fluid cells 0..n-1 per axis, one AIR layer on top (p = 0 at its centres,
    # Y = (n + 1/2) h), Neumann walls elsewhere: p = Π cos(π x_a) · cos(π y / (2Y)).
    h = 1 / n
    shape = (n,) * (dim - 1) + (n + 1,)
    labels = np.full(shape, FLUID, np.int8)
    labels[..., -1] = AIR
    centres = [(np.arange(m) + 0.5) * h for m in shape]
    coords = np.meshgrid(*centres, indexing="ij")
    big_y = (n + 0.5) * h
    p = np.cos(np.pi * coords[-1] / (2 * big_y))
    for a in range(dim - 1):
        p = p * np.cos(np.pi * coords[a])
    f = np.pi**2 * ((dim - 1) + 1 / (4 * big_y**2)) * p
    b = np.where(labels == FLUID, h**2 * f, 0)
    x = P.solve(labels, b)
    return np.abs(x - p)[labels == FLUID].max()


@pytest.mark.parametrize("dim,sizes", [(2, (16, 32, 64)), (3, (8, 16))])
def test_manufactured_solution_second_order(dim, sizes):
    errors = [_manufactured_error(n, dim) for n in sizes]
    rates = np.log2(np.array(errors[:-1]) / np.array(errors[1:]))
    assert np.all((rates > 1.8) & (rates < 2.3)), (rates, errors)


def test_rhs_in_range_and_solve():
    labels = P.make_scene(16, dim=2, seed=3, n_obstacles=2, free_surface=False)
    assert not np.any(labels == AIR) and len(P.closed_components(labels)) >= 1
    matrix = P.assemble(labels)
    for kind in ("noise", "smooth", "range"):
        b = P.random_rhs(labels, seed=1, kind=kind)
        assert abs(np.linalg.norm(b) - 1) < 1e-12
        assert np.all(b[labels != FLUID] == 0)
        for comp in P.closed_components(labels):
            assert abs(b[comp].sum()) < 1e-12
        x = P.solve(labels, b)
        np.testing.assert_allclose((matrix @ x.ravel()).reshape(labels.shape), b, atol=1e-10)
    with pytest.raises(ValueError, match="range"):
        P.solve(labels, np.where(labels == FLUID, 1.0, 0.0))


def reference_divergence(labels, velocity):
    """`div u` cell by cell: for each fluid cell and axis, the outflow minus
    the inflow through its two faces, a face's velocity the mean of the cells
    it joins, zero if either is SOLID or the face is the grid's boundary."""
    div = np.zeros(labels.shape)
    for cell in np.ndindex(labels.shape):
        if labels[cell] != FLUID:
            continue
        for axis in range(labels.ndim):
            for side in (-1, 1):
                other = list(cell)
                other[axis] += side
                other = tuple(other)
                if not 0 <= other[axis] < labels.shape[axis] or labels[other] == SOLID:
                    continue
                face = 0.5 * (velocity[axis][cell] + velocity[axis][other])
                div[cell] += side * face
    return div


@pytest.mark.parametrize("free_surface", [False, True])
def test_divergence_right_hand_side(free_surface):
    labels = P.make_scene(12, dim=2, seed=7, n_obstacles=2, free_surface=free_surface)
    velocity = np.random.default_rng(0).standard_normal((2, 12, 12))
    div = P.velocity_divergence(labels, velocity)
    np.testing.assert_allclose(div, reference_divergence(labels, velocity), rtol=0, atol=1e-13)
    # no flux through walls: a closed component's divergence sums to zero
    # (measured ~1e-15), so −div u is already consistent
    for component in P.closed_components(labels):
        assert abs(div[component].sum()) < 1e-12 * np.abs(div).sum()
    assert bool(P.closed_components(labels)) == (not free_surface)
    b = P.random_rhs(labels, seed=3, kind="divergence")
    assert abs(np.linalg.norm(b) - 1) < 1e-12 and np.all(b[labels != FLUID] == 0)
    # the uniform flow u = (1, 0) in an open 3-D box: the divergence is zero
    # inside, +1 in the cells by the wall it leaves and −1 by the one it enters
    # (no flux through a wall: the face inside carries 1 out, nothing comes in)
    box = np.zeros((4, 4, 4), np.int8)
    flow = np.zeros((3, 4, 4, 4))
    flow[0] = 1.0
    div = P.velocity_divergence(box, flow)
    np.testing.assert_allclose(div[1:-1], 0, atol=0)
    np.testing.assert_allclose(div[0], 1.0, atol=0)
    np.testing.assert_allclose(div[-1], -1.0, atol=0)
    with pytest.raises(ValueError, match="velocity must have shape"):
        P.velocity_divergence(box, flow[:2])


def test_scene_generator():
    a = P.make_scene(20, dim=3, seed=(1, 2), free_surface=True)
    b = P.make_scene(20, dim=3, seed=(1, 2), free_surface=True)
    c = P.make_scene(20, dim=3, seed=(1, 3), free_surface=True)
    np.testing.assert_array_equal(a, b)
    assert not np.array_equal(a, c)
    assert set(np.unique(a)) <= {FLUID, SOLID, AIR} and np.any(a == AIR) and np.any(a == SOLID)
    # Air lies above the water: the bottom layer has none.
    assert not np.any(a[..., 0] == AIR)
    # No fluid cell is enclosed by solid faces on every side.
    assert np.all(P.neighbour_counts(a)[a == FLUID] > 0)
    lonely = np.full((5, 5), SOLID, np.int8)
    lonely[2, 2] = FLUID
    lonely[0, 0] = FLUID
    lonely[0, 1] = FLUID
    fixed = P.remove_isolated_fluid(lonely)
    assert fixed[2, 2] == SOLID and fixed[0, 0] == FLUID
    d = P.make_dataset(2, 12, seed=0, dim=2)
    assert d["inputs"].shape == d["outputs"].shape == d["labels"].shape == (2, 12, 12)
    e = P.make_dataset(1, 12, seed=0, dim=2, start=1)
    np.testing.assert_array_equal(e["labels"][0], d["labels"][1])
    np.testing.assert_array_equal(e["inputs"][0], d["inputs"][1])


def test_bad_input():
    with pytest.raises(ValueError, match="no FLUID"):
        P.assemble(np.full((4, 4), SOLID))
    with pytest.raises(ValueError, match="no FLUID"):
        P.make_scene(8, seed=0, n_obstacles=1, shapes=("box",), size_range=(0.9, 0.95))
    with pytest.raises(ValueError, match="dim"):
        P.make_scene(8, dim=4)
    with pytest.raises(ValueError, match="only hold"):
        P.assemble(np.full((4, 4), 7))
    with pytest.raises(ValueError, match="2-D or 3-D"):
        P.assemble(np.zeros(5, int))
    with pytest.raises(ValueError, match="grid shape"):
        P.PoissonOperator(np.zeros((4, 4), int))(jnp.zeros((5, 5)))
    with pytest.raises(ValueError, match="kind"):
        P.random_rhs(np.zeros((4, 4), int), seed=0, kind="bogus")


def test_direct_solver_reuses_one_factorisation_for_many_rhs():
    # an empty closed 8³ box: singular (constants), the training matrix of the 3-D DCDM
    labels = P.make_scene(8, dim=3, n_obstacles=0, free_surface=False)
    assert np.all(labels == FLUID)
    solve = P.direct_solver(labels)
    A = P.assemble(labels).toarray()
    pinv = np.linalg.pinv(A)  # the minimum-norm solution, independently
    for seed in range(3):
        b = P.random_rhs(labels, seed=seed, kind="noise")
        x = solve(b)
        # measured: ~1e-14 of the largest entry
        np.testing.assert_allclose(
            x.ravel(), pinv @ b.ravel(), rtol=0, atol=1e-11 * np.abs(x).max()
        )
    with pytest.raises(ValueError, match="range"):
        solve(np.ones(labels.shape))
