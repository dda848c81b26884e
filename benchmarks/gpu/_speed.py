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
from benchmarks.gpu._rows import Clock, sweep


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


def _precision_modes() -> dict:
    """JAX's default matmul precision and, where torch imports, its two TF32 flags."""
    import jax

    modes = {
        "jax_default_matmul_precision": str(jax.config.jax_default_matmul_precision or "default")
    }
    try:
        import torch
    except ImportError:
        return modes
    modes["torch_matmul_allow_tf32"] = torch.backends.cuda.matmul.allow_tf32
    modes["torch_cudnn_allow_tf32"] = torch.backends.cudnn.allow_tf32
    return modes


def environment(smoke: bool, clock: Clock) -> None:
    """The device, versions and precision modes (the Markdown table's header)
    and what is missing."""
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
            **_precision_modes(),
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
    """The TFNO pairs (PyTorch's default precision on both sides), then dense FNO
    pairs at each width, grid and precision, smallest first. Without torch or
    neuraloperator, our dense steps alone, each with a note."""
    import jax
    import jax.numpy as jnp

    from benchmarks import operators

    env = jax_environment()
    try:
        import neuralop  # noqa: F401
        import torch  # noqa: F401
    except ImportError as err:
        missing = f"{err}"
    else:
        missing = None
    if smoke:
        size, hidden, modes, layers, batch, pairs = 16, 4, (4, 4), 1, 2, 1
        dense = [(16, 4, "float32"), (16, 4, "tf32")]
    else:
        size, hidden, modes, layers, batch, pairs = 128, 32, (16, 16), 4, 32, 5
        dense = [(g, h, p) for g in (128, 256) for h in (32, 64) for p in ("float32", "tf32")]
    if missing is None:
        common = dict(n_layers=layers, dtype=jnp.float32, key=jax.random.key(0))
        operators.bench_neuraloperator(size, hidden, modes, batch, common, env, pairs=pairs)

    def measure(case):
        grid, width, precision = case
        operators.bench_dense_pair(grid, width, modes, batch, layers, precision, env, pairs=pairs)

    def skip(case, note):
        grid, width, precision = case
        emit(
            {
                "model": "fno-dense",
                "grid": grid,
                "hidden": width,
                "precision": precision,
                "note": note,
            }
        )

    # the step's work grows with the area and the width
    sweep(dense, measure, clock, lambda a, b: (b[0] / a[0]) ** 2 * b[1] / a[1], skip)


def _pararnn_record(cell: str, length: int, hidden: int, batch: int, record: dict) -> None:
    emit({"cell": cell, "length": length, "hidden": hidden, "batch": batch, **record})


def _pararnn_sweep(cell_name, newton, hidden, smoke, clock, extra=None) -> None:
    """Newton against the best `Sequential(unroll=k)` at each (length, batch),
    lengths growing, both batches at each length; `extra(xs, record)` adds to a
    record (the torch GRU). Compilation is excluded from the sweep's prediction."""
    import jax
    import jax.numpy as jnp

    from benchmarks import pararnn

    if smoke:
        cases, unrolls, repeats = [(64, 2)], (1, 8), 1
    else:
        lengths = (1024, 4096, 16384, 65536) if cell_name == "paragru" else (1024, 4096, 16384)
        cases, unrolls, repeats = [(n, b) for n in lengths for b in (1, 16)], pararnn.UNROLLS, 3

    def measure(case):
        length, batch = case
        xs = jax.random.normal(jax.random.key(1), (batch, length, hidden), jnp.float32)
        record = pararnn.against_best_sequential(newton, xs, repeats, unrolls)
        if extra is not None:
            extra(xs, record)
        _pararnn_record(cell_name, length, hidden, batch, record)
        return record["compile_s"]

    def skip(case, note):
        emit({"cell": cell_name, "length": case[0], "batch": case[1], "note": note})

    # without compilation, a sequential evaluation's time grows with the length
    sweep(cases, measure, clock, lambda a, b: b[0] / a[0], skip)


