"""The rows of the GPU suite: what each measures, its baseline, its time budget.

A row is a function `run(smoke, clock)` (those of the suite are in `_speed.py`
and `_paper.py`) that
prints its measurements as JSON lines (`benchmarks._common.emit`) as soon as
each is made. It runs in its own subprocess (`_child.py`), so a row that
overruns its budget is stopped without losing what it printed, and a crash or
the GPU memory it holds ends with it. Inside, `clock` says how many seconds the
row has left, so a sweep can skip its next, larger size with a note instead of
being stopped half-way (`sweep`).
"""

from __future__ import annotations

import dataclasses
import importlib
import time
from collections.abc import Callable, Iterable
from typing import Any


class RowSkipped(Exception):
    """Raised by a row that cannot run here (a package is missing); the message is its note."""


@dataclasses.dataclass(frozen=True)
class Clock:
    """The time a row has left: `deadline` is a `time.time()` value."""

    deadline: float

    def left(self) -> float:
        return self.deadline - time.time()


@dataclasses.dataclass(frozen=True)
class Row:
    """One row of the suite.

    - `name`: its name on the command line and in the results.
    - `part`: `"speed"`, `"paper"` or `"both"`.
    - `run`: `"package.module:function"`, called as `run(smoke, clock)`.
    - `budget_s`: seconds it may run on the GPU (it is stopped after that);
      `smoke_budget_s` the same for `--smoke`.
    - `needs_s`: the predicted least time in which it returns something
      useful; it is skipped when less than that is left of the suite's limit
      (default: half its budget).
    - `measures`, `baseline`: one line each for the table and the docs.
    - `columns`: the record keys shown in the Markdown table.
    - `smoke_fast_compile`: whether `--smoke` compiles it without XLA's costly
      CPU optimisations (off for rows whose smoke run is mostly running code,
      such as the DCDM solves, which that makes slower).
    - `packages`: the carried distributions it imports (`carry.py`); a failed
      install of one of them, or of what they require, is named in its note.
    - `complete`: record keys a complete GPU result holds; a committed run
      without them leaves the row among the lease's first (`_lease.py`).
    """

    name: str
    part: str
    run: str
    budget_s: float
    smoke_budget_s: float
    measures: str
    baseline: str
    columns: tuple[str, ...]
    needs_s: float | None = None
    smoke_fast_compile: bool = True
    packages: tuple[str, ...] = ()
    complete: tuple[str, ...] = ()

    def budget(self, smoke: bool) -> float:
        return self.smoke_budget_s if smoke else self.budget_s

    def needs(self, smoke: bool) -> float:
        if smoke or self.needs_s is None:
            return self.budget(smoke) / 2
        return self.needs_s

    def function(self) -> Callable[[bool, Clock], None]:
        return load(self.run)


def load(path: str) -> Callable[[bool, Clock], None]:
    """The row function at `"package.module:function"`."""
    module, name = path.split(":")
    return getattr(importlib.import_module(module), name)


def sweep(
    values: Iterable[Any],
    measure: Callable[[Any], float | None],
    clock: Clock,
    cost_ratio: Callable[[Any, Any], float],
    emit_skip: Callable[[Any, str], None],
) -> None:
    """Calls `measure(value)` for each value in turn. `measure` may return the
    seconds it spent compiling (`time_fn`'s `compile_s`, summed), which the
    prediction excludes from the scaling: before each call after the first, its
    cost is predicted as the previous call's compile seconds plus its other
    seconds times `cost_ratio(previous, value)`; when that exceeds
    `clock.left()`, `emit_skip(value, note)` is called instead, for it and every
    later value."""
    previous, seconds, compiled = None, None, 0.0
    for value in values:
        if seconds is not None:
            predicted = compiled + (seconds - compiled) * cost_ratio(previous, value)
            if predicted > clock.left():
                emit_skip(
                    value,
                    f"skipped: predicted {predicted:.0f} s, {max(clock.left(), 0):.0f} s left",
                )
                seconds = float("inf")
                continue
        start = time.perf_counter()
        compiled = measure(value) or 0.0
        previous, seconds = value, time.perf_counter() - start
        compiled = min(compiled, seconds)


SPEED = "speed"
PAPER = "paper"
BOTH = "both"

# An H100's memory bandwidth is about 0.7× an H200's: a row's measured H200 cost
# times this is its budget, so the suite fits either machine.
H100_FACTOR = 1.3


def h200(seconds: float) -> float:
    """The budget for a row that cost `seconds` on the H200 (compilation included)."""
    return float(round(seconds * H100_FACTOR))


DCDM_COLUMNS = (
    "scene",
    "method",
    "iterations",
    "seconds",
    "compile_seconds",
    "setup_seconds",
    "converged",
    "note",
)

