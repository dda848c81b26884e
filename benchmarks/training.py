"""Overhead of the shared training loop and of the Flax NNX adapter.

1. `sciml.training.fit` (a jitted batch function drawing each step's batch,
   NaN guard, metrics, progress off) against a bare Python loop over the same jitted optax step with a fixed
   batch and key. Both after compilation; best of three runs of N steps.
2. The non-finite batch check of `fit` (`check_batch=True`, the default: one
   finite flag reduced over the batch inside the compiled step and read with
   the loss) against `check_batch=False`, and against the alternative of an
   eager `sciml._checks.check_finite` on every batch before the step (which
   waits for the batch each step). Same runs as 1, interleaved, best of five;
   plus XLA's cost analysis (flops, bytes accessed) of the compiled step with
   and without the flag, which does not depend on the machine's load.
3. One training step of an Equinox MLP wrapped by `sciml.interop.flax.to_nnx`
   under `nnx.jit` with `nnx.Optimizer`, against the same step with
   `eqx.filter_jit` and optax.

usage: python -m benchmarks.training [--quick] [--only fit_batch_check]
"""

from __future__ import annotations

import argparse
import time

import equinox as eqx
import jax
import jax.numpy as jnp
import optax
from flax import nnx

from benchmarks._common import block, emit, environment, time_fn
from sciml._checks import check_finite
from sciml.interop.flax import to_nnx
from sciml.training import TrainSettings, fit, make_optimizer, make_train_step


def _problem(width: int, batch: int):
    model = eqx.nn.MLP(64, 64, width, 3, activation=jax.nn.gelu, key=jax.random.key(0))
    x = jax.random.normal(jax.random.key(1), (batch, 64))
    y = jnp.sin(x)

    def loss_fn(model, batch, key):
        xb, yb = batch
        return jnp.mean((jax.vmap(model)(xb) - yb) ** 2), {}

    return model, (x, y), loss_fn


def _batch_fn(data, batch: int):
    """A jitted `(step, key) -> batch` drawing `batch` random rows of `data`."""

    @jax.jit
    def batch_fn(step, key):
        index = jax.random.randint(key, (batch,), 0, batch)
        return data[0][index], data[1][index]

    return batch_fn


def _seconds_per_fit_step(model, loss_fn, batch_fn, optimizer, n: int, **settings) -> float:
    """Wall seconds per step of an `n`-step `fit` run (no progress bar)."""
    start = time.perf_counter()
    result = fit(
        model,
        loss_fn,
        batch_fn,
        optimizer=optimizer,
        key=jax.random.key(2),
        settings=TrainSettings(steps=n, progress=False, log_every=100, **settings),
    )
    block(result.model)
    return (time.perf_counter() - start) / n


def bench_fit(width: int, batch: int, steps: int) -> dict:
    model, data, loss_fn = _problem(width, batch)
    optimizer = make_optimizer({"learning_rate": 1e-3})
    batch_fn = _batch_fn(data, batch)

    def run_fit(n):
        return _seconds_per_fit_step(model, loss_fn, batch_fn, optimizer, n)

    step = make_train_step(loss_fn, optimizer)  # the same cached step fit uses

    def run_bare(n):
        m, s = model, optimizer.init(eqx.filter(model, eqx.is_inexact_array))
        key = jax.random.key(0)
        start = time.perf_counter()
        for _ in range(n):
            m, s, loss, _ = step(m, s, data, key)
        block(m)
        return (time.perf_counter() - start) / n

    run_fit(10), run_bare(10)  # compile
    fit_step = min(run_fit(steps) for _ in range(3))
    bare_step = min(run_bare(steps) for _ in range(3))
    return {
        "fit_step_s": fit_step,
        "bare_step_s": bare_step,
        "ratio_fit_over_bare": fit_step / bare_step,
    }


