"""Diagonal SSM layers: FFT convolution (S4D) and parallel scan (S5) vs a recurrent loop.

1. Forward and forward+backward time and peak memory (XLA's memory analysis of
   the compiled function) of one layer, H = 128 features, state size N = 64
   (32 complex modes), batch 8, float32, at L = 1k, 4k, 16k: the S4D layer by
   its FFT convolution and the S5 layer by `lax.associative_scan`, each against
   a naive recurrent `lax.scan` of the *same* discretised system (one step per
   token, outputs computed inside the loop). The loss for the backward pass is
   `Σ y²`. Both give the same outputs (checked here, float32 round-off).
2. Step mode: tokens per second of autoregressive inference, a `lax.scan` of
   `layer.recurrent().step` over 1024 steps for a batch of 8 sequences.

3. `--check-cost`: what the non-finite check costs (issue 12). S4D (H = 128,
   N = 64, batch 8, L = 1k, float32) forward+backward and one Adam train step
   of a 4-layer S4D `SequenceModel` (d_model 128), each three ways: no check in
   the compiled code (today's layers under `jit`); the former in-layer check
   (`eqx.error_if` on every layer's input, a host callback in the compiled
   code, as `check_finite=True` did before); and today's policy, one
   `sciml._checks.check_finite` of the batch on the host before each compiled
   call (what `sciml.training.fit` does once per step).

usage: python -m benchmarks.ssm [--quick]   (--quick: L = 256, 1k; fewer repeats)
       python -m benchmarks.ssm --check-cost
"""

from __future__ import annotations

import argparse

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import optax

from benchmarks._common import emit, environment, time_fn
from sciml._checks import check_finite
from sciml.recurrence import ChunkedScan, SequentialScan, linear_recurrence
from sciml.ssm import S4D, S5, SequenceModel
from sciml.training import peak_memory_bytes


def naive_s4d(layer: S4D, u):
    """y_t = 2 Re(C x_t) + D u_t with x_t = Λ̄ x_{t−1} + B̄ u_t, one token per scan step."""
    log_Lambda_bar, B_bar = layer._discrete(1.0)
    Lambda_bar, C = jnp.exp(log_Lambda_bar), layer.C[0]

    def step(x, u_t):
        x = Lambda_bar * x + B_bar * u_t[:, None]
        return x, 2 * jnp.sum(C * x, -1).real + layer.D * u_t

    return jax.lax.scan(step, jnp.zeros_like(Lambda_bar), u)[1]


def naive_s5(layer: S5, u):
    """y_t = 2 Re(C̃ x_t) + D u_t with x_t = Λ̄ x_{t−1} + B̄ u_t, one token per scan step."""
    log_Lambda_bar, B_bar = layer._discrete(1.0)
    Lambda_bar, C = jnp.exp(log_Lambda_bar), layer.C[0]

    def step(x, u_t):
        x = Lambda_bar * x + B_bar @ u_t.astype(B_bar.dtype)
        return x, 2 * (C @ x).real + layer.D * u_t

    return jax.lax.scan(step, jnp.zeros_like(Lambda_bar), u)[1]


def scan_s4d(method):
    """The S4D layer's discretised system (that of `naive_s4d`) with its states
    by `sciml.recurrence.linear_recurrence(..., method=method)`, outputs after."""

    def apply(layer: S4D, u):
        log_Lambda_bar, B_bar = layer._discrete(1.0)
        v = B_bar * u[:, :, None].astype(B_bar.dtype)  # (L, H, N)
        x = linear_recurrence(jnp.broadcast_to(jnp.exp(log_Lambda_bar), v.shape), v, method=method)
        return 2 * jnp.sum(layer.C[0] * x, -1).real + layer.D * u

    return apply


