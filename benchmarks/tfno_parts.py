"""The TFNO train step's parts, ours (XLA CPU) against PyTorch's, one at a time.

`benchmarks.operators --part neuraloperator` times whole train steps; this
script finds which operation makes the difference. Each part runs forward and
backward (the gradient of `Σ out ⊙ g` for a fixed random `g`), at the shapes one
FNO block sees (batch B, hidden channels C, an N × N grid, 12 × 12 modes):

- `fft_pair`: the spectral convolution's transforms without the weight: the
  kept modes of the real FFT and the inverse FFT of them zero-filled. Ours is
  `forward_modes` + `inverse_rfftn` (pruned FFTs, `transform="fft"`),
  PyTorch's is neuraloperator's `rfftn`, mode slices, zero-filled `irfftn`.
- `dft_pair`: the same with ours by matrix products (`transform="dft"`, the
  default at these mode counts), against the same PyTorch FFTs.
- `pointwise`: one 1×1 convolution C → C with bias. Ours is
  `PointwiseLinear` vmapped over the batch; PyTorch's `nn.Conv1d(C, C, 1)` on
  the flattened grid, as neuraloperator's `ChannelMLP`.
- `gelu_tanh`, `gelu_erf`: the activation on a `(B, C, N, N)` array;
  `gelu_exact`: ours by `sciml.operators.gelu_exact` (the erf form with its
  derivative written out) against the same PyTorch GELU as `gelu_erf`.

Ours and PyTorch's alternate in `--pairs` rounds in one process; the ratio is
ours / PyTorch's per round (median reported). Needs `torch`; measure on a
quiet machine (every record carries the load).

`--phases` times whole train steps of both sides cut in three, the forward
loss, the backward pass and the optimiser update, in alternated rounds.

`--profile` instead profiles the whole train steps of `benchmarks.operators
--part neuraloperator` (ours with jax's profiler, neuraloperator's with
PyTorch's) and prints the operations that take the most time per step, by
name (XLA's HLO operation names with their numeric suffix removed; PyTorch's
`aten` operators, self time). `--hlo` prints, for our step, the bytes that
the compiled program's `copy` fusions (layout changes) write, by the jax
operation they come from.

usage: python -m benchmarks.tfno_parts [--sizes 64x8,128x16,256x4] [--pairs N]
       [--phases | --profile | --hlo] [--reuse-host-memory]
"""

import argparse
import functools
import gzip
import json
import pathlib
import re
import sys
import tempfile

import jax
import jax.numpy as jnp
import numpy as np
import optax

from benchmarks._common import emit, environment, time_fn
from benchmarks.operators import (
    _grid_batches,
    _loss,
    _step_inputs,
    _torch_tfno_phases,
    _train_step,
)
from sciml.operators import FNO, gelu_exact
from sciml.operators._dft import dft_forward_modes, dft_inverse
from sciml.operators._layers import PointwiseLinear
from sciml.operators._spectral import _fill_leading_axes, forward_modes, inverse_rfftn
from sciml.training import reuse_host_memory


MODES = (12, 12)


def _ours(size, channels, batch):
    """Our parts as jitted `(x, g) -> (Σ out ⊙ g, ∂/∂x)` functions."""
    grid = (size, size)
    linear = PointwiseLinear(channels, channels, key=jax.random.key(1))

    def fft_pair(x):
        block = forward_modes(x, MODES)
        return inverse_rfftn(_fill_leading_axes(block, MODES, grid), grid)

    def dft_pair(x):
        return dft_inverse(dft_forward_modes(x, MODES), MODES, grid)

    per_sample = {
        "fft_pair": fft_pair,
        "dft_pair": dft_pair,
        "pointwise": linear,
        "gelu_tanh": jax.nn.gelu,
        "gelu_erf": functools.partial(jax.nn.gelu, approximate=False),
        "gelu_exact": gelu_exact,
    }

    def value_and_grad(fn):
        return jax.jit(jax.value_and_grad(lambda x, g: jnp.sum(jax.vmap(fn)(x) * g)))

    return {name: value_and_grad(fn) for name, fn in per_sample.items()}


