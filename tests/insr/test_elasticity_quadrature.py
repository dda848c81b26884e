"""`Elasticity2D.grid_interior`: the fixed quadrature grid of cell midpoints.

The mean over its points stands for the integral over the body divided by its
area (the energies the step solvers minimise, and the mesh comparisons in the
docs), so it is checked as a quadrature rule: the points' geometry, exactness
on affine (and bilinear) functions, and second-order convergence against a
closed-form integral.
"""

import math

import jax.numpy as jnp
import numpy as np
import pytest

from sciml import insr


# the default square, and the column scene's 4 : 1 strip; counts that fill a grid
# exactly and one that does not (50 -> 7 × 7)
DOMAINS = [
    ((-1.0, -1.0), (1.0, 1.0), 64),
    ((-1.0, -1.0), (1.0, 1.0), 50),
    ((-1.0, -0.25), (1.0, 0.25), 100),
]


def grid(lower, upper, n):
    problem = insr.Elasticity2D(lower, upper)
    return np.asarray(problem.grid_interior(n, jnp.float64))


@pytest.mark.parametrize(("lower", "upper", "n"), DOMAINS)
def test_points_are_cell_midpoints_half_a_cell_from_each_face(lower, upper, n):
    points = grid(lower, upper, n)
    lower, upper = np.asarray(lower), np.asarray(upper)
    centres = [np.unique(points[:, axis]) for axis in (0, 1)]
    counts = [len(c) for c in centres]
    # a full tensor grid of at most n points, cells about square
    assert len(points) == counts[0] * counts[1] <= n
    h = (upper - lower) / counts
    assert max(h) / min(h) < 1.5
    for axis in (0, 1):
        np.testing.assert_allclose(np.diff(centres[axis]), h[axis], rtol=1e-13)
    # strictly inside (left endpoints put a row on the faces x = lower), and the
    # nearest point to each face lies half a cell from it
    assert np.all(points > lower) and np.all(points < upper)
    np.testing.assert_allclose(points.min(0) - lower, h / 2, rtol=1e-13)
    np.testing.assert_allclose(upper - points.max(0), h / 2, rtol=1e-13)


@pytest.mark.parametrize(("lower", "upper", "n"), DOMAINS)
def test_centroid_of_the_points_is_the_centroid_of_the_domain(lower, upper, n):
    points = grid(lower, upper, n)
    # measured ≤ 3e-16; left endpoints instead of midpoints: 0.05 to 0.14 (h/2)
    centroid = (np.asarray(lower) + np.asarray(upper)) / 2
    np.testing.assert_allclose(points.mean(0), centroid, rtol=0, atol=1e-14)


@pytest.mark.parametrize(("lower", "upper", "n"), DOMAINS)
def test_mean_of_a_bilinear_function_is_its_integral_over_the_area(lower, upper, n):
    # the midpoint rule on a tensor grid integrates c0 + c1 x + c2 y + c3 xy exactly;
    # over the rectangle the mean of xy is the product of the means of x and y
    x, y = grid(lower, upper, n).T
    c0, c1, c2, c3 = 0.3, 1.7, -0.9, 0.6
    mean = np.mean(c0 + c1 * x + c2 * y + c3 * x * y)
    xc, yc = (lower[0] + upper[0]) / 2, (lower[1] + upper[1]) / 2
    # measured difference ≤ 2e-16; left endpoints instead of midpoints: 0.04 to 0.10
    np.testing.assert_allclose(mean, c0 + c1 * xc + c2 * yc + c3 * xc * yc, rtol=0, atol=1e-14)


def test_midpoint_quadrature_converges_at_second_order():
    # f = exp(x) cos(2y) on the column's strip [-1, 1] × [-0.25, 0.25] (cells of
    # side 2/16, 2/32, 2/64), against ∫f = (e^{x1} − e^{x0})(sin 2y1 − sin 2y0)/2
    lower, upper = (-1.0, -0.25), (1.0, 0.25)
    area = (upper[0] - lower[0]) * (upper[1] - lower[1])
    exact = (
        (math.exp(upper[0]) - math.exp(lower[0]))
        * (math.sin(2 * upper[1]) - math.sin(2 * lower[1]))
        / 2
        / area
    )
    errors = []
    for n in (64, 256, 1024):
        x, y = grid(lower, upper, n).T
        errors.append(abs(np.mean(np.exp(x) * np.cos(2 * y)) - exact))
    orders = np.log2(np.asarray(errors[:-1]) / np.asarray(errors[1:]))
    # measured orders 2.00, 2.00; left endpoints instead of midpoints: 1.04, 1.02
    assert np.all((orders > 1.8) & (orders < 2.2)), orders
