"""Newton-parallel vs sequential evaluation of the ParaRNN cells.

For ParaGRU and ParaLSTM, every sequence length, hidden size and batch size of
the grid: the forward time and the forward+backward time (gradient of a scalar
loss with respect to the cell parameters and the inputs) of one `RNN` layer in
`"newton"` mode against the same layer in `"sequential"` mode (a `lax.scan`
over the cell steps with the input projections hoisted out of the loop), both
jit-compiled and vmapped over the batch, float32. Also reported: the Newton
iterations used (largest over the batch) and the largest difference between the
two outputs. With `--baseline`, instead: Newton in diagonal mode against
a clean-room quasi-DEER (Gonzalez et al., 2024; the algorithm of
lindermanlab/elk, written here from the paper: the diagonal of the Jacobian
from one JVP, an associative scan per iteration, stopping at the same residual
tolerance) on the same ParaGRU cell and inputs, both jitted, called alternately
in one process. With `--linear`, instead: the three `linear_recurrence` methods
(associative scan, chunked, sequential) on diagonal and 2×2-block steps, which
is how `method="auto"` was chosen per backend. With `--jacobians`, instead
(counts, no timing): the Jacobians one forward solve takes with the full
(`Dense()`) Jacobian of ParaGRU, as DEER uses, at a fixed iteration count and
at the default tolerance, against DEER's one per iteration (the converged
iterate's residual needs cell values only; a Jacobian there was the
`(K + 1) / K` of earlier versions). The last lines give, per cell, hidden size and batch, the
lengths at which Newton mode trains faster (forward+backward): the crossovers
`RNN(mode="auto")` uses.

usage: python -m benchmarks.pararnn [--quick] [--cells paragru paralstm]
           [--lengths 1024 4096] [--hidden 8 64] [--batch 1 4] [--linear | --baseline | --jacobians]
"""

from __future__ import annotations

import argparse
import time

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from benchmarks._common import emit, environment, time_fn
from sciml.pararnn import (
    GRU,
    RNN,
    Fallback,
    Newton,
    ParaGRU,
    ParaLSTM,
    Sequential,
    default_tolerance,
    solve_recurrence,
)
from sciml.recurrence import (
    AssociativeScan,
    ChunkedScan,
    Dense,
    SequentialScan,
    linear_recurrence,
)


CELLS = {"paragru": ParaGRU, "paralstm": ParaLSTM}


def _layers(cell_name: str, hidden: int, key):
    heads = 4 if hidden >= 64 else 1
    cell = CELLS[cell_name](hidden, hidden, heads, dtype=jnp.float32, key=key)
    return RNN(cell, Sequential()), RNN(cell, Fallback(Newton(), Sequential()))


def _forward(layer, xs):
    return jax.vmap(layer)(xs)


def _forward_backward(layer, xs):
    def loss(layer, xs):
        return jnp.mean(jnp.square(jax.vmap(layer)(xs)))

    return jax.grad(lambda args: loss(*args))((layer, xs))


def _timing(fn, *args, repeats: int) -> dict:
    """`time_fn`'s median and compile seconds; calls slower than a second are timed once."""
    first = time_fn(fn, *args, warmup=1, repeats=1, min_seconds=0.0)
    if first["median_s"] > 1.0:
        return first
    timing = time_fn(fn, *args, warmup=1, repeats=repeats, min_seconds=0.1)
    return {**timing, "compile_s": first["compile_s"]}


def _seconds(fn, *args, repeats: int) -> float:
    """Median seconds per call; calls slower than a second are timed once."""
    return _timing(fn, *args, repeats=repeats)["median_s"]


def bench_one(cell_name: str, length: int, hidden: int, batch: int, repeats: int) -> dict:
    key_cell, key_x = jax.random.split(jax.random.key(0))
    sequential, newton = _layers(cell_name, hidden, key_cell)
    xs = jax.random.normal(key_x, (batch, length, hidden), jnp.float32)
    return compare_layers(sequential, newton, xs, repeats)


