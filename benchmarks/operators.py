"""Neural-operator train steps and memory: dense FNO vs TFNO (CP / Tucker / TT), MG-TFNO.

1. One training step (forward, relative L2 loss, backward, Adam update) for a
   batch of 8 fields 1 -> 1 channel at 64², hidden 32, modes 12×12, 4 layers,
   grid embedding, GELU, channel MLP with soft-gating skip, linear FNO skip
   (neuraloperator's defaults). Models: dense FNO (the baseline) and TFNO with
   Tucker, CP and TT weights at rank 0.1, each with the "factorized" and the
   "reconstructed" contraction. Ratios are step time / dense FNO step time.
2. Peak memory (XLA's memory analysis of the compiled train step, per device)
   at 256², batch 8, for the dense FNO and for MG-TFNO (Tucker 0.1, levels 1
   and 2, padding 1/16), which maps 2^L × 2^L overlapping tiles plus context
   windows instead of the full field: (a) stitched, all tiles on one device;
   (b) stitched, tiles sharded over 4 (virtual CPU) devices; (c) per-tile
   training (`stitching=False`) with batches of 8 tiles, i.e. 8 model inputs
   of the tile size instead of 8 full fields.
3. Against neuraloperator (`--part neuraloperator`, optional): the TFNO step of
   part 1 (Tucker 0.1, factorized) beside neuraloperator's `TFNO` with the same
   architecture and parameter count, PyTorch's Adam and the same relative L2
   loss, timed in alternated pairs in this process, at the sizes users train
   at: 64² with batch 8, 128² with batch 16 and 256² with batch 4 (`--sizes`).
   Runs when `torch` and `neuraloperator` are importable (`pip install torch
   neuraloperator`), and is skipped with a message otherwise; only as
   `--part neuraloperator`, in a process with jax's one CPU device (parts 1
   and 2 run with 4 virtual devices, which slow a step by about 10 %).

`--reuse-host-memory` runs everything after `sciml.training.reuse_host_memory`
(freed host memory kept for reuse instead of unmapped; a CPU step then does not
page-fault its temporary buffer in again); records say `host_memory`.

Every record carries the machine's load; measure with nothing else running.

usage: python -m benchmarks.operators [--quick] [--part all|steps|memory|neuraloperator]
       [--pairs N] [--sizes 64x8,128x16,256x4] [--reuse-host-memory]
"""

import argparse
import functools
import importlib.metadata
import os
import sys

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import optax
from jax.sharding import Mesh, NamedSharding, PartitionSpec

from benchmarks._common import emit, environment, time_fn
from sciml.operators import FNO, MGTFNO, TFNO, gelu_exact, relative_lp_loss
from sciml.training import peak_memory_bytes, reuse_host_memory


def _n_params(model) -> int:
    leaves = jax.tree_util.tree_leaves(eqx.filter(model, eqx.is_inexact_array))
    return int(sum(x.size for x in leaves))


def _loss(static, x, y):
    """The relative L2 loss of the model `eqx.combine(params, static)` on a batch,
    as a function of `params`."""

    def loss(params):
        model = eqx.combine(params, static)
        return relative_lp_loss(jax.vmap(model)(x), y, d=y.ndim - 2, reduction="mean")

    return loss


def _train_step(optimizer, static):
    def step(params, opt_state, x, y):
        """One Adam step on the relative L2 loss; `static` is the non-array part."""
        value, grads = jax.value_and_grad(_loss(static, x, y))(params)
        updates, opt_state = optimizer.update(grads, opt_state, params)
        return optax.apply_updates(params, updates), opt_state, value

    return step


def _step_inputs(model, optimizer, batch, grid, channels=1):
    params, static = eqx.partition(model, eqx.is_inexact_array)
    x = jax.random.normal(jax.random.key(1), (batch, channels, *grid), jnp.float32)
    y = jnp.roll(x, 3, axis=-1)
    return params, static, optimizer.init(params), x, y


