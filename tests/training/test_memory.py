import jax.numpy as jnp

from sciml.training import peak_memory_bytes


def test_counts_arguments_and_outputs_exactly():
    # x + 1 needs no temporaries: the input and the output buffers, 4 bytes each
    for n in (1_000, 100_000):
        x = jnp.ones(n, jnp.float32)
        assert peak_memory_bytes(lambda x: x + 1, x) == 8 * n


def test_counts_a_materialised_temporary():
    # a matrix product's result must exist before it is reduced along both axes
    a = jnp.ones((300, 300), jnp.float32)
    small = peak_memory_bytes(lambda a: a.sum(), a)
    big = peak_memory_bytes(lambda a: jnp.linalg.norm(a @ a, axis=0) @ (a @ a), a)
    assert small == 4 * 300 * 300 + 4
    assert big >= small + 4 * 300 * 300