def compare_layers(sequential: RNN, newton: RNN, xs, repeats: int) -> dict:
    """Forward and forward+backward seconds of two `RNN` layers on the batch `xs`
    `(batch, length, input)`, Newton's iterations and fallbacks, their largest
    output difference and the speed-ups (sequential time / Newton time)."""
    forward = eqx.filter_jit(_forward)
    forward_backward = eqx.filter_jit(_forward_backward)
    record = {}
    for name, layer in (("sequential", sequential), ("newton", newton)):
        record[f"{name}_fwd_s"] = _seconds(forward, layer, xs, repeats=repeats)
        record[f"{name}_fwdbwd_s"] = _seconds(forward_backward, layer, xs, repeats=repeats)
    _, diagnostics = eqx.filter_jit(lambda layer, xs: jax.vmap(layer.solve)(xs))(newton, xs)
    difference = jnp.max(jnp.abs(forward(newton, xs) - forward(sequential, xs)))
    record.update(
        newton_iterations=int(jnp.max(diagnostics.stats["iterations"])),
        newton_fallbacks=int(jnp.sum(diagnostics.stats["fallback"])),
        max_abs_difference=float(difference),
        speedup_fwd=record["sequential_fwd_s"] / record["newton_fwd_s"],
        speedup_fwdbwd=record["sequential_fwdbwd_s"] / record["newton_fwdbwd_s"],
    )
    return record


UNROLLS = (1, 8, 32, 128)


def against_best_sequential(newton: RNN, xs, repeats: int, unrolls=UNROLLS) -> dict:
    """Newton (`newton`'s solver) against the same cell by `Sequential(unroll=k)`
    for each `k` of `unrolls`, forward and forward+backward, on the batch `xs`
    `(batch, length, input)`: every time, the best sequential one (`best_*`),
    the speed-ups over it (and over `unroll=1`, the per-token scan), microseconds
    per token (`batch × length` tokens), Newton's iterations, the largest output
    difference, and `compile_s` (all compilations of the call, summed)."""
    forward = eqx.filter_jit(_forward)
    forward_backward = eqx.filter_jit(_forward_backward)
    batch, length = xs.shape[:2]
    record, compile_s = {}, 0.0
    layers = {"newton": newton}
    layers |= {f"sequential_unroll{k}": newton.with_solver(Sequential(unroll=k)) for k in unrolls}
    for name, layer in layers.items():
        for kind, fn in (("fwd", forward), ("fwdbwd", forward_backward)):
            timing = _timing(fn, layer, xs, repeats=repeats)
            record[f"{name}_{kind}_s"] = timing["median_s"]
            compile_s += timing["compile_s"]
    for kind in ("fwd", "fwdbwd"):
        best = min(unrolls, key=lambda k: record[f"sequential_unroll{k}_{kind}_s"])
        newton_s = record[f"newton_{kind}_s"]
        record[f"best_unroll_{kind}"] = best
        record[f"best_sequential_{kind}_s"] = record[f"sequential_unroll{best}_{kind}_s"]
        record[f"speedup_{kind}"] = record[f"best_sequential_{kind}_s"] / newton_s
        if 1 in unrolls:
            record[f"speedup_{kind}_unroll1"] = record[f"sequential_unroll1_{kind}_s"] / newton_s
        record[f"newton_us_per_token_{kind}"] = 1e6 * newton_s / (batch * length)
        record[f"sequential_us_per_token_{kind}"] = (
            1e6 * record[f"best_sequential_{kind}_s"] / (batch * length)
        )
    _, diagnostics = eqx.filter_jit(lambda layer, xs: jax.vmap(layer.solve)(xs))(newton, xs)
    sequential = layers[f"sequential_unroll{unrolls[0]}"]
    difference = jnp.max(jnp.abs(forward(newton, xs) - forward(sequential, xs)))
    record.update(
        newton_iterations=int(jnp.max(diagnostics.stats["iterations"])),
        newton_fallbacks=int(jnp.sum(diagnostics.stats["fallback"])),
        max_abs_difference=float(difference),
        compile_s=compile_s,
    )
    return record


def torch_gru_weights(cell: GRU) -> dict[str, np.ndarray]:
    """The parameters of a one-layer `torch.nn.GRU` computing the same function
    as `cell` (`sciml.pararnn.GRU`), by name.

    PyTorch's GRU, gates in the order r, z, n:
    `r = σ(W_ir x + b_ir + W_hr h + b_hr)`, `z = σ(W_iz x + b_iz + W_hz h + b_hz)`,
    `n = tanh(W_in x + b_in + r ⊙ (W_hn h + b_hn))`, `h' = (1 − z) ⊙ n + z ⊙ h`.
    Ours has the same gate order and form, one bias for the input side of all
    three gates (`bias`, the r and z rows holding both of torch's) and `bias_n`
    for the hidden side of n: so `bias_ih = bias` and `bias_hh = [0, 0, bias_n]`.
    """
    hidden = cell.hidden_size
    return {
        "weight_ih_l0": np.asarray(cell.weight_ih),
        "weight_hh_l0": np.asarray(cell.weight_hh),
        "bias_ih_l0": np.asarray(cell.bias),
        "bias_hh_l0": np.concatenate(
            [np.zeros(2 * hidden, np.asarray(cell.bias_n).dtype), np.asarray(cell.bias_n)]
        ),
    }