def bench_step(name, model, batch, grid):
    optimizer = optax.adam(1e-3)
    params, static, opt_state, x, y = _step_inputs(model, optimizer, batch, grid)
    step = jax.jit(_train_step(optimizer, static))
    timing = time_fn(step, params, opt_state, x, y, repeats=5, min_seconds=0.3)
    return {"model": name, "n_params": _n_params(model), **timing}


def bench_memory(name, model, batch, grid, per_tile=False):
    optimizer = optax.adam(1e-3)
    params, static, opt_state, x, y = _step_inputs(model, optimizer, batch, grid)
    if per_tile:
        # a step on `batch` tiles with their context channels: the model inputs
        # (the patching itself is data preparation, done once per field)
        window = jax.eval_shape(model.patch, x[0]).shape[1:]
        x = jax.random.normal(jax.random.key(2), (batch, *window), x.dtype)
        y = x[:, :1]

    def step(params, opt_state, x, y):
        def loss(params):
            model = eqx.combine(params, static)
            apply = model.model if per_tile else model
            return relative_lp_loss(jax.vmap(apply)(x), y, d=y.ndim - 2, reduction="mean")

        grads = jax.grad(loss)(params)
        updates, opt_state = optimizer.update(grads, opt_state, params)
        return optax.apply_updates(params, updates), opt_state

    memory = peak_memory_bytes(step, params, opt_state, x, y)
    return {
        "model": name,
        "n_params": _n_params(model),
        "peak_bytes": memory,
        "input_shape": list(x.shape),
    }


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small sizes (32², 2 layers)")
    parser.add_argument(
        "--part",
        choices=("all", "steps", "memory", "neuraloperator"),
        default="all",
        help="train-step times, peak memory, both, or the step against neuraloperator's",
    )
    parser.add_argument(
        "--pairs", type=int, default=5, help="alternated timing pairs (neuraloperator part)"
    )
    parser.add_argument(
        "--sizes",
        type=_grid_batches,
        default=None,
        help="GRIDxBATCH pairs for the neuraloperator part (default 64x8,128x16,256x4; "
        "32x4 with --quick)",
    )
    parser.add_argument(
        "--reuse-host-memory",
        action="store_true",
        help="call sciml.training.reuse_host_memory first (glibc keeps freed memory)",
    )
    args = parser.parse_args(argv)
    # before any computation, as it asks; both sides of a comparison run under it
    reused = args.reuse_host_memory and reuse_host_memory()
    if args.part in ("all", "memory"):
        # the sharded rows need 4 devices: virtual CPU devices on a one-CPU machine,
        # made before jax's backend starts. Not for the comparison with
        # neuraloperator: a step on 4 virtual devices takes 10 % longer than on the
        # one CPU device a user's process has (64², batch 8)
        jax.config.update("jax_num_cpu_devices", 4)
    env = {**environment(), "host_memory": "reuse" if reused else "default"}
    if args.quick:
        size, big, hidden, modes, layers, batch = 32, 64, 16, (8, 8), 2, 4
    else:
        size, big, hidden, modes, layers, batch = 64, 256, 32, (12, 12), 4, 8
    key = jax.random.key(0)
    common = dict(n_layers=layers, dtype=jnp.float32, key=key)

    if args.part in ("all", "steps"):
        bench_steps(size, hidden, modes, batch, common, env)
    if args.part in ("all", "memory"):
        bench_memories(big, hidden, modes, batch, common, env)
    if args.part == "all":
        print(
            "operators.neuraloperator skipped: run `--part neuraloperator` alone "
            "(timed on one CPU device, as a user's process has)",
            file=sys.stderr,
        )
    if args.part == "neuraloperator":
        default = ((size, batch),) if args.quick else ((64, 8), (128, 16), (256, 4))
        for grid, grid_batch in args.sizes or default:
            bench_neuraloperator(grid, hidden, modes, grid_batch, common, env, pairs=args.pairs)