def pararnn_newton(smoke: bool, clock: Clock) -> None:
    import jax
    import jax.numpy as jnp

    from sciml.pararnn import RNN, Fallback, Newton, ParaGRU, Sequential

    hidden = 8 if smoke else 64
    cell = ParaGRU(
        hidden, hidden, 4 if hidden >= 64 else 1, dtype=jnp.float32, key=jax.random.key(0)
    )
    _pararnn_sweep("paragru", RNN(cell, Fallback(Newton(), Sequential())), hidden, smoke, clock)


def pararnn_dense_gru(smoke: bool, clock: Clock) -> None:
    """DEER-style Newton on the dense GRU against the best unrolled scan and,
    where torch imports, `torch.nn.GRU` (cuDNN) with the same weights (outputs
    compared); without torch, a note."""
    import jax
    import jax.numpy as jnp
    import numpy as np

    from benchmarks import pararnn
    from sciml.pararnn import GRU, RNN, Fallback, Newton, Sequential

    hidden = 4 if smoke else 64
    cell = GRU(hidden, hidden, dtype=jnp.float32, key=jax.random.key(0))
    # DEER: Newton with the full Jacobian (the cell declares Dense()) from h_t = h_0
    newton = RNN(cell, Fallback(Newton(guess="h0"), Sequential()))
    forward = jax.jit(jax.vmap(newton))

    def with_torch(xs, record):
        try:
            theirs = pararnn.bench_torch_gru(cell, xs, 1 if smoke else 3)
        except ImportError as err:
            record["note"] = f"torch absent: {err}"
            return
        outputs = theirs.pop("outputs")
        record.update(theirs, **_precision_modes())
        record["torch_max_abs_difference"] = float(
            np.max(np.abs(np.asarray(forward(xs)) - outputs))
        )
        for kind in ("fwd", "fwdbwd"):
            record[f"speedup_{kind}_vs_torch"] = (
                record[f"torch_gru_{kind}_s"] / record[f"newton_{kind}_s"]
            )

    _pararnn_sweep("gru-dense", newton, hidden, smoke, clock, extra=with_torch)


def ssm_layers(smoke: bool, clock: Clock) -> None:
    """S4D and S5 against the per-token scan, the unrolled scans and `ChunkedScan`."""
    import jax
    import jax.numpy as jnp

    from benchmarks import ssm
    from sciml.ssm import S4D, S5

    H, N, batch, length, repeats = (8, 4, 2, 64, 1) if smoke else (128, 64, 8, 16384, 3)
    unrolls = (8,) if smoke else (8, 32, 128)
    key = jax.random.key(0)
    layers = {
        "S4D (FFT conv)": (S4D(H, N, dtype=jnp.float32, key=key), ssm.scan_s4d, ssm.naive_s4d),
        "S5 (assoc. scan)": (S5(H, N, dtype=jnp.float32, key=key), ssm.scan_s5, ssm.naive_s5),
    }
    for name, (layer, scan, naive) in layers.items():
        others = ssm.baselines(scan, naive, unrolls)
        ssm.bench_against_baselines(name, layer, lambda m, x: m(x), others, length, batch, repeats)


def mgtfno_memory(smoke: bool, clock: Clock) -> None:
    import jax
    import jax.numpy as jnp

    from benchmarks import operators
    from sciml.operators import FNO

    if smoke:
        grids, hidden, modes, layers, batch, levels = (32,), 4, (4, 4), 1, 2, (1,)
    else:
        grids, hidden, modes, layers, batch, levels = (256, 512), 32, (12, 12), 4, 8, (1, 2)
    common = dict(n_layers=layers, dtype=jnp.float32, key=jax.random.key(0))

    def measure(grid):
        models = [("fno-dense", FNO(modes, 1, 1, hidden, **common), False)]
        models += [
            (f"mgtfno-L{n}-stitched", operators.mgtfno(modes, hidden, n, common), False)
            for n in levels
        ]
        models.append(("mgtfno-L1-per-tile", operators.mgtfno(modes, hidden, 1, common), True))
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