def bench_torch_gru(cell: GRU, xs, repeats: int) -> dict:
    """`torch.nn.GRU` (cuDNN on a GPU) with `cell`'s weights on the batch `xs`
    `(batch, length, input)`, from a zero state: forward (no gradient) and
    forward+backward seconds (median of `repeats`, after one warm-up), its
    outputs, and PyTorch's TF32 flags. Raises ImportError without torch."""
    import torch

    device = "cuda" if torch.cuda.is_available() else "cpu"
    gru = torch.nn.GRU(cell.input_size, cell.hidden_size, batch_first=True).to(device)
    with torch.no_grad():
        for name, value in torch_gru_weights(cell).items():
            getattr(gru, name).copy_(torch.from_numpy(np.array(value, np.float32)))
    x = torch.from_numpy(np.array(xs, np.float32)).to(device)

    def forward():
        with torch.no_grad():
            out = gru(x)[0]
        if device == "cuda":
            torch.cuda.synchronize()
        return out

    def forward_backward():
        gru.zero_grad(set_to_none=True)
        x.requires_grad_(True)
        loss = torch.mean(torch.square(gru(x)[0]))
        loss.backward()
        x.requires_grad_(False)
        if device == "cuda":
            torch.cuda.synchronize()

    record = {"torch_device": device, "torch": torch.__version__}
    for kind, fn in (("fwd", forward), ("fwdbwd", forward_backward)):
        fn()
        samples = []
        for _ in range(repeats):
            start = time.perf_counter()
            fn()
            samples.append(time.perf_counter() - start)
        record[f"torch_gru_{kind}_s"] = float(np.median(samples))
    record["outputs"] = forward().cpu().numpy()
    return record