def _grid_batches(text: str) -> tuple[tuple[int, int], ...]:
    """Parses `--sizes` ("64x8,128x16") into ((64, 8), (128, 16))."""
    try:
        pairs = tuple(tuple(int(v) for v in item.split("x")) for item in text.split(","))
    except ValueError:
        pairs = ()
    if not pairs or any(len(p) != 2 or min(p) < 1 for p in pairs):
        raise argparse.ArgumentTypeError(
            f"expected GRIDxBATCH pairs separated by commas, e.g. 64x8,128x16; got {text!r}"
        )
    return pairs


def bench_steps(size, hidden, modes, batch, common, env):
    """Train-step time of the dense FNO and the TFNOs, as ratios to the dense one."""
    baseline = None
    variants = [("fno-dense", dict(factorization=None), "factorized")]
    for factorization in ("tucker", "cp", "tt"):
        for implementation in ("factorized", "reconstructed"):
            variants.append(
                (
                    f"tfno-{factorization}-0.1-{implementation}",
                    dict(factorization=factorization, rank=0.1),
                    implementation,
                )
            )
    for name, kwargs, implementation in variants:
        model = FNO(modes, 1, 1, hidden, implementation=implementation, **kwargs, **common)
        record = bench_step(name, model, batch, (size, size))
        if baseline is None:
            baseline = record["median_s"]
        record.update(
            benchmark="operators.train_step",
            batch=batch,
            grid=size,
            ratio_to_dense=record["median_s"] / baseline,
            **env,
        )
        emit(record)


def mgtfno(modes, hidden, levels, common, **options):
    """The MG-TFNO of a one-channel field: a TFNO for one tile (Tucker, rank 0.1,
    global coordinates) wrapped with tile borders of 1/16."""
    tile_in = MGTFNO.tile_channels(1, len(modes), levels, "grid")
    tfno = TFNO(modes, tile_in, 1, hidden, positional_embedding=None, **common)
    return MGTFNO(tfno, levels=levels, padding_fraction=1 / 16, **options)


def bench_memories(big, hidden, modes, batch, common, env):
    """Peak memory of the dense FNO and MG-TFNO (stitched, sharded, per tile)."""
    dense_memory = None
    mesh = Mesh(np.array(jax.devices()[:4]), ("tiles",))
    sharding = NamedSharding(mesh, PartitionSpec("tiles"))
    memory_models = [("fno-dense", FNO(modes, 1, 1, hidden, **common), False)]
    for levels in (1, 2):
        memory_models += [
            (f"mgtfno-L{levels}-stitched", mgtfno(modes, hidden, levels, common), False),
            (
                f"mgtfno-L{levels}-stitched-sharded4",
                mgtfno(modes, hidden, levels, common, tile_sharding=sharding),
                False,
            ),
            (f"mgtfno-L{levels}-per-tile", mgtfno(modes, hidden, levels, common), True),
        ]
    for name, model, per_tile in memory_models:
        record = bench_memory(name, model, batch, (big, big), per_tile=per_tile)
        if dense_memory is None:
            dense_memory = record["peak_bytes"]
        record.update(
            benchmark="operators.peak_memory",
            batch=batch,
            grid=big,
            ratio_to_dense=(record["peak_bytes"] / dense_memory) if dense_memory else None,
            **env,
        )
        emit(record)


def _torch_tfno_step(size, hidden, modes, batch, n_layers, factorization="tucker"):
    """neuraloperator's TFNO train step (a dense `FNO` for `factorization=None`)
    on the inputs of `_step_inputs`, and its parameter count (None when torch or
    neuraloperator is missing)."""
    made, missing = _torch_tfno_phases(size, hidden, modes, batch, n_layers, factorization)
    if made is None:
        return None, missing
    phases, n_params, info = made
    return (phases["step"], n_params, info), None


