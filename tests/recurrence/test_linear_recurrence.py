"""Linear recurrences (every structure, both directions, every method) against Python loops."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from sciml.recurrence import (
    AssociativeScan,
    AutoScan,
    ChunkedScan,
    SequentialScan,
    default_chunk_size,
    linear_recurrence,
    transposed_recurrence,
)


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
        for method in (AssociativeScan(), ChunkedScan(7), SequentialScan()):
            out[type(method).__name__] = (
                linear_recurrence(A, b, y0, method=method),
                transposed_recurrence(A, b, method=method),
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
        lambda A, b, y0: [linear_recurrence(A, b, y0, method=ChunkedScan(c)) for c in chunks]
    )(A, b, y0)
    for chunk, out in zip(chunks, outs):
        np.testing.assert_allclose(out, ref, rtol=1e-12, atol=1e-12, err_msg=str(chunk))


def test_float32_matches_float64_reference():
    A, b, y0 = random_system("diagonal", 300, 5, seed=2)
    ref = loop_forward(dense_steps(A), b, y0)
    outs = jax.jit(
        lambda A, b, y0: [
            linear_recurrence(A, b, y0, method=m)
            for m in (AssociativeScan(), ChunkedScan(16), SequentialScan())
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
            return carry, linear_recurrence(A, b, y0, method=AssociativeScan())

        in_scan = jax.lax.scan(body, 0.0, None, length=2)[1][1]
        batched = jax.vmap(lambda bb: linear_recurrence(A, bb, y0, method=ChunkedScan(6)))(
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
        (dict(a=np.zeros((5, 3)), b=np.zeros((4, 3))), "same length"),
        (dict(a=np.zeros((5, 2, 3)), b=np.zeros((5, 3))), "does not fit"),
        (dict(a=np.zeros((5, 3)), b=np.zeros(5)), r"shape \(length, n\)"),
        (dict(a=np.zeros((5, 3)), b=np.zeros((5, 3)), method="fast"), "method must be one of"),
        (dict(a=np.zeros((5, 3)), b=np.zeros((5, 3)), h0=np.zeros(2)), r"h0 must have shape"),
    ],
)
def test_bad_input(kwargs, match):
    with pytest.raises(ValueError, match=match):
        linear_recurrence(**kwargs)
    with pytest.raises(ValueError, match="chunk_size"):
        ChunkedScan(0)


def loop_backward(a, b, h0):
    """h_t = a_t h_{t+1} + b_t, t = T..1, elementwise, from h_{T+1} = h0."""
    h, out = h0, [None] * len(b)
    for t in reversed(range(len(b))):
        h = a[t] * h + b[t]
        out[t] = h
    return np.array(out)


@pytest.mark.parametrize("dtype, tol", [(np.float64, 1e-12), (np.float32, 2e-5)])
def test_diagonal_both_directions_any_trailing_shape_real_and_complex(dtype, tol):
    # the S4D layout: states (T, H, N/2), complex; and a real one
    rng = np.random.default_rng(4)
    T, shape = 37, (3, 2)
    for complex_ in (False, True):
        a = rng.uniform(-0.95, 0.95, (T, *shape))
        b = rng.normal(size=(T, *shape))
        h0 = rng.normal(size=shape)
        if complex_:
            a = a * np.exp(1j * rng.uniform(0, 6, a.shape))
            b = b + 1j * rng.normal(size=b.shape)
            h0 = h0 + 1j * rng.normal(size=shape)
        cdtype = np.result_type(dtype, np.complex64) if complex_ else dtype
        a, b, h0 = a.astype(cdtype), b.astype(cdtype), h0.astype(cdtype)
        forward_ref = loop_forward_elementwise(a, b, h0)
        backward_ref = loop_backward(a, b, h0)
        for method in (AssociativeScan(), ChunkedScan(5), SequentialScan()):
            forward = jax.jit(lambda a, b, h0, m=method: linear_recurrence(a, b, h0, method=m))
            backward = jax.jit(
                lambda a, b, h0, m=method: linear_recurrence(a, b, h0, reverse=True, method=m)
            )
            out_f, out_b = forward(a, b, h0), backward(a, b, h0)
            assert out_f.dtype == cdtype and out_b.dtype == cdtype
            name = f"{type(method).__name__} complex={complex_}"
            np.testing.assert_allclose(out_f, forward_ref, rtol=tol, atol=tol, err_msg=name)
            np.testing.assert_allclose(out_b, backward_ref, rtol=tol, atol=tol, err_msg=name)


def loop_forward_elementwise(a, b, h0):
    h, out = h0, []
    for t in range(len(b)):
        h = a[t] * h + b[t]
        out.append(h)
    return np.array(out)


def test_reverse_of_structured_steps_runs_backwards_in_time():
    A, b, y0 = random_system("block(2)", 30, 4, seed=5)
    D = dense_steps(A)
    y, expected = y0, np.zeros_like(b)
    for t in reversed(range(30)):
        y = D[t] @ y + b[t]
        expected[t] = y
    out = jax.jit(lambda A, b, y0: linear_recurrence(A, b, y0, reverse=True))(A, b, y0)
    np.testing.assert_allclose(out, expected, rtol=1e-12, atol=1e-12)


def test_auto_scan_picks_the_measured_method_of_each_backend():
    # docs/benchmarks.md ("ParaRNN"): the sequential scan on CPU, the
    # associative scan on accelerators (and on a backend not measured)
    picked = {b: type(AutoScan(b).select()) for b in ("cpu", "gpu", "tpu", "other")}
    assert picked == {
        "cpu": SequentialScan,
        "gpu": AssociativeScan,
        "tpu": AssociativeScan,
        "other": AssociativeScan,
    }
    assert type(AutoScan().select()) is SequentialScan  # this suite runs on the CPU
