"""The multilevel DCDM generator's network pass on the CPU: profile and per-iteration cost.

`sciml.dcdm.MultilevelDCDMNet` runs channels last with its transpose written
out (`sciml/dcdm/_channels_last.py`). This script compares it with the former
channels-first pass (`eqx.nn.Conv` on `(channels, *grid)`, `Nᵀ` by
`jax.linear_transpose`), with the same shipped weights
(`pretrained("poisson2d")`), in one process, alternating rounds:

- `iteration`: seconds per DCDM iteration inside `sciml.dcdm.solve` (a fixed
  number of steps of the compiled solve on the held-out scene seed 101, float64
  outer loop), for the channels-first and channels-last generators and for
  IC(0)-PCG, per grid size; the ratios are what to read on a loaded machine.
- `pass`: seconds per network pass `r ↦ NᵀN r` outside the loop (jit).
- `cost`: the compiled pass's FLOPs and bytes accessed (XLA's cost analysis),
  for the GPU expectation.
- `--profile`: the XLA operations taking the most time inside the solve loop,
  with jax's profiler, for both generators.

usage: python -m benchmarks.dcdm_network [--resolutions 64 128 256] [--steps 10]
       [--rounds 3] [--profile]
"""

from __future__ import annotations

import argparse
import functools
import time
import warnings

import jax


jax.config.update("jax_enable_x64", True)  # the float64 outer loop of the solve

import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

from benchmarks._common import emit, environment  # noqa: E402
from benchmarks.tfno_parts import _top, op_seconds  # noqa: E402
from sciml.dcdm import (  # noqa: E402
    DCDM,
    IncompleteCholesky,
    PrecisionWarning,
    avg_pool2,
    direction_fn,
    pretrained,
    solve,
    upsample2,
)
from solvers.poisson import FLUID, PoissonOperator, assemble, make_scene, random_rhs  # noqa: E402


def channels_first(net):
    """The former pass of `net`: `eqx.nn.Conv` layers on `(channels, *grid)`,
    `Nᵀ` by `jax.linear_transpose` (a callable with `net`'s signature)."""

    def smooth(convs, h):
        for conv in convs:
            h = h + conv(h)
        return h

    def vcycle(h):
        s = smooth(net.pre, h)
        if net.levels(s.shape[1:]) == 0:
            return smooth(net.coarse, s)
        return smooth(net.post, s + net.gain * upsample2(vcycle(avg_pool2(s))))

    def factor(x):
        return vcycle(net.stem(x))

    def apply(x):
        x = x.astype(net.dtype)
        (z,) = jax.linear_transpose(factor, x)(factor(x))
        return z[0]

    apply.dim, apply.dtype, apply.in_channels = net.dim, net.dtype, 1
    return apply


def _scene(resolution):
    labels = make_scene(resolution, dim=2, seed=101, n_obstacles=3, free_surface=True)
    b = jnp.asarray(random_rhs(labels, seed=101, kind="smooth"), jnp.float64)
    return labels, b


def _directions(net, labels):
    fluid = jnp.asarray(labels == FLUID, jnp.float32)
    return {
        "channels_first": direction_fn(channels_first(net), fluid),
        "channels_last": direction_fn(net, fluid),
        "ic0": IncompleteCholesky().build(assemble(labels), labels.shape),
    }


def _fixed_steps(labels, b, direction, steps):
    """The solve running exactly `steps` iterations, compiled for `b`."""
    op = PoissonOperator(labels)
    run = jax.jit(lambda b: solve(op, b, direction, DCDM(rtol=1e-30, max_steps=steps), throw=False))
    with warnings.catch_warnings():  # rtol below float64 on purpose: run every step
        warnings.simplefilter("ignore", PrecisionWarning)
        return run.lower(b).compile()


def _seconds(fn, arg):
    start = time.perf_counter()
    jax.block_until_ready(fn(arg))
    return time.perf_counter() - start


def per_iteration(net, resolution, steps, rounds):
    """Median seconds per solve iteration (and per pass outside the loop) by
    generator, rounds alternating between them."""
    labels, b = _scene(resolution)
    directions = _directions(net, labels)
    solves = {k: _fixed_steps(labels, b, f, steps) for k, f in directions.items()}
    passes = {k: jax.jit(directions[k]) for k in ("channels_first", "channels_last")}
    for fn in (*solves.values(), *passes.values()):  # compile
        jax.block_until_ready(fn(b))
    times = {f"iteration_{k}": [] for k in solves} | {f"pass_{k}": [] for k in passes}
    for _ in range(rounds):
        for k, fn in solves.items():
            times[f"iteration_{k}"].append(_seconds(fn, b) / steps)
        for k, fn in passes.items():
            times[f"pass_{k}"].append(min(_seconds(fn, b) for _ in range(5)))
    return {k: float(np.median(v)) for k, v in times.items()}


def cost(net, resolution):
    """XLA's FLOPs and bytes accessed for one pass `NᵀN r` (channels last)."""
    x = jnp.zeros((1, resolution, resolution), jnp.float32)
    analysis = jax.jit(lambda net, x: net(x)).lower(net, x).compile().cost_analysis()
    analysis = analysis[0] if isinstance(analysis, list) else analysis
    return {"flops": analysis["flops"], "bytes_accessed": analysis["bytes accessed"]}


def profile(net, resolution, steps):
    """Milliseconds per iteration of the top XLA operations inside the solve loop."""
    labels, b = _scene(resolution)
    out = {}
    for name, direction in _directions(net, labels).items():
        if name == "ic0":
            continue
        run = _fixed_steps(labels, b, direction, steps)
        jax.block_until_ready(run(b))
        totals = op_seconds(functools.partial(run, b), 1)
        # the spans that enclose the loop's operations are not operations
        totals = {k: v for k, v in totals.items() if not k.startswith(("while", "jit_", "Pjit"))}
        out[name] = _top(totals, steps)
    return out


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--resolutions", type=int, nargs="+", default=[64, 128, 256])
    parser.add_argument("--steps", type=int, default=10, help="solve iterations per timing")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--profile", action="store_true")
    args = parser.parse_args(argv)
    emit({"environment": environment()})
    net = pretrained("poisson2d")
    for n in args.resolutions:
        if args.profile:
            emit({"resolution": n, "profile_ms_per_iteration": profile(net, n, args.steps)})
            continue
        t = per_iteration(net, n, args.steps, args.rounds)
        ratios = {
            "first_over_last": t["iteration_channels_first"] / t["iteration_channels_last"],
            "last_over_ic0": t["iteration_channels_last"] / t["iteration_ic0"],
            "first_over_ic0": t["iteration_channels_first"] / t["iteration_ic0"],
        }
        emit({"resolution": n, "seconds": t, "ratios": ratios, "cost": cost(net, n)})


if __name__ == "__main__":
    main()
