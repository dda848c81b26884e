"""Newton-parallel vs sequential evaluation of the ParaRNN cells.

For ParaGRU and ParaLSTM, every sequence length, hidden size and batch size of
the grid: the forward time and the forward+backward time (gradient of a scalar
loss with respect to the cell parameters and the inputs) of one `RNN` layer in
`"newton"` mode against the same layer in `"sequential"` mode (a `lax.scan`
over the cell steps with the input projections hoisted out of the loop), both
jit-compiled and vmapped over the batch, float32. Also reported: the Newton
iterations used (largest over the batch) and the largest difference between the
two outputs. With `--linear`, instead: the three `linear_recurrence` methods
(associative scan, chunked, sequential) on diagonal and 2×2-block steps, which
is how `method="auto"` was chosen per backend. The last lines give, per cell, hidden size and batch, the
lengths at which Newton mode trains faster (forward+backward): the crossovers
`RNN(mode="auto")` uses.

usage: python -m benchmarks.pararnn [--quick] [--cells paragru paralstm]
           [--lengths 1024 4096] [--hidden 8 64] [--batch 1 4] [--linear]
"""

from __future__ import annotations

import argparse

import equinox as eqx
import jax
import jax.numpy as jnp

from benchmarks._common import emit, environment, time_fn
from sciml.pararnn import RNN, ParaGRU, ParaLSTM, linear_recurrence


CELLS = {"paragru": ParaGRU, "paralstm": ParaLSTM}


def _layers(cell_name: str, hidden: int, key):
    heads = 4 if hidden >= 64 else 1
    cell = CELLS[cell_name](hidden, hidden, heads, dtype=jnp.float32, key=key)
    return RNN(cell, "sequential"), RNN(cell, "newton")


def _forward(layer, xs):
    return jax.vmap(layer)(xs)


def _forward_backward(layer, xs):
    def loss(layer, xs):
        return jnp.mean(jnp.square(jax.vmap(layer)(xs)))

    return jax.grad(lambda args: loss(*args))((layer, xs))


def _seconds(fn, *args, repeats: int) -> float:
    """Median seconds per call; calls slower than a second are timed once."""
    first = time_fn(fn, *args, warmup=1, repeats=1, min_seconds=0.0)
    if first["median_s"] > 1.0:
        return first["median_s"]
    return time_fn(fn, *args, warmup=1, repeats=repeats, min_seconds=0.1)["median_s"]


def bench_one(cell_name: str, length: int, hidden: int, batch: int, repeats: int) -> dict:
    key_cell, key_x = jax.random.split(jax.random.key(0))
    sequential, newton = _layers(cell_name, hidden, key_cell)
    xs = jax.random.normal(key_x, (batch, length, hidden), jnp.float32)
    forward = eqx.filter_jit(_forward)
    forward_backward = eqx.filter_jit(_forward_backward)
    record = {}
    for name, layer in (("sequential", sequential), ("newton", newton)):
        record[f"{name}_fwd_s"] = _seconds(forward, layer, xs, repeats=repeats)
        record[f"{name}_fwdbwd_s"] = _seconds(forward_backward, layer, xs, repeats=repeats)
    _, diagnostics = eqx.filter_jit(lambda layer, xs: jax.vmap(layer.solve)(xs))(newton, xs)
    difference = jnp.max(jnp.abs(forward(newton, xs) - forward(sequential, xs)))
    record.update(
        newton_iterations=int(jnp.max(diagnostics.iterations)),
        newton_fallbacks=int(jnp.sum(diagnostics.fallback)),
        max_abs_difference=float(difference),
        speedup_fwd=record["sequential_fwd_s"] / record["newton_fwd_s"],
        speedup_fwdbwd=record["sequential_fwdbwd_s"] / record["newton_fwdbwd_s"],
    )
    return record


def bench_linear(structure: str, length: int, n: int, batch: int, repeats: int) -> dict:
    """Seconds per call of each `linear_recurrence` method (vmapped over the batch)."""
    key_a, key_b = jax.random.split(jax.random.key(1))
    shape = (batch, length, n) if structure == "diagonal" else (batch, length, 2, 2, n // 2)
    A = jax.random.uniform(key_a, shape, jnp.float32, -0.7, 0.7)
    b = jax.random.normal(key_b, (batch, length, n), jnp.float32)
    record = {}
    for method in ("scan", "chunked", "sequential"):
        solve = jax.jit(jax.vmap(lambda A, b, m=method: linear_recurrence(A, b, method=m)))
        record[f"{method}_s"] = _seconds(solve, A, b, repeats=repeats)
    return record


def crossovers(records: list[dict]) -> list[dict]:
    """Per cell, hidden size and batch: the lengths where Newton wins fwd+bwd."""
    groups: dict[tuple, list[dict]] = {}
    for r in records:
        groups.setdefault((r["cell"], r["hidden"], r["batch"]), []).append(r)
    out = []
    for (cell, hidden, batch), rows in sorted(groups.items()):
        out.append(
            {
                "bench": "pararnn_crossover",
                "cell": cell,
                "hidden": hidden,
                "batch": batch,
                "lengths": sorted(r["length"] for r in rows),
                "newton_faster_at": sorted(r["length"] for r in rows if r["speedup_fwdbwd"] > 1),
            }
        )
    return out


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument(
        "--quick", action="store_true", help="lengths 1k, 4k; hidden 8, 64; batch 1"
    )
    parser.add_argument("--cells", nargs="+", default=list(CELLS), choices=list(CELLS))
    parser.add_argument("--lengths", nargs="+", type=int, default=[1024, 4096, 16384, 65536])
    parser.add_argument("--hidden", nargs="+", type=int, default=[8, 64, 256])
    parser.add_argument("--batch", nargs="+", type=int, default=[1, 4])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--linear", action="store_true", help="time the linear recurrences")
    args = parser.parse_args()
    if args.quick:
        args.lengths, args.hidden, args.batch, args.repeats = [1024, 4096], [8, 64], [1], 3
    env = environment()
    if args.linear:
        for structure in ("diagonal", "block(2)"):
            for n in args.hidden:
                for batch in args.batch:
                    for length in args.lengths:
                        record = bench_linear(structure, length, n, batch, args.repeats)
                        emit(
                            {
                                "bench": "linear_recurrence",
                                "structure": structure,
                                "length": length,
                                "n": n,
                                "batch": batch,
                                **record,
                                **env,
                            }
                        )
        return
    records = []
    for hidden in args.hidden:
        for batch in args.batch:
            for cell in args.cells:
                for length in args.lengths:
                    record = {
                        "bench": "pararnn",
                        "cell": cell,
                        "length": length,
                        "hidden": hidden,
                        "batch": batch,
                        **bench_one(cell, length, hidden, batch, args.repeats),
                    }
                    records.append(record)
                    emit({**record, **env})
    for record in crossovers(records):
        emit({**record, **env})


if __name__ == "__main__":
    main()
