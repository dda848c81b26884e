"""The device-side AMG V-cycle against pyamg's own V-cycle of the same hierarchy
and smoother, and its PCG against pyamg's PCG, on the DCDM scenes."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import scipy.sparse as sp

from sciml.dcdm import DCDM, DeviceAMG, solve
from solvers.poisson import PoissonOperator, assemble, make_scene, random_rhs


# the DCDM scenes (3 obstacles and a free surface, as the dcdm_poisson configs),
# held-out seed 101, at test sizes; and a closed box (singular A, pinv at the coarsest level)
SCENES = {
    "2d": dict(n=32, dim=2, free_surface=True),
    "2d-closed": dict(n=32, dim=2, free_surface=False),
    "3d": dict(n=16, dim=3, free_surface=True),
}


def scene(name):
    spec = SCENES[name]
    return make_scene(
        spec["n"], dim=spec["dim"], seed=101, n_obstacles=3, free_surface=spec["free_surface"]
    )


def active_system(labels):
    matrix = assemble(labels)
    active = np.flatnonzero(matrix.diagonal() != 0)
    return matrix, active, matrix[active][:, active].tocsr()


@pytest.mark.parametrize("name", list(SCENES))
def test_v_cycle_equals_pyamg(name):
    labels = scene(name)
    matrix, active, A = active_system(labels)
    amg = DeviceAMG()
    ml = amg.hierarchy(A)
    assert len(ml.levels) >= 3  # a real multilevel cycle, not just the coarse solve
    reference = ml.aspreconditioner(cycle="V")
    precond = amg.build(matrix, labels.shape)
    assert precond.name == "AMG-PCG (device)" and precond.setup_seconds > 0
    apply = jax.jit(precond)  # one compilation, not one per operation
    rng = np.random.default_rng(0)
    for _ in range(2):
        r = rng.standard_normal(labels.shape)
        out = np.asarray(apply(jnp.asarray(r)))
        expected = reference.matvec(r.reshape(-1)[active])
        # measured max error / max |expected|: 4e-16 (2d), 6e-16 (closed), 5e-16 (3d);
        # the cycle without its post-smoother is off by 0.057 (12.1 of 213)
        scale = np.abs(expected).max()
        np.testing.assert_allclose(out.reshape(-1)[active], expected, rtol=0, atol=1e-13 * scale)
        assert np.all(np.delete(out.reshape(-1), active) == 0)  # empty rows map to zero


def test_v_cycle_in_float32():
    labels = scene("2d")
    matrix, active, A = active_system(labels)
    r = np.random.default_rng(1).standard_normal(labels.shape)
    expected = DeviceAMG().hierarchy(A).aspreconditioner().matvec(r.reshape(-1)[active])
    out = jax.jit(DeviceAMG().build(matrix, labels.shape))(jnp.asarray(r, jnp.float32))
    assert out.dtype == jnp.float32
    # measured max error / max |expected|: 9.5e-8 (float32 round-off); 0.053
    # without the post-smoother
    error = np.abs(np.asarray(out, np.float64).reshape(-1)[active] - expected).max()
    assert error <= 2e-6 * np.abs(expected).max()


@pytest.mark.parametrize("name", ["2d", "3d"])
def test_pcg_iterations_match_pyamg(name):
    import pyamg

    labels = scene(name)
    matrix, active, A = active_system(labels)
    b = random_rhs(labels, seed=101, kind="smooth")
    amg = DeviceAMG()
    residuals = []
    x, info = pyamg.krylov.cg(
        A,
        b.reshape(-1)[active],
        tol=1e-8,
        M=amg.hierarchy(A).aspreconditioner(),
        maxiter=200,
        residuals=residuals,
    )
    assert info == 0
    expected = len(residuals) - 1
    sol = solve(
        PoissonOperator(labels),
        jnp.asarray(b),
        amg.build(matrix, labels.shape),
        DCDM(rtol=1e-8, max_steps=200, n_orthogonal=1),
    )
    steps = int(sol.stats["num_steps"])
    # measured: the same count (15 at 32², 17 at 16³); without the post-smoother
    # 35 and 31
    assert abs(steps - expected) <= 1, (steps, expected)
    np.testing.assert_allclose(
        np.asarray(sol.value).reshape(-1)[active], x, rtol=0, atol=1e-6 * np.abs(x).max()
    )


def test_bad_input_is_refused():
    labels = scene("2d")
    matrix = assemble(labels)
    with pytest.raises(ValueError, match="`matrix` must be square"):
        DeviceAMG().build(sp.random(16, 12, density=0.3, format="csr"), (4, 4))
    nonsymmetric = matrix + sp.csr_matrix(([0.5], ([0], [1])), shape=matrix.shape)
    with pytest.raises(ValueError, match="`matrix` must be symmetric"):
        DeviceAMG().build(nonsymmetric, labels.shape)
    with pytest.raises(TypeError, match="real floating dtype"):
        DeviceAMG().build(matrix.astype(np.complex128), labels.shape)
    with pytest.raises(TypeError, match="real floating dtype"):
        DeviceAMG().build(sp.eye(16, dtype=np.int64, format="csr"), (4, 4))
    with pytest.raises(ValueError, match="DeviceAMG.build needs the assembled"):
        DeviceAMG().build(None, labels.shape)
    with pytest.raises(ValueError, match="one row per cell"):
        DeviceAMG().build(sp.eye(10, format="csr"), (4, 4))
    for bad in (0, 1.5, float("nan")):
        with pytest.raises(ValueError, match="`omega` must be a real number in"):
            DeviceAMG(omega=bad)
    with pytest.raises(ValueError, match="`sweeps` must be a positive integer"):
        DeviceAMG(sweeps=0)
