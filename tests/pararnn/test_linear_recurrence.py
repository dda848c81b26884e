"""Linear recurrences (every structure, both directions, every method) against Python loops."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from sciml.pararnn import default_chunk_size, linear_recurrence


def dense_steps(A):
    """The step matrices as dense `(T, n, n)` numpy arrays, built entry by entry."""
    A = np.asarray(A)
    T = A.shape[0]
    if A.ndim == 2:  # diagonal
        return np.stack([np.diag(A[t]) for t in range(T)])
    if A.ndim == 3:  # dense
        return A
    K, m = A.shape[1], A.shape[3]
    D = np.zeros((T, K * m, K * m))
    for t in range(T):
        for i in range(K):
            for j in range(K):
                for p in range(m):
                    D[t, i * m + p, j * m + p] = A[t, i, j, p]
    return D


def loop_forward(D, b, y0):
    y, out = y0, []
    for t in range(len(b)):
        y = D[t] @ y + b[t]
        out.append(y)
    return np.array(out)


def loop_reverse(D, b):
    """Solves the transposed system: y_t = D_{t+1}^T y_{t+1} + b_t, y_T = b_T."""
    T = len(b)
    out = np.zeros_like(b)
    y = np.zeros(b.shape[1])
    for t in reversed(range(T)):
        y = b[t] + (D[t + 1].T @ y if t + 1 < T else 0)
        out[t] = y
    return out


SHAPES = {
    "diagonal": lambda T, n: (T, n),
    "block(2)": lambda T, n: (T, 2, 2, n // 2),
    "block(3)": lambda T, n: (T, 3, 3, n // 3),
    "dense": lambda T, n: (T, n, n),
}


def random_system(structure, T, n, seed=0):
    rng = np.random.default_rng(seed)
    shape = SHAPES[structure](T, n)
    # entries up to 0.95 in size: some products grow, most decay
    scale = 0.95 if structure == "diagonal" else 0.95 / np.sqrt(n)
    A = rng.uniform(-scale, scale, shape)
    return A, rng.normal(size=(T, n)), rng.normal(size=n)


@pytest.mark.parametrize("structure", list(SHAPES))
def test_forward_and_reverse_match_python_loops(structure):
    T, n = 45, 6
    A, b, y0 = random_system(structure, T, n)
    D = dense_steps(A)

    @jax.jit
    def solve_all(A, b, y0):
        out = {}
        for method, chunk in [("scan", None), ("chunked", 7), ("sequential", None)]:
            kw = dict(method=method, chunk_size=chunk)
            out[method] = (
                linear_recurrence(A, b, y0, **kw),
                linear_recurrence(A, b, reverse=True, **kw),
            )
        return out

    forward_ref, reverse_ref = loop_forward(D, b, y0), loop_reverse(D, b)
    for method, (forward, reverse) in solve_all(A, b, y0).items():
        np.testing.assert_allclose(forward, forward_ref, rtol=1e-12, atol=1e-12, err_msg=method)
        np.testing.assert_allclose(reverse, reverse_ref, rtol=1e-12, atol=1e-12, err_msg=method)


def test_chunk_sizes_including_ragged_and_longer_than_sequence():
    A, b, y0 = random_system("block(2)", 45, 4, seed=1)
    ref = loop_forward(dense_steps(A), b, y0)
    chunks = (4, 45, 64)
    outs = jax.jit(
        lambda A, b, y0: [
            linear_recurrence(A, b, y0, method="chunked", chunk_size=c) for c in chunks
        ]
    )(A, b, y0)
    for chunk, out in zip(chunks, outs):
        np.testing.assert_allclose(out, ref, rtol=1e-12, atol=1e-12, err_msg=str(chunk))


def test_float32_matches_float64_reference():
    A, b, y0 = random_system("diagonal", 300, 5, seed=2)
    ref = loop_forward(dense_steps(A), b, y0)
    outs = jax.jit(
        lambda A, b, y0: [
            linear_recurrence(A, b, y0, method=m, chunk_size=16)
            for m in ("scan", "chunked", "sequential")
        ]
    )(jnp.float32(A), jnp.float32(b), jnp.float32(y0))
    for out in outs:
        assert out.dtype == jnp.float32
        np.testing.assert_allclose(out, ref, rtol=2e-5, atol=2e-5)


def test_inside_lax_scan_and_vmap():
    # jax-ml/jax#21628: a matrix associative_scan inside lax.scan once gave wrong results.
    A, b, y0 = random_system("dense", 20, 3, seed=3)

    @jax.jit
    def run(A, b, y0):
        def body(carry, _):
            return carry, linear_recurrence(A, b, y0, method="scan")

        in_scan = jax.lax.scan(body, 0.0, None, length=2)[1][1]
        batched = jax.vmap(lambda bb: linear_recurrence(A, bb, y0, method="chunked", chunk_size=6))(
            jnp.stack([b, 2 * b])
        )
        return in_scan, batched[1]

    in_scan, batched = run(A, b, y0)
    D = dense_steps(A)
    np.testing.assert_allclose(in_scan, loop_forward(D, b, y0), rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(batched, loop_forward(D, 2 * b, y0), rtol=1e-12, atol=1e-12)


def test_scalar_recurrence_has_closed_form():
    # y_t = a y_{t-1} + 1, y_0 = 0  =>  y_t = (1 - a^t) / (1 - a)
    T, a = 50, 0.9
    out = jax.jit(linear_recurrence)(jnp.full((T, 1), a), jnp.ones((T, 1)))
    t = np.arange(1, T + 1)
    np.testing.assert_allclose(out[:, 0], (1 - a**t) / (1 - a), rtol=1e-13)


def test_default_chunk_size_is_a_bounded_power_of_two():
    for length, expected in [(1, 16), (1000, 32), (4096, 64), (65536, 256), (10**7, 256)]:
        assert default_chunk_size(length) == expected


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(A=np.zeros((5, 3)), b=np.zeros((4, 3))), "same length"),
        (dict(A=np.zeros((5, 2, 3)), b=np.zeros((5, 3))), "does not fit"),
        (dict(A=np.zeros((5, 3)), b=np.zeros(5)), r"shape \(length, n\)"),
        (dict(A=np.zeros((5, 3)), b=np.zeros((5, 3)), method="fast"), "method must be one of"),
        (dict(A=np.zeros((5, 3)), b=np.zeros((5, 3)), chunk_size=0), "chunk_size"),
        (dict(A=np.zeros((5, 3)), b=np.zeros((5, 3)), y0=np.zeros(2)), r"y0 must have shape"),
        (
            dict(A=np.zeros((5, 3)), b=np.zeros((5, 3)), y0=np.zeros(3), reverse=True),
            "forward direction",
        ),
    ],
)
def test_bad_input(kwargs, match):
    with pytest.raises(ValueError, match=match):
        linear_recurrence(**kwargs)