ROWS = (
    Row(
        "environment",
        BOTH,
        "benchmarks.gpu._speed:environment",
        30,
        60,
        "device, versions, precision modes, the packages the other rows need",
        "-",
        (
            "device",
            "backend",
            "device_count",
            "jax",
            "torch",
            "neuraloperator",
            "jax_default_matmul_precision",
            "torch_matmul_allow_tf32",
            "torch_cudnn_allow_tf32",
            "missing",
        ),
        needs_s=5,
        complete=("jax_default_matmul_precision",),
    ),
    Row(
        "pararnn_newton",
        SPEED,
        "benchmarks.gpu._speed:pararnn_newton",
        # H200: 90 s, mostly compiling, for T = 4k alone; now 4 unrolls beside
        # Newton, 4 lengths, 2 batches (the sweep stops where the budget ends)
        h200(120),
        150,
        "ParaGRU hidden 64: Newton forward and forward+backward, T = 1k…64k, batch 1 and 16",
        "the best of Sequential(unroll=k), k = 1, 8, 32, 128 (lax.scan), same layer and inputs",
        (
            "length",
            "batch",
            "newton_fwd_s",
            "best_sequential_fwd_s",
            "best_unroll_fwd",
            "speedup_fwd",
            "speedup_fwd_unroll1",
            "newton_fwdbwd_s",
            "best_sequential_fwdbwd_s",
            "best_unroll_fwdbwd",
            "speedup_fwdbwd",
            "newton_us_per_token_fwd",
            "sequential_us_per_token_fwd",
            "newton_iterations",
            "note",
        ),
        needs_s=40,
        complete=("best_sequential_fwd_s", "best_sequential_fwdbwd_s"),
    ),
    Row(
        "pararnn_dense_gru",
        SPEED,
        "benchmarks.gpu._speed:pararnn_dense_gru",
        90,
        150,
        "dense GRU hidden 64, T = 1k…16k, batch 1 and 16: DEER-style Newton (dense Jacobian)",
        "torch.nn.GRU (cuDNN) with the same weights, and the best Sequential(unroll=k)",
        (
            "length",
            "batch",
            "newton_fwd_s",
            "best_sequential_fwd_s",
            "best_unroll_fwd",
            "torch_gru_fwd_s",
            "speedup_fwd",
            "speedup_fwd_vs_torch",
            "torch_max_abs_difference",
            "newton_us_per_token_fwd",
            "newton_iterations",
            "note",
        ),
        needs_s=30,
        complete=("best_sequential_fwd_s", "torch_gru_fwd_s"),
    ),
    Row(
        "ssm_layers",
        SPEED,
        "benchmarks.gpu._speed:ssm_layers",
        # H200: done inside its 50 s with the per-token scan only; now 4 more baselines
        h200(70),
        150,
        "S4D (FFT convolution) and S5 (associative scan), H = 128, N = 64, batch 8, L = 16k",
        "the same discretised system by ChunkedScan and lax.scan with unroll 1, 8, 32, 128",
        (
            "layer",
            "pass",
            "ours_s",
            "best_baseline",
            "best_baseline_s",
            "speedup",
            "speedup_unroll1",
            "max_rel_error",
            "matmul_precision",
        ),
        needs_s=25,
        complete=("best_baseline_s",),
    ),
    Row(
        "tfno_vs_neuraloperator",
        SPEED,
        "benchmarks.gpu._speed:tfno_vs_neuraloperator",
        # H200: the TFNO pairs inside 90 s; now 8 dense pairs beside them
        h200(150),
        150,
        "TFNO (Tucker 0.1) train step, 128², hidden 32, batch 32; dense FNO, hidden 32 and 64, "
        "128² and 256², full float32 and TF32 on both sides",
        "neuraloperator 2.0 TFNO / FNO, same architecture, PyTorch Adam, in alternated pairs",
        (
            "model",
            "grid",
            "hidden",
            "batch",
            "precision",
            "ours_median_s",
            "ours_tanh_gelu_median_s",
            "neuraloperator_median_s",
            "ratio_to_neuraloperator",
            "ratio_tanh_gelu_to_neuraloperator",
            "ratio_exact_gelu_to_neuraloperator",
            "torch_device",
            "note",
        ),
        needs_s=40,
        packages=("neuraloperator", "requests"),
        complete=("precision",),
    ),
    Row(
        "insr_step",
        SPEED,
        "benchmarks.gpu._speed:insr_step",
        # H200: stopped at 45 s before its first measurement (compilation)
        h200(90),
        150,
        "INSR Levenberg–Marquardt seconds per step and per iteration, float64, the paper's "
        "scenes at its field sizes: advection 2×20, Taylor–Green 3×32, stretch 3×68",
        "the paper's per-step times on its GPU (Adam): advection ≈ 80 s, Taylor–Green ≈ 8.4 min",
        (
            "scene",
            "n_params",
            "n_points",
            "seconds_per_step",
            "seconds_per_iteration",
            "compile_seconds",
            "iterations",
            "paper_seconds_per_step",
            "note",
        ),
        needs_s=45,
        packages=("ml-collections",),
    ),
    Row(
        "online_ingestion",
        SPEED,
        "benchmarks.gpu._speed:online_ingestion",
        90,
        150,
        "online training: 1, 4 and 14 heat-solver processes (CPU) stream into the trainer on "
        "the device: samples/s and the trainer's wait fraction",
        "-",
        (
            "concurrency",
            "samples_received",
            "samples_per_s",
            "steps",
            "steps_per_s",
            "wait_fraction",
            "runs_done",
            "runs_failed",
            "note",
        ),
        needs_s=30,
        packages=("ml-collections", "pyzmq"),
        complete=("concurrency",),
    ),
    Row(
        "dcdm_solve",
        SPEED,
        "benchmarks.gpu._speed:dcdm_solve",
        # H200: 256² and 512² inside its 70 s
        h200(70),
        150,
        "DCDM (the shipped weights) seconds per solve to 1e-6, 256², 512², 1024², seeds 101–104 "
        "(one warm-up, median of 3; compile and setup apart)",
        "CG, Jacobi-PCG and AMG-PCG with its V-cycle on the device (sciml.dcdm.DeviceAMG)",
        DCDM_COLUMNS,
        needs_s=40,
        smoke_fast_compile=False,
        packages=("pyamg", "ml-collections"),
        complete=("warmup_seconds",),
    ),
    Row(
        "mgtfno_memory",
        SPEED,
        "benchmarks.gpu._speed:mgtfno_memory",
        # H200: 256² inside its 70 s, 512² skipped
        h200(90),
        150,
        "MG-TFNO (levels 1, 2; stitched and per tile) peak memory and step time, 256², 512²",
        "dense FNO of the same width and modes",
        ("grid", "model", "peak_bytes", "ratio_to_dense", "median_s", "step_ratio_to_dense"),
        needs_s=30,
        complete=("step_ratio_to_dense",),
    ),
    Row(
        "dcdm_3d",
        PAPER,
        "benchmarks.gpu._paper:dcdm_3d",
        # H200: stopped at 120 s while training; the shipped weights train nothing
        120,
        150,
        "DCDM (the shipped 3-D weights) seconds per solve to 1e-6, 64³ and 128³, seeds 101–104",
        "CG, Jacobi-PCG and AMG-PCG with its V-cycle on the device (sciml.dcdm.DeviceAMG)",
        DCDM_COLUMNS,
        needs_s=60,
        smoke_fast_compile=False,
        packages=("pyamg", "ml-collections"),
        complete=("warmup_seconds",),
    ),
    Row(
        "insr_elasticity",
        PAPER,
        "benchmarks.gpu._paper:insr_elasticity",
        # H200: the roller stretch stopped at 89 s before its first measurement;
        # the clamped stretch at 14,418 weights on 40,000 points (predicted, not
        # measured): about 60 s of compilation, four load steps of ≤ 30
        # Levenberg–Marquardt iterations of about 1 s, then the meshes and the
        # P2 reference on 128² cells on the host (about 100 s)
        h200(300),
        150,
        "INSR on the paper's clamped stretch at its field (SIREN 3×68), four load steps, "
        "clamps exact",
        "P1 and P2 meshes of the same memory and a converged P2 reference (sparse Newton)",
        (
            "representation",
            "unknowns",
            "error",
            "error_near_corner",
            "error_interior",
            "seconds",
            "verdict",
        ),
        needs_s=150,
        packages=("ml-collections",),
    ),
    Row(
        "ns_turbulent",
        PAPER,
        "benchmarks.gpu._paper:ns_turbulent",
        # H200: one seed of three models in about 150 s (data 18 s, training
        # 83 s; dense 29 s, joint TFNO 20 s, one-level MG-TFNO 34 s). The
        # paired run trains three models × 5 seeds (the 2-level MG-TFNO has
        # 2.25× the pixels of the field), about 450 s, more than a part's
        # 420 s limit allows a row: cut short at its budget, it keeps every
        # finished seed (seeds run one after another, all three models each)
        h200(320),
        300,
        "turbulent NS 128², 250 training / 256 test samples generated on the device, "
        "5 seeds paired: train and test rel. L2 / H1, the mean paired differences",
        "dense FNO against the 158× joint TFNO and the paper's MG-TFNO (2 levels, joint "
        "Tucker, 158×), seed by seed (pre-registered reading)",
        (
            "model",
            "seed",
            "n_params",
            "train_rel_l2",
            "test_rel_l2",
            "train_rel_h1",
            "test_rel_h1",
            "paired.test_rel_h1.mean",
            "paired.test_rel_h1.low",
            "paired.test_rel_h1.high",
            "paired.verdict",
            "paired.overfitting",
            "seconds",
        ),
        needs_s=150,
        packages=("ml-collections",),
        # a record per seed; the first run's single seed is a partial result
        complete=("seed",),
    ),
)


def rows_of(part: str) -> list[Row]:
    """The rows of `part` (`"speed"`, `"paper"` or `"all"`), in running order."""
    return [row for row in ROWS if part == "all" or row.part in (part, BOTH)]