def scan_s5(method):
    """The S5 layer's discretised system (that of `naive_s5`) with its states
    by `sciml.recurrence.linear_recurrence(..., method=method)`, outputs after."""

    def apply(layer: S5, u):
        log_Lambda_bar, B_bar = layer._discrete(1.0)
        v = u.astype(B_bar.dtype) @ B_bar.T  # (L, P)
        x = linear_recurrence(jnp.broadcast_to(jnp.exp(log_Lambda_bar), v.shape), v, method=method)
        return 2 * (x @ layer.C[0].T).real + layer.D * u

    return apply


def baselines(scan, naive, unrolls=(8, 32, 128)) -> dict:
    """The sequential baselines of one layer, by name: the per-token scan
    (`naive`, outputs inside the loop), `lax.scan` unrolled `k` steps, and
    `ChunkedScan` (`scan` is `scan_s4d` or `scan_s5`)."""
    out = {"unroll1": naive}
    out |= {f"unroll{k}": scan(SequentialScan(unroll=k)) for k in unrolls}
    out["chunked"] = scan(ChunkedScan())
    return out


def bench_against_baselines(name, layer, fast, others: dict, length, batch, repeats) -> None:
    """Forward and forward+backward seconds of `fast` (the layer's own path) and
    of each of `others` (`baselines`), one line per path and pass, then per pass
    the best baseline and the speed-ups over it and over the per-token scan,
    and the largest relative output difference over all paths; JAX's default
    matmul precision beside every number."""
    u = jax.random.normal(jax.random.key(1), (batch, length, layer.features), jnp.float32)
    precision = str(jax.config.jax_default_matmul_precision or "default")
    common = dict(layer=name, length=length, batch=batch, matmul_precision=precision)
    functions = {path: _functions(apply) for path, apply in {"parallel": fast, **others}.items()}
    times = {}
    for path, pair in functions.items():
        for kind, fn in zip(("fwd", "fwd+bwd"), pair):
            timing = time_fn(fn, layer, u, warmup=1, repeats=repeats, min_seconds=0.1)
            times[path, kind] = timing["median_s"]
            emit({"benchmark": "ssm.path", "path": path, "pass": kind, **common, **timing})
    y_fast = functions["parallel"][0](layer, u)
    scale = jnp.max(jnp.abs(y_fast))
    error = max(
        float(jnp.max(jnp.abs(functions[path][0](layer, u) - y_fast)) / scale) for path in others
    )
    for kind in ("fwd", "fwd+bwd"):
        best = min(others, key=lambda path: times[path, kind])
        emit(
            {
                "benchmark": "ssm.against_baselines",
                "pass": kind,
                **common,
                "ours_s": times["parallel", kind],
                "best_baseline": best,
                "best_baseline_s": times[best, kind],
                "speedup": times[best, kind] / times["parallel", kind],
                "speedup_unroll1": times["unroll1", kind] / times["parallel", kind],
                "max_rel_error": error,
            }
        )


def _functions(apply):
    """Forward and forward+backward (gradient of Σ y² w.r.t. the layer) of a batch."""

    def forward(layer, u):
        return jax.vmap(lambda x: apply(layer, x))(u)

    def backward(layer, u):
        params, static = eqx.partition(layer, eqx.is_inexact_array)

        def loss(params):
            return jnp.sum(forward(eqx.combine(params, static), u) ** 2)

        return jax.grad(loss)(params)

    return jax.jit(forward), jax.jit(backward)


