"""`fit` on two processes of this machine against one process, on the CPU.

What a step costs when the trainer is split over processes (JAX's
multi-process runtime; on CPU its collectives run over local TCP with gloo):
an MLP 64 → 64 (width `w`, 3 hidden layers, Adam) trained with `fit` on a
global batch `b`, either by one process with every core, or by two
processes with one core each (`intra_op_parallelism_threads=1`), each on
its half of the batch: the same arithmetic on the same cores, plus, for two,
the gradient's all-reduce and the per-step agreement on interrupts and the
end of data. Also the agreement alone (`ProcessGroup.any`, one all-gather
of two flags). Seconds per step after compilation (a first `fit` of 20
steps compiles), best of three `fit` runs of `steps` steps.

usage: python -m benchmarks.processes [--quick]
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
import time

from benchmarks._common import emit, environment


SIZES = ((256, 64), (1024, 256))


def _child(width: int, batch: int, steps: int) -> dict:
    """One process's timings (run in a fresh interpreter by `_run`)."""
    import equinox as eqx
    import jax
    import jax.numpy as jnp
    import optax

    from sciml.distributed import ProcessGroup, initialize_processes
    from sciml.training import TrainSettings, fit

    initialize_processes()
    group = ProcessGroup.current()
    model = eqx.nn.MLP(64, 64, width, 3, activation=jax.nn.gelu, key=jax.random.key(0))
    data = jax.random.normal(jax.random.key(1), (4096, 64))

    @jax.jit
    def whole(key):
        x = data[jax.random.randint(key, (batch,), 0, data.shape[0])]
        return x, jnp.sin(x)

    def batch_fn(step, key):
        return group.rows(whole(key))

    def loss_fn(model, batch, key):
        x, y = batch
        return jnp.mean((jax.vmap(model)(x) - y) ** 2), {}

    optimizer = optax.adam(1e-3)

    def run(n: int) -> float:
        settings = TrainSettings(steps=n, progress=False, log_every=n)
        start = time.perf_counter()
        fit(model, loss_fn, batch_fn, optimizer=optimizer, key=jax.random.key(2), settings=settings)
        return (time.perf_counter() - start) / n

    run(20)  # compiles
    step_s = min(run(steps) for _ in range(3))
    start, calls = time.perf_counter(), 200
    for _ in range(calls):
        group.any(False, False)
    return {"step_s": step_s, "agree_s": (time.perf_counter() - start) / calls}


def _run(processes: int, width: int, batch: int, steps: int) -> dict:
    """`_child` in `processes` fresh interpreters; process 0's timings."""
    env = {k: v for k, v in os.environ.items() if k != "XLA_FLAGS"}
    env["JAX_PLATFORMS"] = "cpu"
    if processes > 1:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        env.update(SCIML_PROCESSES=str(processes), JAX_COORDINATOR_ADDRESS=f"127.0.0.1:{port}")
        env["XLA_FLAGS"] = "--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1"
    command = [sys.executable, "-m", "benchmarks.processes", "--child"]
    children = [
        subprocess.Popen(
            [*command, str(width), str(batch), str(steps)],
            env={**env, "SCIML_PROCESS_ID": str(i)},
            stdout=subprocess.PIPE,
            text=True,
        )
        for i in range(processes)
    ]
    outputs = [child.communicate()[0] for child in children]
    if any(child.returncode for child in children):
        raise RuntimeError(f"a benchmark process failed: {outputs}")
    return json.loads(outputs[0].strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer steps, the small size")
    parser.add_argument("--child", nargs=3, type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(_child(*args.child)), flush=True)
        return
    steps = 50 if args.quick else 300
    print(json.dumps({"environment": environment()}))
    for width, batch in SIZES[:1] if args.quick else SIZES:
        one = _run(1, width, batch, steps)
        two = _run(2, width, batch, steps)
        emit(
            {
                "benchmark": "fit_two_processes",
                "width": width,
                "batch": batch,
                "one_process_step_s": one["step_s"],
                "two_processes_step_s": two["step_s"],
                "ratio": two["step_s"] / one["step_s"],
                "agreement_s": two["agree_s"],
            }
        )


if __name__ == "__main__":
    main()
