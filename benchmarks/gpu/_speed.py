"""`--part speed`: our code against its baseline in the same process, per row.

Each function is one row of `_rows.ROWS` (`run(smoke, clock)`); it calls the
benchmark scripts' own measuring functions at the suite's sizes and prints
JSON lines. `smoke` picks tiny sizes that take the same code paths.
"""

from __future__ import annotations

import os
import platform
import tempfile
import time
from importlib import metadata
from pathlib import Path

from benchmarks._common import emit, environment as jax_environment
from benchmarks.gpu._rows import Clock, RowSkipped, sweep


# what the rows import beyond the GPU machine's own packages (see `carry.py`), and torch
PACKAGES = (
    "pyzmq",
    "pyamg",
    "ml-collections",
    "neuraloperator",
    "tensorly",
    "tensorly-torch",
    "requests",
    "torch",
)


def _version(distribution: str) -> str | None:
    try:
        return metadata.version(distribution)
    except metadata.PackageNotFoundError:
        return None


def environment(smoke: bool, clock: Clock) -> None:
    """The device and versions (the Markdown table's header) and what is missing."""
    import jax

    device = jax.devices()[0]
    memory = (
        (device.memory_stats() or {}).get("bytes_limit")
        if hasattr(device, "memory_stats")
        else None
    )
    versions = {name: _version(name) for name in PACKAGES}
    emit(
        {
            **jax_environment(),
            "device_count": jax.device_count(),
            "device_memory_bytes": memory,
            "cpus": os.cpu_count(),
            "machine": platform.machine(),
            "torch": versions["torch"],
            "neuraloperator": versions["neuraloperator"],
            "versions": versions,
            "missing": sorted(name for name, v in versions.items() if v is None),
        }
    )


def tfno_vs_neuraloperator(smoke: bool, clock: Clock) -> None:
    import jax
    import jax.numpy as jnp

    from benchmarks import operators

    try:
        import neuralop  # noqa: F401
        import torch  # noqa: F401
    except ImportError as err:
        raise RowSkipped(
            f"not run: {err} (torch and neuraloperator must be importable; "
            "see `python -m benchmarks.gpu.carry`)"
        ) from err
    if smoke:
        size, hidden, modes, layers, batch, pairs = 16, 4, (4, 4), 1, 2, 1
    else:
        size, hidden, modes, layers, batch, pairs = 128, 32, (16, 16), 4, 32, 5
    common = dict(n_layers=layers, dtype=jnp.float32, key=jax.random.key(0))
    operators.bench_neuraloperator(
        size, hidden, modes, batch, common, jax_environment(), pairs=pairs
    )


def _pararnn_record(cell: str, length: int, hidden: int, batch: int, record: dict) -> None:
    emit({"cell": cell, "length": length, "hidden": hidden, "batch": batch, **record})


def pararnn_newton(smoke: bool, clock: Clock) -> None:
    from benchmarks import pararnn

    hidden, batch = (8, 1) if smoke else (64, 1)
    lengths = (64,) if smoke else (4096, 16384, 65536)
    repeats = 1 if smoke else 3

    def measure(length):
        record = pararnn.bench_one("paragru", length, hidden, batch, repeats)
        _pararnn_record("paragru", length, hidden, batch, record)

    def skip(length, note):
        emit({"cell": "paragru", "length": length, "hidden": hidden, "note": note})

    # compilation (the same at every length) is most of a row's time on a GPU:
    # predicted cost √(length ratio) × the last length's seconds
    sweep(lengths, measure, clock, lambda a, b: (b / a) ** 0.5, skip)


def pararnn_dense_gru(smoke: bool, clock: Clock) -> None:
    import jax
    import jax.numpy as jnp

    from benchmarks import pararnn
    from sciml.pararnn import GRU, RNN, Fallback, Newton, Sequential

    hidden, length, batch = (4, 128, 1) if smoke else (64, 16384, 1)
    key_cell, key_x = jax.random.split(jax.random.key(0))
    cell = GRU(hidden, hidden, dtype=jnp.float32, key=key_cell)
    # DEER: Newton with the full Jacobian (the cell declares Dense()) from h_t = h_0
    sequential, newton = (
        RNN(cell, Sequential()),
        RNN(cell, Fallback(Newton(guess="h0"), Sequential())),
    )
    xs = jax.random.normal(key_x, (batch, length, hidden), jnp.float32)
    record = pararnn.compare_layers(sequential, newton, xs, 1 if smoke else 3)
    _pararnn_record("gru-dense", length, hidden, batch, record)


def ssm_layers(smoke: bool, clock: Clock) -> None:
    import jax
    import jax.numpy as jnp

    from benchmarks import ssm
    from sciml.ssm import S4D, S5

    H, N, batch, length, repeats = (8, 4, 2, 64, 1) if smoke else (128, 64, 8, 16384, 3)
    key = jax.random.key(0)
    layers = {
        "S4D (FFT conv)": (S4D(H, N, dtype=jnp.float32, key=key), ssm.naive_s4d),
        "S5 (assoc. scan)": (S5(H, N, dtype=jnp.float32, key=key), ssm.naive_s5),
    }
    for name, (layer, naive) in layers.items():
        ssm.bench_layer(name, layer, lambda m, x: m(x), naive, length, batch, repeats, 40e9)