def run_dcdm(dim: int, resolutions: tuple[int, ...], smoke: bool, clock: Clock) -> None:
    """The shipped weights of `dim` against CG, Jacobi- and device AMG-PCG on
    held-out seeds 101–104: `benchmarks.dcdm.bench_shipped` (compilation timed
    apart, one warm-up, the median of 3 timed solves, setup separate); a grid
    whose predicted time exceeds what the row has left is skipped with a note.
    IC(0)-PCG is left out: through its host callback it cost 2.35 s a solve
    at 256² on the H200 (320 iterations), 16 such solves a grid."""
    from benchmarks import dcdm

    methods = ("dcdm", "cg", "jacobi", "amg_device")
    if smoke:  # every method once in 2-D; the 3-D grid with the network and AMG
        resolutions, seeds = ((32,) if dim == 2 else (16,)), (101,)
        methods = methods if dim == 2 else ("dcdm", "amg_device")
    else:
        seeds = (101, 102, 103, 104)
    dcdm.bench_shipped(
        dim,
        resolutions,
        seeds,
        methods,
        rtol=1e-6,
        max_steps=6000,
        repeats=3,
        seconds_left=clock.left,
    )


def dcdm_solve(smoke: bool, clock: Clock) -> None:
    # the shipped weights (`sciml.dcdm.pretrained`), the model docs/results.md
    # reports: a model trained for the 70-s row (1,000 steps at 64², the first
    # H200 run) did not reach 1e-6 in 3,000 iterations at 256²
    run_dcdm(2, (256, 512, 1024), smoke, clock)


# The paper's scenes (Chen et al., ICML 2023) at its field sizes, with the
# points per iteration of its code, and its per-step times on its GPU (Adam,
# thousands of iterations a step): 240 advection steps in 5.33 h, 100
# Taylor–Green steps in 14.02 h, the stretch (one quasi-static solve) in 38.33 min.
INSR_SCENES = {
    "advection1d": ("insr_advection1d", 5000, 5.33 * 3600 / 240),
    "stretch": ("insr_stretch", 20000, 38.33 * 60),
    "taylor_green": ("insr_taylor_green", 16384, 14.02 * 3600 / 100),
}


def _insr_scene(name: str, smoke: bool):
    """`(config, field, integrator, problem, initial solver, dt, fields)` of a
    scene: the experiment's own build at the paper's field size (`fields`: the
    networks whose weights are the unknowns)."""
    import importlib

    config_name, n_points, _ = INSR_SCENES[name]
    configs = importlib.import_module(f"experiments.configs.{config_name}")
    task = importlib.import_module(f"experiments.tasks.insr.{config_name}")
    config = configs.get_config("tiny" if smoke else None)
    if not smoke:
        config.solver.n_points = n_points
    if name == "stretch" and not smoke:
        # the paper's 10⁴ random and 10⁴ grid points of its clamped stretch
        config.solver.n_points = config.solver.n_grid = n_points // 2
    config.initial.max_steps = min(int(config.initial.max_steps), 10)
    built = task.build(config)
    if name == "stretch":
        problem, field, integrator, initial, dt, _ = built
        fields = (field.network, None)  # its weights; the lifting's load scale is fixed
    else:
        (problem, field, integrator, initial), dt = built, float(config.problem.dt)
        fields = (field, getattr(integrator, "pressure", None))
    return config, field, integrator, problem, initial, dt, fields