def bench_layer(name, layer, fast, naive, length, batch, repeats, max_bytes):
    u = jax.random.normal(jax.random.key(1), (batch, length, layer.features), jnp.float32)
    results = {}
    for path, apply in (("parallel", fast), ("recurrent", naive)):
        forward, backward = _functions(apply)
        for kind, fn in (("fwd", forward), ("fwd+bwd", backward)):
            peak = peak_memory_bytes(fn, layer, u)
            timing = {}
            if peak is None or peak <= max_bytes:  # else only compiled, not run
                timing = time_fn(fn, layer, u, warmup=1, repeats=repeats, min_seconds=0.1)
            results[(path, kind)] = (timing.get("median_s"), peak)
            emit(
                {
                    "benchmark": "ssm.layer",
                    "layer": name,
                    "path": path,
                    "pass": kind,
                    "length": length,
                    "batch": batch,
                    "features": layer.features,
                    "state_size": layer.state_size,
                    "peak_bytes": peak,
                    **timing,
                }
            )
    y_fast = _functions(fast)[0](layer, u)
    y_naive = _functions(naive)[0](layer, u)
    error = float(jnp.max(jnp.abs(y_fast - y_naive)) / jnp.max(jnp.abs(y_naive)))
    emit({"benchmark": "ssm.agreement", "layer": name, "length": length, "max_rel_error": error})
    return results


def bench_step(name, layer, batch, steps):
    u = jax.random.normal(jax.random.key(2), (steps, batch, layer.features), jnp.float32)

    @jax.jit
    def generate(layer, u):
        recurrent = layer.recurrent()  # discretise once, outside the loop
        state = jnp.broadcast_to(recurrent.init_state(), (batch, *recurrent.init_state().shape))

        def body(state, u_t):
            return jax.vmap(recurrent.step)(state, u_t)

        return jax.lax.scan(body, state, u)[1]

    timing = time_fn(generate, layer, u, warmup=1, repeats=3, min_seconds=0.2)
    emit(
        {
            "benchmark": "ssm.step",
            "layer": name,
            "batch": batch,
            "steps": steps,
            "tokens_per_s": batch * steps / timing["median_s"],
            **timing,
        }
    )


def _in_layer_check(model):
    """`model` with every S4D layer's input passed through `eqx.error_if` first:
    the in-layer check that `check_finite=True` compiled into each layer before
    issue 12 (a host callback per layer call in the compiled code)."""

    class Checked(eqx.Module):
        layer: S4D

        def __call__(self, u, **kwargs):
            u = eqx.error_if(u, ~jnp.all(jnp.isfinite(u)), "S4D: input is not finite.")
            return self.layer(u, **kwargs)

        def __getattr__(self, name):
            return getattr(self.layer, name)

    is_layer = lambda x: isinstance(x, S4D)  # noqa: E731
    return jax.tree_util.tree_map(
        lambda x: Checked(x) if is_layer(x) else x, model, is_leaf=is_layer
    )


def _host_checked(fn):
    """`fn` after one host-side `check_finite` of the batch (today's policy)."""

    def call(model, *batch):
        for i, x in enumerate(batch):
            check_finite(f"batch[{i}]", x)
        return fn(model, *batch)

    return call