def _theirs(size, channels, batch):
    """PyTorch's parts, as neuraloperator 2.0 writes them, as `(x, g) -> None`."""
    import torch

    torch.manual_seed(0)
    conv = torch.nn.Conv1d(channels, channels, 1)
    rows, cols = MODES[0] // 2, MODES[1] // 2 + 1

    def fft_pair(x):
        x_hat = torch.fft.rfftn(x, norm="forward", dim=(-2, -1))
        out = torch.zeros((*x.shape[:-1], size // 2 + 1), dtype=x_hat.dtype, device=x.device)
        out[..., :rows, :cols] = x_hat[..., :rows, :cols]
        out[..., -rows:, :cols] = x_hat[..., -rows:, :cols]
        return torch.fft.irfftn(out, s=(size, size), norm="forward", dim=(-2, -1))

    parts = {
        "fft_pair": fft_pair,
        "dft_pair": fft_pair,
        "pointwise": lambda x: conv(x.reshape(batch, channels, -1)).reshape(x.shape),
        "gelu_tanh": lambda x: torch.nn.functional.gelu(x, approximate="tanh"),
        "gelu_erf": torch.nn.functional.gelu,
        "gelu_exact": torch.nn.functional.gelu,
    }

    def backward(fn):
        def run(x, g):
            x.grad = None
            (fn(x) * g).sum().backward()
            return x.grad

        return run

    return {name: backward(fn) for name, fn in parts.items()}, torch


def bench(size, batch, channels, pairs, env):
    """One record per part: our and PyTorch's median seconds and their ratio."""
    ours = _ours(size, channels, batch)
    theirs, torch = _theirs(size, channels, batch)
    rng = np.random.default_rng(0)
    x, g = (rng.standard_normal((batch, channels, size, size), np.float32) for _ in range(2))
    jx, jg = jnp.asarray(x), jnp.asarray(g)
    tx, tg = torch.from_numpy(x).requires_grad_(True), torch.from_numpy(g)
    for name in ours:
        times = {"ours": [], "torch": []}
        for _ in range(pairs):
            times["ours"].append(time_fn(ours[name], jx, jg, repeats=5)["median_s"])
            times["torch"].append(time_fn(theirs[name], tx, tg, repeats=5)["median_s"])
        ratios = np.asarray(times["ours"]) / np.asarray(times["torch"])
        emit(
            {
                "benchmark": "operators.tfno_parts",
                "part": name,
                "grid": size,
                "batch": batch,
                "channels": channels,
                "ours_median_s": float(np.median(times["ours"])),
                "torch_median_s": float(np.median(times["torch"])),
                "ratio_median": float(np.median(ratios)),
                "ratios": ratios.tolist(),
                "torch": torch.__version__,
                "torch_threads": torch.get_num_threads(),
                **env,
            }
        )


def _phase_fns(size, batch):
    """Both sides' train step cut after the forward loss and after the backward
    pass, as `{"forward": f, "gradient": f, "step": f}` (each `() -> value`)."""
    optimizer, static, params, opt_state, x, y = _our_setup(size, batch)
    loss = _loss(static, x, y)
    forward, gradient = jax.jit(loss), jax.jit(jax.value_and_grad(loss))
    step = jax.jit(_train_step(optimizer, static))
    ours = {
        "forward": lambda: forward(params),
        "gradient": lambda: gradient(params),
        "step": lambda: step(params, opt_state, x, y),
    }
    (theirs, _, _), _ = _torch_tfno_phases(size, 32, MODES, batch, n_layers=4)
    return ours, theirs


def phases(size, batch, pairs, env):
    """Seconds of the forward loss, the backward pass and the optimiser update of
    a train step, ours and neuraloperator's, medians over `pairs` alternated
    rounds (backward = gradient − forward, update = step − gradient)."""
    ours, theirs = _phase_fns(size, batch)
    times = {(who, cut): [] for who in ("ours", "theirs") for cut in ours}
    for _ in range(pairs):
        for cut in ours:
            for who, fns in (("ours", ours), ("theirs", theirs)):
                times[who, cut].append(time_fn(fns[cut], repeats=3, min_seconds=0.3)["median_s"])
    record = {"benchmark": "operators.tfno_phases", "grid": size, "batch": batch, **env}
    for who in ("ours", "theirs"):
        med = {cut: float(np.median(times[who, cut])) for cut in ours}
        record[f"{who}_forward_s"] = med["forward"]
        record[f"{who}_backward_s"] = med["gradient"] - med["forward"]
        record[f"{who}_update_s"] = med["step"] - med["gradient"]
        record[f"{who}_step_s"] = med["step"]
    emit(record)


def _top(totals: dict[str, float], steps: int, n: int = 12) -> list[tuple[str, float]]:
    """The `n` largest entries of `totals` (seconds), as milliseconds per step."""
    ranked = sorted(totals.items(), key=lambda item: -item[1])[:n]
    return [(name, 1e3 * seconds / steps) for name, seconds in ranked]


def _profile_ours(size, batch, steps):
    """Seconds per HLO operation name (suffix removed) over `steps` train steps."""
    step, args = _our_step(size, batch)
    for _ in range(3):
        jax.block_until_ready(step(*args))
    return op_seconds(lambda: step(*args), steps)


def op_seconds(run, calls: int) -> dict[str, float]:
    """Seconds per XLA operation name (numeric suffix removed) over `calls`
    calls of `run()`, from jax's profiler (compile `run` first)."""
    with tempfile.TemporaryDirectory() as logdir:
        with jax.profiler.trace(logdir, create_perfetto_trace=True):
            for _ in range(calls):
                jax.block_until_ready(run())
        (trace,) = pathlib.Path(logdir).rglob("perfetto_trace.json.gz")
        events = json.load(gzip.open(trace))
    events = events["traceEvents"] if isinstance(events, dict) else events
    totals: dict[str, float] = {}
    for event in events:
        name = event.get("name", "")
        # XLA's operations only: not the Python frames (`$file:line`) and the
        # executor's spans (`ThunkExecutor::Execute`) that enclose them
        if (
            event.get("ph") == "X"
            and "dur" in event
            and not name.startswith("$")
            and "::" not in name
        ):
            name = re.sub(r"[._]\d+$", "", name)
            totals[name] = totals.get(name, 0.0) + event["dur"] * 1e-6
    return totals


def _our_setup(size, batch):
    """The like-for-like model of `benchmarks.operators --part neuraloperator`
    (the exact GELU), its Adam, and the inputs of its train step."""
    model = FNO(
        MODES,
        1,
        1,
        32,
        factorization="tucker",
        rank=0.1,
        n_layers=4,
        non_linearity=gelu_exact,
        key=jax.random.key(0),
    )
    optimizer = optax.adam(1e-3)
    params, static, opt_state, x, y = _step_inputs(model, optimizer, batch, (size, size))
    return optimizer, static, params, opt_state, x, y


def _our_step(size, batch):
    """Our jitted TFNO train step (the like-for-like model) and its inputs."""
    optimizer, static, params, opt_state, x, y = _our_setup(size, batch)
    return jax.jit(_train_step(optimizer, static)), (params, opt_state, x, y)


def copy_bytes(size, batch, top=12):
    """Bytes written per step by the compiled step's `copy*` fusions (layout
    changes, with whatever XLA fused into them), by the jax operation named in
    their metadata and their shape, largest first."""
    step, args = _our_step(size, batch)
    text = step.lower(*args).compile().as_text()
    pattern = re.compile(
        r"\s*(?:ROOT )?%copy\w*[.\d]* = (\w+)\[([\d,]*)\]\{[^}]*\} fusion\(.*op_name=\"([^\"]*)\""
    )
    itemsize = {"f32": 4, "c64": 8, "f64": 8, "c128": 16}
    totals: dict[tuple[str, str], int] = {}
    for line in text.splitlines():
        match = pattern.match(line)
        if match:
            dtype, shape, op = match.groups()
            n = int(np.prod([int(s) for s in shape.split(",") if s]))
            key = (op.removeprefix("jit(step)/"), f"{dtype}[{shape}]")
            totals[key] = totals.get(key, 0) + n * itemsize.get(dtype, 4)
    return sorted(totals.items(), key=lambda item: -item[1])[:top], sum(totals.values())


def _profile_theirs(size, batch, steps):
    """Self seconds per `aten` operator over `steps` neuraloperator train steps."""
    import torch

    from benchmarks.operators import _torch_tfno_step

    (step, _, _), _ = _torch_tfno_step(size, 32, MODES, batch, 4)
    for _ in range(3):
        step()
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
        for _ in range(steps):
            step()
    return {e.key: e.self_cpu_time_total * 1e-6 for e in prof.key_averages()}


def profile(size, batch, env, steps=10):
    """Prints and emits the top operations per step, ours and neuraloperator's."""
    for who, totals in (
        ("ours", _profile_ours(size, batch, steps)),
        ("neuraloperator", _profile_theirs(size, batch, steps)),
    ):
        top = _top(totals, steps)
        print(f"{who}, {size}² batch {batch}: ms per step by operation", file=sys.stderr)
        for name, ms in top:
            print(f"  {ms:8.2f}  {name}", file=sys.stderr)
        emit(
            {
                "benchmark": "operators.tfno_profile",
                "who": who,
                "grid": size,
                "batch": batch,
                "top_ms_per_step": top,
                **env,
            }
        )


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=_grid_batches, default=((64, 8), (128, 16), (256, 4)))
    parser.add_argument("--channels", type=int, default=32)
    parser.add_argument("--pairs", type=int, default=5)
    parser.add_argument("--profile", action="store_true", help="profile whole train steps")
    parser.add_argument("--hlo", action="store_true", help="bytes of our step's layout copies")
    parser.add_argument(
        "--phases", action="store_true", help="forward, backward and update of whole steps"
    )
    parser.add_argument(
        "--reuse-host-memory",
        action="store_true",
        help="call sciml.training.reuse_host_memory first (as benchmarks.operators)",
    )
    args = parser.parse_args(argv)
    reused = args.reuse_host_memory and reuse_host_memory()
    if args.hlo:
        for size, batch in args.sizes:
            top, total = copy_bytes(size, batch)
            print(f"{size}² batch {batch}: copy fusions write {total / 1e6:.0f} MB per step")
            for (op, shape), n in top:
                print(f"  {n / 1e6:8.1f} MB  {shape:20s} {op}")
        return
    try:
        import torch  # noqa: F401
    except ImportError as err:
        print(f"operators.tfno_parts skipped: {err} (install torch)", file=sys.stderr)
        return
    env = {**environment(), "host_memory": "reuse" if reused else "default"}
    for size, batch in args.sizes:
        if args.profile:
            profile(size, batch, env)
        elif args.phases:
            phases(size, batch, args.pairs, env)
        else:
            bench(size, batch, args.channels, args.pairs, env)


if __name__ == "__main__":
    main()