def bench_linear(structure: str, length: int, n: int, batch: int, repeats: int) -> dict:
    """Seconds per call of each `linear_recurrence` method (vmapped over the batch)."""
    key_a, key_b = jax.random.split(jax.random.key(1))
    shape = (batch, length, n) if structure == "diagonal" else (batch, length, 2, 2, n // 2)
    A = jax.random.uniform(key_a, shape, jnp.float32, -0.7, 0.7)
    b = jax.random.normal(key_b, (batch, length, n), jnp.float32)
    record = {}
    methods = {"scan": AssociativeScan(), "chunked": ChunkedScan(), "sequential": SequentialScan()}
    for name, method in methods.items():
        solve = jax.jit(jax.vmap(lambda A, b, m=method: linear_recurrence(A, b, method=m)))
        record[f"{name}_s"] = _seconds(solve, A, b, repeats=repeats)
    return record


def quasi_deer(step, h0, us, *, max_steps=20):
    """Clean-room quasi-DEER: from `h = 0`, repeat `h ← solve(h_t = a_t h_{t-1} + b_t)` with
    `a_t = diag ∂f/∂h (h_{t-1}, u_t)` from one JVP with a ones tangent and
    `b_t = f(h_{t-1}, u_t) − a_t h_{t-1}` (`a_1 = 0`, `b_1 = f(h_0, u_1)`), by an
    associative scan, until `max|h_t − f(h_{t-1}, u_t)| ≤ tol (1 + max|h|)`."""
    tol = default_tolerance(h0.dtype)

    def linearise(hs):
        prev = jnp.concatenate([h0[None], hs[:-1]])
        ones = jnp.ones_like(h0)
        fs, a = jax.vmap(lambda h, u: jax.jvp(lambda v: step(v, u), (h,), (ones,)))(prev, us)
        return fs, a, prev

    def cond(state):
        k, hs, fs, _, _ = state
        return (k < max_steps) & (jnp.max(jnp.abs(hs - fs)) > tol * (1 + jnp.max(jnp.abs(hs))))

    def body(state):
        k, hs, fs, a, prev = state
        b = (fs - a * prev).at[0].set(fs[0])
        a = a.at[0].set(0)
        hs = lax.associative_scan(lambda e, f: (f[0] * e[0], f[0] * e[1] + f[1]), (a, b))[1]
        return (k + 1, hs, *linearise(hs))

    hs = jnp.zeros((us.shape[0], h0.shape[0]), h0.dtype)
    return lax.while_loop(cond, body, (0, hs, *linearise(hs)))[1]


def bench_baseline(length: int, hidden: int, rounds: int) -> dict:
    """Median seconds of ours and quasi-DEER, called alternately, and their ratio."""
    key_cell, key_x = jax.random.split(jax.random.key(0))
    heads = 4 if hidden >= 64 else 1
    cell = ParaGRU(hidden, hidden, heads, dtype=jnp.float32, key=key_cell)
    us = cell.project(jax.random.normal(key_x, (length, hidden), jnp.float32))
    h0 = jnp.zeros(hidden, jnp.float32)
    solver = Fallback(Newton(), Sequential())
    ours = jax.jit(lambda us: solve_recurrence(cell.step, h0, us, solver).value)
    theirs = jax.jit(lambda us: quasi_deer(cell.step, h0, us))
    reference = lax.scan(lambda h, u: (cell.step(h, u),) * 2, h0, us)[1]
    times: dict[str, list[float]] = {"ours": [], "quasi_deer": []}
    for fn in (ours, theirs):
        jax.block_until_ready(fn(us))
    for _ in range(rounds):
        for name, fn in (("ours", ours), ("quasi_deer", theirs)):
            start = time.perf_counter()
            jax.block_until_ready(fn(us))
            times[name].append(time.perf_counter() - start)
    median = {k: sorted(v)[len(v) // 2] for k, v in times.items()}
    ratios = sorted(a / b for a, b in zip(times["ours"], times["quasi_deer"]))
    solution = solve_recurrence(cell.step, h0, us, solver)
    return {
        "ours_s": median["ours"],
        "quasi_deer_s": median["quasi_deer"],
        "ratio_median": ratios[len(ratios) // 2],
        "ratio_q25": ratios[len(ratios) // 4],
        "ratio_q75": ratios[3 * len(ratios) // 4],
        "ours_iterations": int(solution.stats["iterations"]),
        "ours_error": float(jnp.max(jnp.abs(solution.value - reference))),
        "quasi_deer_error": float(jnp.max(jnp.abs(theirs(us) - reference))),
    }


_JACOBIAN_CALLS: list[int] = []


class _CountedDense(Dense):
    """`Dense()` recording each Jacobian of a whole trajectory (the call is
    vmapped over time, so its callback runs once per trajectory)."""

    def value_and_jacobian(self, fn, h):
        jax.debug.callback(lambda: _JACOBIAN_CALLS.append(1))
        return super().value_and_jacobian(fn, h)


def count_jacobians(length: int, hidden: int, fixed_steps: int = 3) -> list[dict]:
    """Jacobians per forward solve of dense Newton (ParaGRU, `structure=Dense()`),
    for `fixed_steps` iterations (zero tolerance) and at the default tolerance;
    DEER takes one per iteration."""
    key_cell, key_x = jax.random.split(jax.random.key(0))
    cell = ParaGRU(hidden, hidden, 4 if hidden >= 64 else 1, dtype=jnp.float32, key=key_cell)
    us = cell.project(jax.random.normal(key_x, (length, hidden), jnp.float32))
    h0 = jnp.zeros(hidden, jnp.float32)
    solvers = {
        f"fixed_{fixed_steps}": Newton(max_steps=fixed_steps, rtol=0.0, atol=0.0),
        "tolerance": Newton(),
    }
    rows = []
    for stop, solver in solvers.items():
        _JACOBIAN_CALLS.clear()
        solve = jax.jit(lambda us, s=solver: solve_recurrence(cell.step, h0, us, s, structure=_CountedDense(), throw=False))  # fmt: skip
        iterations = int(jax.block_until_ready(solve(us)).stats["iterations"])
        jacobians = len(_JACOBIAN_CALLS)
        rows.append(
            {
                "stop": stop,
                "iterations": iterations,
                "jacobians": jacobians,
                "deer_jacobians": iterations,
                "jacobians_vs_deer": jacobians / max(iterations, 1),
            }
        )
    return rows


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
    parser.add_argument("--baseline", action="store_true", help="ours vs quasi-DEER (ParaGRU)")
    parser.add_argument("--rounds", type=int, default=30, help="alternations of --baseline")
    parser.add_argument("--jacobians", action="store_true", help="Jacobians per dense solve")
    args = parser.parse_args()
    if args.quick:
        args.lengths, args.hidden, args.batch, args.repeats = [1024, 4096], [8, 64], [1], 3
    env = environment()
    if args.jacobians:
        for hidden in args.hidden:
            for length in args.lengths:
                for row in count_jacobians(length, hidden):
                    emit({"bench": "pararnn_jacobians", "length": length, "hidden": hidden, **row})
        return
    if args.baseline:
        for hidden in args.hidden:
            for length in args.lengths:
                record = bench_baseline(length, hidden, args.rounds)
                emit(
                    {
                        "bench": "pararnn_baseline",
                        "length": length,
                        "hidden": hidden,
                        **record,
                        **env,
                    }
                )
        return
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
