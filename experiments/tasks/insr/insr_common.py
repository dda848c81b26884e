"""The skeleton the INSR experiments share, so that each task states only its
problem, its baselines and its plots: the checks of the `field`, `solver` and
`initial` config blocks (each task's `validate_config` adds its own keys), the
choice check of `build`, the SIREN field and the solvers of those blocks, the
timed initial fit and integration (in checkpointed, resumable chunks with
`long_run`) with the fields and times saved, and the summary entries every
task reports (the plots are in `insr_plots`)."""

from __future__ import annotations

import time
from pathlib import Path
from typing import NamedTuple

import equinox as eqx
import jax
import lineax as lx
import numpy as np
import optimistix as optx

from sciml import insr
from sciml.experiment import check_config
from sciml.solution import RESULTS, Solution
from sciml.training import ChunkedRun


FIELDS = ("siren",)
SOLVERS = ("least_squares", "adam")
SIZES = (
    "field.width",
    "field.hidden_layers",
    "solver.n_points",
    "solver.n_boundary",
    "solver.max_steps",
    "initial.max_steps",
    "eval.snapshots",
)


def validate_insr_config(config, *, positive=(), positive_numbers=(), choices=None) -> None:
    """The field and solver sizes and choices, plus a task's own keys, checked
    by the runner before anything is written. `solver.n_points` may be 0 where
    the least-squares solver has a quadrature grid (`solver.n_grid` > 0)."""
    s = config.solver
    grid_alone = s.get("name") == "least_squares" and int(s.get("n_grid", 0) or 0) > 0
    sizes = tuple(key for key in SIZES if not (grid_alone and key == "solver.n_points"))
    check_config(
        config,
        positive=sizes + tuple(positive),
        non_negative=("solver.n_points",) if grid_alone else (),
        positive_numbers=("field.omega0", *positive_numbers),
        choices={"field.name": FIELDS, "solver.name": SOLVERS, **(choices or {})},
    )


def choose(kind: str, name: str, accepted) -> str:
    """`name` if it is one of `accepted`, else a `ValueError` naming `kind`."""
    if name not in accepted:
        raise ValueError(f"unknown {kind} {name!r}; accepted: {', '.join(map(repr, accepted))}.")
    return name


def levenberg_marquardt(s) -> optx.LevenbergMarquardt:
    """The `solver` config block's least-squares optimiser (Cholesky on the normal equations)."""
    return optx.LevenbergMarquardt(rtol=s.rtol, atol=s.atol, linear_solver=lx.Normal(lx.Cholesky()))


def adam_solver(s) -> insr.AdamSolver:
    """The `solver` config block's Adam solver (`solver.name == "adam"`)."""
    return insr.AdamSolver(
        learning_rate=s.learning_rate,
        collocation=insr.Collocation(n_points=s.n_points, n_boundary=s.n_boundary),
        stopping=insr.Stopping(max_steps=s.max_iters),
    )


def initial_least_squares(config, optimiser) -> insr.LeastSquaresSolver:
    """The initial fit's solver: `optimiser` on `solver.n_points` points, at
    most `initial.max_steps` iterations, stopping at `initial.loss_tol`."""
    i = config.initial
    return insr.LeastSquaresSolver(
        optimiser,
        collocation=insr.Collocation(n_points=config.solver.n_points),
        stopping=insr.Stopping(max_steps=i.max_steps, loss_tol=i.loss_tol),
    )


def levenberg_marquardt_solvers(config, **stopping) -> tuple:
    """`(per-step solver, initial-fit solver)`: Levenberg–Marquardt on the
    `solver` block's points, steps and `loss_tol`; `stopping`: further
    `Stopping` arguments of the per-step solver."""
    s = config.solver
    optimiser = levenberg_marquardt(s)
    step = insr.LeastSquaresSolver(
        optimiser,
        collocation=insr.Collocation(n_points=s.n_points, n_boundary=s.n_boundary),
        stopping=insr.Stopping(max_steps=s.max_steps, loss_tol=s.loss_tol, **stopping),
    )
    return step, initial_least_squares(config, optimiser)


def step_solvers(config, least_squares, n: int = 2) -> tuple:
    """The `solver` block's `n` solvers (per step, ..., initial fit):
    `least_squares(config)` when `solver.name` is `"least_squares"`, else the
    Adam solver `n` times."""
    if choose("solver.name", config.solver.name, SOLVERS) == "least_squares":
        return tuple(least_squares(config))
    return (adam_solver(config.solver),) * n


def long_run(config, workdir, name: str | None = None) -> dict:
    """`integrate`'s keyword arguments for a run that survives: chunks of
    `train.checkpoint_every` steps, progress lines, a checkpoint after every
    chunk (and on Ctrl-C / SIGTERM) in `workdir/checkpoints` (a reference run
    `name`: `workdir/references/<name>/checkpoints`), resumed from there by the
    runner's `--resume`."""
    directory = Path(workdir) / "checkpoints"
    if name is not None:
        directory = Path(workdir) / "references" / name / "checkpoints"
    return dict(
        steps_per_chunk=int(config.train.checkpoint_every),
        monitor=ChunkedRun(
            directory, keep=int(config.train.keep_checkpoints), description=name or "integrate"
        ),
    )