def bench_batch_check(width: int, batch: int, steps: int) -> dict:
    model, data, loss_fn = _problem(width, batch)
    optimizer = make_optimizer({"learning_rate": 1e-3})
    batch_fn = _batch_fn(data, batch)

    def eager_checked(step, key):
        x, y = batch_fn(step, key)
        return check_finite("x", x), check_finite("y", y)

    def run(n, check_batch, fn=batch_fn):
        return _seconds_per_fit_step(model, loss_fn, fn, optimizer, n, check_batch=check_batch)

    variants = {
        "off": lambda n: run(n, False),
        "flag": lambda n: run(n, True),
        "eager": lambda n: run(n, False, eager_checked),
    }
    for fn in variants.values():
        fn(10)  # compile
    best = {name: float("inf") for name in variants}
    for _ in range(5):  # interleaved, so load on a shared machine hits all alike
        for name, fn in variants.items():
            best[name] = min(best[name], fn(steps))
    # Load-independent: XLA's cost analysis of the compiled step, with and without
    # the flag (the timings above are noisy on a shared machine).
    costs = {}
    opt_state = optimizer.init(eqx.filter(model, eqx.is_inexact_array))
    for check in (False, True):
        step = make_train_step(loss_fn, optimizer, check_batch=check)
        lowered = step.lower(model, opt_state, data, jax.random.key(0))
        cost = lowered.compile().compiled.cost_analysis()
        costs[check] = cost[0] if isinstance(cost, list) else cost
    return {
        "flops_ratio_flag": costs[True]["flops"] / costs[False]["flops"],
        "bytes_ratio_flag": costs[True]["bytes accessed"] / costs[False]["bytes accessed"],
        "step_no_check_s": best["off"],
        "step_flag_check_s": best["flag"],
        "step_eager_check_s": best["eager"],
        "flag_overhead": best["flag"] / best["off"] - 1,
        "eager_overhead": best["eager"] / best["off"] - 1,
    }


def bench_flax(width: int, batch: int) -> dict:
    model, (x, y), loss_fn = _problem(width, batch)
    tx = optax.adam(1e-3)

    @eqx.filter_jit
    def eqx_step(model, opt_state):
        loss, grads = eqx.filter_value_and_grad(lambda m: loss_fn(m, (x, y), None)[0])(model)
        updates, opt_state = tx.update(grads, opt_state, eqx.filter(model, eqx.is_inexact_array))
        return eqx.apply_updates(model, updates), opt_state

    opt_state = tx.init(eqx.filter(model, eqx.is_inexact_array))
    eqx_time = time_fn(eqx_step, model, opt_state)

    wrapped = to_nnx(model)
    optimizer = nnx.Optimizer(wrapped, tx, wrt=nnx.Param)

    @nnx.jit
    def nnx_step(model, optimizer):
        grads = nnx.grad(lambda m: loss_fn(m, (x, y), None)[0])(model)
        optimizer.update(model, grads)

    nnx_time = time_fn(nnx_step, wrapped, optimizer)
    return {
        "eqx_step_s": eqx_time["median_s"],
        "nnx_adapter_step_s": nnx_time["median_s"],
        "ratio_nnx_over_eqx": nnx_time["median_s"] / eqx_time["median_s"],
    }


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true", help="small sizes, a few seconds")
    parser.add_argument(
        "--only",
        choices=("fit_overhead", "fit_batch_check", "flax_adapter"),
        help="run one benchmark",
    )
    args = parser.parse_args()
    env = environment()
    sizes = [(64, 16)] if args.quick else [(64, 16), (256, 64), (1024, 256)]
    steps = 500 if args.quick else 2000
    benches = {
        "fit_overhead": lambda w, b: bench_fit(w, b, steps),
        "fit_batch_check": lambda w, b: bench_batch_check(w, b, steps),
        "flax_adapter": bench_flax,
    }
    for width, batch in sizes:
        for name, bench in benches.items():
            if args.only in (None, name):
                emit({"bench": name, "width": width, "batch": batch, **bench(width, batch), **env})


if __name__ == "__main__":
    main()