def bench_check_cost(repeats):
    H, N, batch, length = 128, 64, 8, 1024
    key = jax.random.key(0)
    u = jax.random.normal(jax.random.key(1), (batch, length, H), jnp.float32)
    layer = S4D(H, N, dtype=jnp.float32, key=key)
    _, layer_grad = _functions(lambda m, x: m(x))

    model = SequenceModel(H, 10, d_model=H, n_layers=4, state_size=N, dtype=jnp.float32, key=key)
    labels = jax.random.randint(jax.random.key(2), (batch,), 0, 10)
    optimizer = optax.adam(1e-3)

    def make_step(model):
        params, static = eqx.partition(model, eqx.is_inexact_array)
        opt_state = optimizer.init(params)

        @jax.jit
        def step(params, opt_state, u, labels):
            def loss(params):
                logits = jax.vmap(eqx.combine(params, static))(u)
                return optax.softmax_cross_entropy_with_integer_labels(logits, labels).mean()

            value, grads = jax.value_and_grad(loss)(params)
            updates, opt_state = optimizer.update(grads, opt_state, params)
            return optax.apply_updates(params, updates), opt_state, value

        return lambda m, u, labels: step(params, opt_state, u, labels)

    cases = {
        "S4D fwd+bwd (L=1k)": {
            "no check (jit)": (layer_grad, layer, (u,)),
            "in-layer eqx.error_if (before)": (layer_grad, _in_layer_check(layer), (u,)),
            "host check of the batch (policy)": (_host_checked(layer_grad), layer, (u,)),
        },
        "train step (4×S4D, L=1k)": {
            "no check (jit)": (make_step(model), model, (u, labels)),
            "in-layer eqx.error_if (before)": (
                make_step(_in_layer_check(model)),
                model,
                (u, labels),
            ),
            "host check of the batch (policy)": (
                _host_checked(make_step(model)),
                model,
                (u, labels),
            ),
        },
    }
    # The variants of a case alternate, round after round, and each round's times are
    # taken relative to that round's "no check": on a loaded machine the drift
    # between rounds cancels. Reported: the median over rounds.
    rows = []
    for case, variants in cases.items():
        for fn, m, args in variants.values():
            time_fn(fn, m, *args, warmup=2, repeats=1, min_seconds=0.0)  # compile
        samples = {variant: [] for variant in variants}
        for _ in range(repeats):
            for variant, (fn, m, args) in variants.items():
                timing = time_fn(fn, m, *args, warmup=1, repeats=1, min_seconds=0.3)
                samples[variant].append(timing["median_s"])
        base = np.array(samples["no check (jit)"])
        for variant, times in samples.items():
            times = np.array(times)
            ratio = float(np.median(times / base))
            emit(
                {
                    "benchmark": "ssm.check_cost",
                    "case": case,
                    "variant": variant,
                    "median_s": float(np.median(times)),
                    "relative": ratio,
                    "rounds": repeats,
                }
            )
            rows.append((case, variant, float(np.median(times)), ratio))
    print("\n| case | check | ms | relative |")
    print("| --- | --- | --- | --- |")
    for case, variant, t, ratio in rows:
        print(f"| {case} | {variant} | {1e3 * t:.1f} | {ratio:.2f}× |")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="L = 256 and 1k, fewer repeats")
    parser.add_argument(
        "--check-cost", action="store_true", help="cost of the non-finite check only"
    )
    parser.add_argument(
        "--max-gb", type=float, default=6.0, help="only compile (no timing) above this peak memory"
    )
    args = parser.parse_args(argv)
    env = environment()
    emit({"benchmark": "ssm.environment", **env})
    if args.check_cost:
        bench_check_cost(repeats=7)
        return
    lengths, repeats = ((256, 1024), 2) if args.quick else ((1024, 4096, 16384), 3)
    H, N, batch = 128, 64, 8
    key = jax.random.key(0)
    layers = {
        "S4D (FFT conv)": (S4D(H, N, dtype=jnp.float32, key=key), lambda m, x: m(x), naive_s4d),
        "S5 (assoc. scan)": (S5(H, N, dtype=jnp.float32, key=key), lambda m, x: m(x), naive_s5),
    }
    table = []
    for length in lengths:
        for name, (layer, fast, naive) in layers.items():
            results = bench_layer(
                name, layer, fast, naive, length, batch, repeats, args.max_gb * 1e9
            )
            table.append((name, length, results))
    for name, (layer, _, _) in layers.items():
        bench_step(name, layer, batch, 1024)
    print(
        "\n| layer | L | pass | parallel ms | recurrent ms | speed-up | parallel MB | recurrent MB |"
    )
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    for name, length, r in table:
        for kind in ("fwd", "fwd+bwd"):
            (p, p_mem), (q, q_mem) = r[("parallel", kind)], r[("recurrent", kind)]
            times = [f"{1e3 * t:.1f}" if t else "not run" for t in (p, q)]
            ratio = f"{q / p:.1f}×" if p and q else "–"
            mems = [f"{m / 2**20:.0f}" if m else "?" for m in (p_mem, q_mem)]
            print(
                f"| {name} | {length} | {kind} | {times[0]} | {times[1]} | {ratio} | "
                + " | ".join(mems)
                + " |"
            )


if __name__ == "__main__":
    main()