def integrate_steps(field, integrator, problem, dt: float, t1: float, key, **chunks):
    """`insr.integrate` from 0 to `t1`, every step saved, failures in the result;
    `chunks`: `steps_per_chunk` and `monitor` (see `long_run`)."""
    run = insr.integrate if chunks.get("monitor") is not None else eqx.filter_jit(insr.integrate)
    return run(
        field,
        integrator,
        problem,
        0.0,
        t1,
        dt,
        key=key,
        saveat=insr.SaveAt(t0=True, steps=True),
        throw=False,
        **chunks,
    )


def fit_and_integrate(field, integrator, problem, initial, dt: float, t1: float, keys, **chunks):
    """The initial fit, then `integrate_steps` from its field; `keys = (init, run)`.

    Returns `(fit, sol, initial_seconds, seconds_per_step)`: the wall times
    (compilation included) of the fit and of the integration per step (of the
    steps this call ran, when it resumed from a checkpoint)."""
    key_init, key_run = keys
    start = time.perf_counter()
    fit = eqx.filter_jit(insr.fit_initial)(field, problem, initial, key=key_init, throw=False)
    jax.block_until_ready(fit.stats["loss"])
    initial_seconds = time.perf_counter() - start

    start = time.perf_counter()
    sol = integrate_steps(fit.value, integrator, problem, dt, t1, key_run, **chunks)
    jax.block_until_ready(sol.stats["loss"])
    n_run = insr.number_of_steps(0.0, t1, dt) - int(sol.stats["resumed_from"])
    seconds_per_step = (time.perf_counter() - start) / max(n_run, 1)
    return fit, sol, initial_seconds, seconds_per_step


class Run(NamedTuple):
    """What every INSR task evaluates: the initial fit's and the run's
    `Solution`s, the saved times `(n_steps + 1,)` and the wall times."""

    fit: Solution
    sol: Solution
    times: np.ndarray
    n_steps: int
    initial_seconds: float
    seconds_per_step: float


def run_and_save(workdir, field, integrator, problem, initial, dt, t1, keys, **chunks) -> Run:
    """`fit_and_integrate`, then the stacked per-step fields to `weights.eqx`
    (restore with `eqx.tree_deserialise_leaves` onto the same structure) and
    the times to `times.npy` in `workdir`."""
    fit, sol, initial_seconds, seconds_per_step = fit_and_integrate(
        field, integrator, problem, initial, dt, t1, keys, **chunks
    )
    eqx.tree_serialise_leaves(Path(workdir) / "weights.eqx", sol.value)
    times = np.asarray(sol.stats["ts"])
    np.save(Path(workdir) / "times.npy", times)
    n_steps = insr.number_of_steps(0.0, t1, dt)
    return Run(fit, sol, times, n_steps, initial_seconds, seconds_per_step)


def run_and_save_config(config, workdir, field, integrator, problem, initial) -> Run:
    """`run_and_save` over the config's `problem.dt` and `problem.t1`, keys
    from `seed + 1` and resumable chunks in `workdir` (`long_run`)."""
    dt, t1 = float(config.problem.dt), float(config.problem.t1)
    keys = tuple(jax.random.split(jax.random.key(config.seed + 1)))
    chunks = long_run(config, workdir)  # checkpointed, resumable chunks
    return run_and_save(workdir, field, integrator, problem, initial, dt, t1, keys, **chunks)


def n_weights(tree) -> int:
    """The number of array entries in `tree` (a field, or fields)."""
    return int(sum(a.size for a in jax.tree_util.tree_leaves(eqx.filter(tree, eqx.is_array))))


def run_summary(run: Run, n_params: int) -> dict:
    """The summary entries every INSR task reports: wall times, the initial
    fit's loss, the sizes, and how the steps went."""
    sol = run.sol
    return dict(
        seconds_per_step=run.seconds_per_step,
        initial_seconds=run.initial_seconds,
        initial_loss=float(run.fit.stats["loss"]),
        n_steps=run.n_steps,
        n_params=int(n_params),
        param_bytes=int(4 * n_params),
        failed_steps=int(sol.stats["num_failed_steps"]),
        result=RESULTS[sol.result] if not bool(sol.successful) else "successful",
        mean_iterations=float(np.mean(np.asarray(sol.stats["iterations"]))),
    )


def method_errors(curves: dict) -> dict:
    """`error`, `floor`, `grid_first_order`, `grid_second_order`: the means over
    steps `1..n` of the four error curves `(n_steps + 1,)` of `curves`, in that order."""
    keys = ("error", "floor", "grid_first_order", "grid_second_order")
    return {key: float(np.mean(curve[1:])) for key, curve in zip(keys, curves.values())}


def snapshot_steps(config, n_steps: int) -> np.ndarray:
    """The `eval.snapshots` steps of `0..n_steps` the field plots show."""
    return np.unique(np.linspace(0, n_steps, int(config.eval.snapshots)).round().astype(int))


def siren(config, n_in: int, n_out: int, key=None) -> insr.SIREN:
    """The `field` config block's SIREN `n_in → n_out` (key: `config.seed`'s by default)."""
    f = config.field
    choose("field.name", f.name, FIELDS)
    key = jax.random.key(config.seed) if key is None else key
    return insr.SIREN(
        n_in, n_out, width=f.width, hidden_layers=f.hidden_layers, omega0=f.omega0, key=key
    )
