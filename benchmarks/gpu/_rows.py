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
    measure: Callable[[Any], None],
    clock: Clock,
    cost_ratio: Callable[[Any, Any], float],
    emit_skip: Callable[[Any, str], None],
) -> None:
    """Calls `measure(value)` for each value in turn. Before each call after the
    first, its cost is predicted as the previous call's seconds times
    `cost_ratio(previous, value)`; when that exceeds `clock.left()`,
    `emit_skip(value, note)` is called instead, for it and every later value."""
    previous, seconds = None, None
    for value in values:
        if seconds is not None:
            predicted = seconds * cost_ratio(previous, value)
            if predicted > clock.left():
                emit_skip(
                    value,
                    f"skipped: predicted {predicted:.0f} s, {max(clock.left(), 0):.0f} s left",
                )
                seconds = float("inf")
                continue
        start = time.perf_counter()
        measure(value)
        previous, seconds = value, time.perf_counter() - start


SPEED = "speed"
PAPER = "paper"
BOTH = "both"

ROWS = (
    Row(
        "environment",
        BOTH,
        "benchmarks.gpu._speed:environment",
        60,
        60,
        "device, versions, the packages the other rows need",
        "-",
        ("device", "backend", "device_count", "jax", "torch", "neuraloperator", "missing"),
        needs_s=5,
    ),
    Row(
        "tfno_vs_neuraloperator",
        SPEED,
        "benchmarks.gpu._speed:tfno_vs_neuraloperator",
        90,
        200,
        "TFNO (Tucker 0.1) train step, 128², batch 32, hidden 32, 16×16 modes, 4 layers",
        "neuraloperator 2.0 TFNO, same architecture, PyTorch Adam, in alternated pairs",
        (
            "grid",
            "batch",
            "ours_tanh_gelu_median_s",
            "neuraloperator_median_s",
            "ratio_tanh_gelu_to_neuraloperator",
            "ratio_erf_gelu_to_neuraloperator",
            "ratio_tanh_gelu_fft_to_neuraloperator",
            "torch_device",
        ),
        needs_s=30,
    ),
    Row(
        "pararnn_newton",
        SPEED,
        "benchmarks.gpu._speed:pararnn_newton",
        90,
        150,
        "ParaGRU hidden 64, batch 1: Newton forward and forward+backward, T = 4k, 16k, 64k",
        "the same layer evaluated by a sequential lax.scan",
        (
            "length",
            "sequential_fwd_s",
            "newton_fwd_s",
            "speedup_fwd",
            "sequential_fwdbwd_s",
            "newton_fwdbwd_s",
            "speedup_fwdbwd",
            "newton_iterations",
            "note",
        ),
        needs_s=30,
    ),
    Row(
        "pararnn_dense_gru",
        SPEED,
        "benchmarks.gpu._speed:pararnn_dense_gru",
        60,
        150,
        "dense GRU hidden 64, T = 16k, batch 1: DEER-style Newton (dense Jacobian, zero start)",
        "the same GRU evaluated by a sequential lax.scan",
        (
            "length",
            "hidden",
            "sequential_fwd_s",
            "newton_fwd_s",
            "speedup_fwd",
            "speedup_fwdbwd",
            "newton_iterations",
        ),
        needs_s=25,
    ),
    Row(
        "ssm_layers",
        SPEED,
        "benchmarks.gpu._speed:ssm_layers",
        50,
        150,
        "S4D (FFT convolution) and S5 (associative scan), H = 128, N = 64, batch 8, L = 16k",
        "the same discretised system as a recurrent lax.scan",
        ("layer", "path", "pass", "length", "median_s", "peak_bytes", "max_rel_error"),
        needs_s=25,
    ),
    Row(
        "mgtfno_memory",
        SPEED,
        "benchmarks.gpu._speed:mgtfno_memory",
        70,
        150,
        "MG-TFNO (levels 1, 2; stitched and per tile) peak memory and step time, 256², 512²",
        "dense FNO of the same width and modes",
        ("grid", "model", "peak_bytes", "ratio_to_dense", "median_s", "step_ratio_to_dense"),
        needs_s=30,
    ),
    Row(
        "dcdm_solve",
        SPEED,
        "benchmarks.gpu._speed:dcdm_solve",
        70,
        150,
        "DCDM (the shipped weights) seconds per solve to 1e-6, 256² and 512² scenes",
        "CG and IC(0)-PCG on the same systems (IC(0) through a host callback)",
        ("benchmark", "scene", "method", "iterations", "seconds", "setup_seconds", "converged"),
        needs_s=40,
        smoke_fast_compile=False,
    ),
    Row(
        "insr_step",
        SPEED,
        "benchmarks.gpu._speed:insr_step",
        45,
        150,
        "INSR Gauss–Newton step, SIREN 3×68 (14,418 weights), elasticity stretch, float64",
        "-",
        ("n_params", "n_points", "seconds_per_step", "compile_seconds", "iterations"),
        needs_s=25,
    ),
    Row(
        "online_ingestion",
        SPEED,
        "benchmarks.gpu._speed:online_ingestion",
        45,
        150,
        "online training: heat solvers (CPU processes) stream into the trainer on the device",
        "-",
        (
            "samples_received",
            "samples_per_s",
            "steps",
            "steps_per_s",
            "wait_fraction",
            "runs_done",
            "runs_failed",
        ),
        needs_s=25,
    ),
    Row(
        "ns_turbulent",
        PAPER,
        "benchmarks.gpu._paper:ns_turbulent",
        200,
        150,
        "turbulent NS 128², 250 training samples generated on the device: test rel. L2",
        "dense FNO against the 160× joint TFNO and MG-TFNO (1 level, padding 1/8)",
        (
            "model",
            "n_params",
            "compression",
            "test_rel_l2",
            "test_rel_h1",
            "train_rel_l2",
            "train_seconds",
            "seconds",
        ),
        needs_s=100,
    ),
    Row(
        "dcdm_3d",
        PAPER,
        "benchmarks.gpu._paper:dcdm_3d",
        120,
        150,
        "DCDM trained on a 64³ scene; iterations and seconds at 64³ and 128³",
        "CG and IC(0)-PCG on the same systems",
        ("benchmark", "scene", "method", "iterations", "seconds", "converged", "valid_loss"),
        needs_s=60,
        smoke_fast_compile=False,
    ),
    Row(
        "insr_elasticity",
        PAPER,
        "benchmarks.gpu._paper:insr_elasticity",
        130,
        150,
        "INSR elasticity stretch at the paper's field (SIREN 3×68), four load steps",
        "the analytic stretch, the exact-field floor, P1 and P2 meshes of the same memory",
        (
            "representation",
            "unknowns",
            "error",
            "seconds_per_step",
            "failed_steps",
            "mean_iterations",
            "seconds",
        ),
        needs_s=60,
    ),
)


def rows_of(part: str) -> list[Row]:
    """The rows of `part` (`"speed"`, `"paper"` or `"all"`), in running order."""
    return [row for row in ROWS if part == "all" or row.part in (part, BOTH)]