def insr_step(smoke: bool, clock: Clock) -> None:
    """Seconds per implicit time step and per Levenberg–Marquardt iteration of
    the paper's three scenes at its field sizes (1-D advection, SIREN 2×20;
    Taylor–Green, 3×32 velocity and pressure, three sub-solves a step; the
    elasticity stretch, 3×68), float64, beside the paper's per-step times.
    One step (the tasks' jitted `insr.integrate`) is compiled ahead of time
    (timed apart), then run once. Cheapest scene first (Taylor–Green, three
    sub-solves a step, last); a scene is skipped with a note when under 20 s
    are left.
    Expected on the H200 (from the CPU's compile times and the first run's
    elasticity row): about 20–40 s of compilation a scene, seconds a step."""
    import equinox as eqx
    import jax
    import numpy as np

    from sciml import insr

    # the smoke run steps the stretch only (the scenes share this code; each
    # costs a compilation of tens of seconds on a CPU)
    names = ("stretch",) if smoke else tuple(INSR_SCENES)
    for name in names:
        paper_seconds = INSR_SCENES[name][2]
        if clock.left() < 20:
            emit({"scene": name, "note": f"skipped: {max(clock.left(), 0):.0f} s left"})
            continue
        with jax.enable_x64(True):
            config, field, integrator, problem, initial, dt, fields = _insr_scene(name, smoke)
            start = time.perf_counter()
            fit = eqx.filter_jit(insr.fit_initial)(
                field, problem, initial, key=jax.random.key(1), throw=False
            )
            jax.block_until_ready(fit.stats["loss"])
            fit_seconds = time.perf_counter() - start
            # one step of the tasks' call (`integrate_steps`), compiled ahead of time
            args = (fit.value, integrator, problem, 0.0, dt, dt)
            options = dict(key=jax.random.key(2), saveat=insr.SaveAt(t0=True, steps=True))
            start = time.perf_counter()
            step = eqx.filter_jit(insr.integrate).lower(*args, **options, throw=False).compile()
            compile_seconds = time.perf_counter() - start
            start = time.perf_counter()
            sol = step(*args, **options, throw=False)
            jax.block_until_ready(sol.stats["loss"])
            seconds = time.perf_counter() - start
            iterations = int(np.sum(np.asarray(sol.stats["iterations"])))
        n_params = sum(
            a.size for a in jax.tree_util.tree_leaves(eqx.filter(fields, eqx.is_inexact_array))
        )
        emit(
            {
                "scene": name,
                "n_params": int(n_params),
                "n_points": int(config.solver.n_points),
                "seconds_per_step": seconds,
                "compile_seconds": compile_seconds,
                "initial_fit_seconds": fit_seconds,
                "iterations": iterations,
                "seconds_per_iteration": seconds / max(iterations, 1),
                "paper_seconds_per_step": None if smoke else paper_seconds,
                "step_result": int(np.asarray(sol.stats["step_result"]).reshape(-1)[0]),
            }
        )


def online_ingestion(smoke: bool, clock: Clock) -> None:
    """The online heat study, trainer on the device, with 1, 4 and 14 solver
    processes on the CPUs (2 for the smoke run: the same loop once): one line each with the
    samples received per second of training and the trainer's wait fraction
    (the share of its time spent waiting for data). Each process runs 16
    solver runs of 100 steps (8 a job), the trainer 1,000 steps; a study is
    skipped with a note when under 30 s are left."""
    from experiments.configs import online_heat
    from experiments.tasks.online import online_heat as task

    for concurrency in (2,) if smoke else (1, 4, 14):
        if clock.left() < 30:
            emit(
                {
                    "concurrency": concurrency,
                    "note": f"skipped: {max(clock.left(), 0):.0f} s left",
                }
            )
            continue
        config = online_heat.get_config("tiny" if smoke else None)
        config.study.timeout = 30.0  # a silent solver is declared hung after this
        config.study.start_timeout = 30.0
        config.study.concurrency = concurrency
        config.train.progress = False
        if not smoke:
            config.study.runs_per_job = 8
            config.study.n_runs = 16 * concurrency
            config.study.n_validation = 4
            config.buffer.capacity = 6400
            config.buffer.watermark = 500
            config.train.steps = 1000
            config.train.eval_every = 1000
            config.train.checkpoint_every = 1000
        with tempfile.TemporaryDirectory() as workdir:
            (Path(workdir) / "plots").mkdir()
            summary = task.TASK.train_and_evaluate(config, workdir)
        seconds = summary["train_seconds"]
        emit(
            {
                **{k: v for k, v in summary.items() if isinstance(v, int | float | str | None)},
                "concurrency": concurrency,
                "samples_per_s": summary["samples_received"] / seconds,
                "steps_per_s": summary["steps"] / seconds,
            }
        )