def _torch_tfno_phases(size, hidden, modes, batch, n_layers, factorization="tucker"):
    """As `_torch_tfno_step`, with the step also cut after the forward loss and
    after the backward pass: `{"forward": f, "gradient": f, "step": f}`, each
    `() -> loss` (the forward with autograd on, as in training)."""
    try:
        import torch
        from neuralop.models import FNO as TorchFNO, TFNO
    except ImportError as err:
        return None, f"{err}"
    torch.manual_seed(0)
    shape = dict(n_modes=modes, in_channels=1, out_channels=1, hidden_channels=hidden)
    if factorization is None:
        model = TorchFNO(**shape, n_layers=n_layers)
    else:
        model = TFNO(
            **shape,
            n_layers=n_layers,
            factorization=factorization,
            rank=0.1,
            implementation="factorized",
        )
    # on the GPU when PyTorch sees one (the `.item()` below waits for the step)
    device = "cuda" if torch.cuda.is_available() else "cpu"
    model = model.to(device)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    x = torch.randn(batch, 1, size, size, device=device)
    y = torch.roll(x, 3, dims=-1)

    def loss():
        error = torch.linalg.vector_norm((model(x) - y).reshape(batch, -1), dim=1)
        return (error / torch.linalg.vector_norm(y.reshape(batch, -1), dim=1)).mean()

    def gradient():
        optimizer.zero_grad(set_to_none=True)
        value = loss()
        value.backward()
        return value.item()

    def step():
        value = gradient()
        optimizer.step()
        return value

    phases = {"forward": lambda: loss().item(), "gradient": gradient, "step": step}

    n_params = sum(
        p.numel() * (2 if p.is_complex() else 1) for p in model.parameters() if p.requires_grad
    )
    info = {
        "torch": torch.__version__,
        "neuraloperator": importlib.metadata.version("neuraloperator"),
        "torch_threads": torch.get_num_threads(),
        "xla_flags": os.environ.get("XLA_FLAGS", ""),
        "torch_device": device,
    }
    return (phases, n_params, info), None


def bench_neuraloperator(size, hidden, modes, batch, common, env, pairs=5):
    """Our TFNO step against neuraloperator's, in `pairs` alternated rounds."""
    made, missing = _torch_tfno_step(size, hidden, modes, batch, common["n_layers"])
    if made is None:
        print(
            f"operators.neuraloperator skipped: {missing} "
            "(install torch and neuraloperator to compare)",
            file=sys.stderr,
        )
        return
    torch_step, torch_params, info = made
    # neuraloperator's GELU is PyTorch's exact (erf) one: like for like is ours
    # with `gelu_exact` (the same function); beside it our default, jax.nn.gelu's
    # tanh approximation, jax's own exact form (what `gelu_exact` replaced) and
    # the FFT transform instead of the default (matrix products at these modes)
    variants = {
        "exact_gelu": (gelu_exact, "auto"),
        "tanh_gelu": (jax.nn.gelu, "auto"),
        "jax_erf_gelu": (functools.partial(jax.nn.gelu, approximate=False), "auto"),
        "exact_gelu_fft": (gelu_exact, "fft"),
    }
    steps = {}
    for name, (activation, transform) in variants.items():
        model = FNO(
            modes,
            1,
            1,
            hidden,
            factorization="tucker",
            rank=0.1,
            non_linearity=activation,
            transform=transform,
            **common,
        )
        optimizer = optax.adam(1e-3)
        params, static, opt_state, x, y = _step_inputs(model, optimizer, batch, (size, size))
        steps[name] = (jax.jit(_train_step(optimizer, static)), (params, opt_state, x, y))
    times = {name: [] for name in (*variants, "neuraloperator")}
    for _ in range(pairs):
        for name, (step, args) in steps.items():
            times[name].append(time_fn(step, *args, repeats=3, min_seconds=0.5)["median_s"])
        times["neuraloperator"].append(time_fn(torch_step, repeats=3, min_seconds=0.5)["median_s"])
    theirs = np.asarray(times["neuraloperator"])
    record = {
        "benchmark": "operators.neuraloperator_step",
        "model": "tfno-tucker-0.1-factorized",
        "n_params": _n_params(model),
        "n_params_neuraloperator": torch_params,
        "batch": batch,
        "grid": size,
        "neuraloperator_median_s": float(np.median(theirs)),
        **info,
        **env,
    }
    for name in variants:
        ratios = np.asarray(times[name]) / theirs
        record[f"ours_{name}_median_s"] = float(np.median(times[name]))
        record[f"ratio_{name}_to_neuraloperator"] = float(np.median(ratios))
        record[f"ratios_{name}"] = ratios.tolist()
    emit(record)