def mgtfno_memory(smoke: bool, clock: Clock) -> None:
    import jax
    import jax.numpy as jnp

    from benchmarks import operators
    from sciml.operators import FNO, MGTFNO

    if smoke:
        grids, hidden, modes, layers, batch, levels = (32,), 4, (4, 4), 1, 2, (1,)
    else:
        grids, hidden, modes, layers, batch, levels = (256, 512), 32, (12, 12), 4, 8, (1, 2)
    common = dict(n_layers=layers, dtype=jnp.float32, key=jax.random.key(0))

    def measure(grid):
        mg = dict(padding_fraction=1 / 16, **common)
        models = [("fno-dense", FNO(modes, 1, 1, hidden, **common), False)]
        models += [
            (f"mgtfno-L{n}-stitched", MGTFNO(modes, 1, 1, hidden, levels=n, **mg), False)
            for n in levels
        ]
        models.append(("mgtfno-L1-per-tile", MGTFNO(modes, 1, 1, hidden, levels=1, **mg), True))
        dense = {}
        for name, model, per_tile in models:
            record = operators.bench_memory(name, model, batch, (grid, grid), per_tile=per_tile)
            if not per_tile:  # the stitched step, timed
                step = operators.bench_step(name, model, batch, (grid, grid))
                record.update(median_s=step["median_s"], compile_s=step["compile_s"])
            dense = dense or record
            record.update(
                grid=grid,
                batch=batch,
                ratio_to_dense=_ratio(record["peak_bytes"], dense["peak_bytes"]),
                step_ratio_to_dense=_ratio(record.get("median_s"), dense["median_s"]),
            )
            emit(record)

    def skip(grid, note):
        emit({"grid": grid, "model": "all", "note": note})

    # the step's work grows with the area; compilation does not: predicted 2× per doubling
    sweep(grids, measure, clock, lambda a, b: b / a, skip)


def _ratio(a, b):
    return a / b if a is not None and b else None


def run_dcdm(arguments: str, smoke: bool) -> None:
    """`python -m benchmarks.dcdm ARGUMENTS` against CG and IC(0), in a scratch
    folder (`--quick`, its tiny config, for the smoke run)."""
    from benchmarks import dcdm

    args = arguments.split()
    if smoke:
        pretrained = ["--pretrained"] if "--pretrained" in args else []
        dim = ["--dim", "3"] if "--dim 3" in arguments else []
        args = ["--quick", *pretrained, *dim]
    with tempfile.TemporaryDirectory() as workdir:
        dcdm.main([*args, "--methods", "dcdm", "cg", "ic0", "--workdir", workdir])


def dcdm_solve(smoke: bool, clock: Clock) -> None:
    # the shipped weights (`sciml.dcdm.pretrained`), the model docs/results.md
    # reports: a model trained for the 70-s row (1,000 steps at 64², the first
    # H200 run) did not reach 1e-6 in 3,000 iterations at 256²
    run_dcdm("--pretrained --resolutions 256 512 --max-steps 3000", smoke)


def insr_step(smoke: bool, clock: Clock) -> None:
    """Seconds per implicit time step (one Levenberg–Marquardt solve) of the
    elasticity stretch, compiled once, timed on a second call."""
    import equinox as eqx
    import jax
    import numpy as np

    from experiments.configs import insr_elasticity as configs
    from experiments.tasks.insr import insr_elasticity as task
    from experiments.tasks.insr.insr_common import integrate_steps
    from sciml import insr

    config = configs.get_config("tiny" if smoke else None)
    config.initial.max_steps = min(int(config.initial.max_steps), 10)
    with jax.enable_x64(True):
        problem, field, integrator, initial, dt, _ = task.build(config)
        fit = eqx.filter_jit(insr.fit_initial)(
            field, problem, initial, key=jax.random.key(1), throw=False
        )
        times = []
        for _ in range(2):  # compile + run, then run (the task's jitted `integrate`)
            start = time.perf_counter()
            sol = integrate_steps(fit.value, integrator, problem, dt, dt, jax.random.key(2))
            jax.block_until_ready(sol.stats["loss"])
            times.append(time.perf_counter() - start)
        iterations = int(np.sum(sol.stats["iterations"]))
    n_params = sum(a.size for a in jax.tree_util.tree_leaves(eqx.filter(field, eqx.is_array)))
    emit(
        {
            "scene": config.problem.scene,
            "n_params": int(n_params),
            "n_points": int(config.solver.n_points),
            "seconds_per_step": times[1],
            "compile_seconds": times[0] - times[1],
            "iterations": iterations,
            "seconds_per_iteration": times[1] / max(iterations, 1),
            "step_result": int(np.asarray(sol.stats["step_result"])[0]),
        }
    )


def online_ingestion(smoke: bool, clock: Clock) -> None:
    """The online heat study, trainer on the device, solver processes on the CPUs."""
    from experiments.configs import online_heat
    from experiments.tasks.online import online_heat as task

    config = online_heat.get_config("tiny" if smoke else None)
    config.study.timeout = 30.0  # a silent solver is declared hung after this
    config.study.start_timeout = 30.0
    config.train.progress = False
    if not smoke:
        config.study.n_runs = 64
        config.study.runs_per_job = 8
        config.study.concurrency = min(8, max((os.cpu_count() or 2) - 2, 1))
        config.study.n_validation = 4
        config.buffer.capacity = 6400
        config.buffer.watermark = 500
        config.train.steps = 1000
        config.train.eval_every = 1000
        config.train.checkpoint_every = 1000
    with tempfile.TemporaryDirectory() as workdir:
        (Path(workdir) / "plots").mkdir()
        summary = task.train_and_evaluate(config, workdir)
    seconds = summary["train_seconds"]
    emit(
        {
            **{k: v for k, v in summary.items() if isinstance(v, int | float | str | None)},
            "samples_per_s": summary["samples_received"] / seconds,
            "steps_per_s": summary["steps"] / seconds,
            "concurrency": int(config.study.concurrency),
        }
    )
