"""Page faults per call of a jitted function with a 64 MB result; with the
argument `reuse`, after `reuse_host_memory` (called before the first
computation, as its docstring asks; its own process: the setting is
process-wide)."""

import json
import resource
import sys

import jax
import jax.numpy as jnp

from sciml.training import reuse_host_memory


applied = reuse_host_memory() if sys.argv[1:] == ["reuse"] else None
double = jax.jit(lambda x: 2 * x)
x = jnp.ones((4096, 4096), jnp.float32)  # 64 MB: above glibc's largest mmap threshold
for _ in range(20):  # the heap grows to what the calls need, then stays
    jax.block_until_ready(double(x))
faults = []
for _ in range(10):
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    y = double(x)  # the previous result is freed here
    jax.block_until_ready(y)
    del y
    faults.append(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
print(json.dumps({"applied": applied, "faults_per_call": faults}))