# both sides' float32 matrix products: full float32, or TF32 where the device has it
PRECISIONS = {
    "float32": ("highest", False),
    "tf32": ("tensorfloat32", True),
}


def bench_dense_pair(size, hidden, modes, batch, n_layers, precision, env, pairs=5):
    """Our dense FNO train step against neuraloperator's `FNO` (same width, modes,
    layers, exact GELU, Adam), both in `precision` (`PRECISIONS`: JAX's
    `default_matmul_precision`; PyTorch's `matmul.allow_tf32` and
    `cudnn.allow_tf32`), in `pairs` alternated rounds. Without torch or
    neuraloperator, our side alone with a note."""
    jax_precision, tf32 = PRECISIONS[precision]
    model = FNO(
        modes,
        1,
        1,
        hidden,
        n_layers=n_layers,
        non_linearity=functools.partial(jax.nn.gelu, approximate=False),
        dtype=jnp.float32,
        key=jax.random.key(0),
    )
    optimizer = optax.adam(1e-3)
    params, static, opt_state, x, y = _step_inputs(model, optimizer, batch, (size, size))
    jitted = jax.jit(_train_step(optimizer, static))

    def ours(*args):  # the precision is read when the step is traced: every call inside it
        with jax.default_matmul_precision(jax_precision):
            return jitted(*args)

    record = {
        "benchmark": "operators.dense_pair",
        "model": "fno-dense",
        "n_params": _n_params(model),
        "grid": size,
        "hidden": hidden,
        "batch": batch,
        "precision": precision,
        "jax_matmul_precision": jax_precision,
        **env,
    }
    made, missing = _torch_tfno_step(size, hidden, modes, batch, n_layers, factorization=None)
    if made is None:
        timing = time_fn(ours, params, opt_state, x, y, repeats=3, min_seconds=0.1)
        emit({**record, "ours_median_s": timing["median_s"], "note": f"torch side: {missing}"})
        return
    import torch

    torch.backends.cuda.matmul.allow_tf32 = tf32
    torch.backends.cudnn.allow_tf32 = tf32
    torch_step, torch_params, info = made
    times = {"ours": [], "neuraloperator": []}
    for _ in range(pairs):
        times["ours"].append(time_fn(ours, params, opt_state, x, y, repeats=3)["median_s"])
        times["neuraloperator"].append(time_fn(torch_step, repeats=3)["median_s"])
    ratios = np.asarray(times["ours"]) / np.asarray(times["neuraloperator"])
    emit(
        {
            **record,
            **info,
            "n_params_neuraloperator": torch_params,
            "torch_matmul_allow_tf32": torch.backends.cuda.matmul.allow_tf32,
            "torch_cudnn_allow_tf32": torch.backends.cudnn.allow_tf32,
            "ours_median_s": float(np.median(times["ours"])),
            "neuraloperator_median_s": float(np.median(times["neuraloperator"])),
            "ratio_to_neuraloperator": float(np.median(ratios)),
            "ratios": ratios.tolist(),
        }
    )


if __name__ == "__main__":
    main()
