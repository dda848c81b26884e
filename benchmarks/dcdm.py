"""DCDM against CG, Jacobi-, IC(0)-, MIC(0)- and AMG-PCG on the same scenes.

Trains a DCDM network on one scene (through the experiment task
`experiments.tasks.dcdm.dcdm`, so the model, data and training are those of the
`dcdm_poisson2d` / `dcdm_poisson3d` configs; checkpoints in `--workdir` are
resumed, so a second run only evaluates), then solves one smooth consistent
right-hand side on held-out scenes at several resolutions to
`‖b − A x‖ ≤ 1e-6 ‖b‖` with every method through the same `sciml.dcdm.solve`
(float64 outer loop, `x₀ = 0`). First one JSON line per method with its
one-step scale-free loss on the training scene (validation and white-noise
right-hand sides, the paper's loss and the A-norm loss; see
`experiments.tasks.dcdm.dcdm.one_step_losses`), then one per scene, tolerance and method:
iterations, solve seconds (compiled ahead of time, compilation excluded) and
preconditioner setup seconds (host side: IC factorisation, AMG hierarchy).
Runs unchanged on a GPU (the IC and AMG preconditioners then go through host
callbacks, which the timings include). `--pretrained` skips the training and
times the shipped generator, `sciml.dcdm.pretrained("poisson2d")` (or
`"poisson3d"` with `--dim 3`). `--train-scene empty_box` trains on an empty
closed box (no obstacles, no air: the reference code's single training matrix)
and still evaluates on held-out scenes with obstacles and a free surface;
`--save-weights PATH` writes the trained network's leaves
(`equinox.tree_serialise_leaves`, the format of the shipped weights).

`--shipped` times the shipped weights the way the GPU suite does
(`bench_shipped`): on every held-out scene (`--seeds`, default 101–104) each
method is compiled once (compile seconds recorded), run once to warm up, then
timed over `--repeats` solves (median, min); setup is separate (the network's
load, the Jacobi diagonal, pyamg's hierarchy and its copy to the device, the
IC(0) factorisation). Methods: `dcdm`, `cg`, `jacobi`, `amg_device`
([`sciml.dcdm.DeviceAMG`]: pyamg's hierarchy, the V-cycle in JAX on the
device), and the host-callback `amg` and `ic0` on grids of at most
`--host-max-cells` cells.

usage: python -m benchmarks.dcdm [--quick] [--dim 2] [--train-resolution 64]
       [--steps 2000] [--batch-size 16] [--resolutions 64 128 256] [--seeds 101]
       [--rtols 1e-6 1e-4] [--max-steps 2000] [--factor 9] [--n-orthogonal 2]
       [--model paper|symmetric|multilevel] [--width 16] [--smooth 2]
       [--loss auto|paper|a_norm] [--train-scene scene|empty_box]
       [--methods dcdm cg ic0] [--pretrained] [--save-weights PATH]
       [--shipped --repeats 3 --host-max-cells 65536]
"""

from __future__ import annotations

import argparse
import copy
import statistics
import time
from collections.abc import Callable
from pathlib import Path

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from benchmarks._common import emit, environment
from experiments.configs import dcdm_poisson2d, dcdm_poisson3d
from experiments.tasks.dcdm.dcdm import build, evaluate_scenes, one_step_losses, scene
from sciml.dcdm import (
    DCDM,
    DeviceAMG,
    Identity,
    IncompleteCholesky,
    SmoothedAggregationAMG,
    direction_fn,
    label_channels,
    pretrained,
    solve,
)
from sciml.experiment import train_experiment
from sciml.solution import RESULTS, result_name
from solvers.poisson import FLUID, PoissonOperator, assemble, random_rhs


SHIPPED_METHODS = ("dcdm", "cg", "jacobi", "amg_device", "ic0")
HOST_METHODS = {"ic0": IncompleteCholesky(), "amg": SmoothedAggregationAMG()}


def _network_direction(model, fluid, onehot, r):
    return direction_fn(model, fluid, onehot)(r)


def _jacobi_direction(inverse_diagonal, r):
    return r * inverse_diagonal.astype(r.dtype)


def shipped_direction(method: str, model, labels: np.ndarray, matrix):
    """`(direction, setup_seconds)` of `method` on a scene. DCDM, CG and Jacobi
    are pytrees of arrays (one compilation serves every scene of a grid);
    the AMG and IC(0) preconditioners close over their hierarchy or factors."""
    start = time.perf_counter()
    if method == "dcdm":
        fluid = jnp.asarray(labels == FLUID, jnp.float32)
        onehot = label_channels(labels) if model.in_channels == 4 else None
        direction = eqx.Partial(_network_direction, model, fluid, onehot)
    elif method == "cg":
        direction = Identity()
    elif method == "jacobi":
        d = matrix.diagonal().reshape(labels.shape)
        inverse = jnp.asarray(np.where(d != 0, 1 / np.where(d != 0, d, 1), 0))
        direction = eqx.Partial(_jacobi_direction, inverse)
    elif method == "amg_device":
        direction = DeviceAMG().build(matrix, labels.shape)
    elif method in HOST_METHODS:
        direction = HOST_METHODS[method].build(matrix, labels.shape)
    else:
        accepted = ", ".join(SHIPPED_METHODS + tuple(HOST_METHODS))
        raise ValueError(f"`--methods`: unknown {method!r}; accepted: {accepted}")
    jax.block_until_ready(jax.tree_util.tree_leaves(direction))
    return direction, time.perf_counter() - start


@eqx.filter_jit
def _solve(op, b, direction, settings):
    return solve(op, b, direction, settings, throw=False)


def time_solve(op, b, direction, settings: DCDM, repeats: int, compiled=None) -> dict:
    """Compiles (timed; or reuses `compiled`, an earlier record's `"compiled"`),
    runs once to warm up, then times `repeats` solves."""
    start = time.perf_counter()
    if compiled is None:
        compiled = _solve.lower(op, b, direction, settings).compile()
    compile_seconds = time.perf_counter() - start
    times = []
    for _ in range(1 + repeats):
        start = time.perf_counter()
        sol = jax.block_until_ready(compiled(op, b, direction, settings))
        times.append(time.perf_counter() - start)
    history = np.asarray(sol.stats["residual_history"])
    return {
        "iterations": int(sol.stats["num_steps"]),
        "converged": bool(sol.result == RESULTS.successful),
        "result": result_name(sol.result),
        "relative_residual": float(sol.stats["residual_norm"]) / float(history[0]),
        "seconds": statistics.median(times[1:]),
        "seconds_min": min(times[1:]),
        "warmup_seconds": times[0],
        "compile_seconds": compile_seconds,
        "repeats": repeats,
        "compiled": compiled,
    }


def bench_shipped(
    dim: int,
    resolutions,
    seeds=(101, 102, 103, 104),
    methods=SHIPPED_METHODS,
    *,
    rtol: float = 1e-6,
    max_steps: int = 4000,
    n_orthogonal: int = 2,
    repeats: int = 3,
    host_max_cells: int = 65536,
    seconds_left: Callable[[], float] | None = None,
    env: dict | None = None,
) -> None:
    """The shipped weights (`pretrained("poisson<dim>d")`) against the baselines
    on the held-out scenes of the `dcdm_poisson<dim>d` configs, one JSON line
    per scene and method (float64 outer loop, `x₀ = 0`, a smooth right-hand
    side, `‖b − A x‖ ≤ rtol ‖b‖`). Host-callback methods (`ic0`, `amg`) run
    only on grids of at most `host_max_cells` cells. With `seconds_left`, a
    scene is skipped (a line with a note) when its predicted time exceeds what
    is left: the last scene's solve and setup seconds scaled by the cell ratio
    to the power 1.5 (iterations grow with the side), plus its compile seconds."""
    env = environment() if env is None else env
    config = (dcdm_poisson2d if dim == 2 else dcdm_poisson3d).get_config()
    settings = DCDM(rtol=rtol, max_steps=max_steps, n_orthogonal=n_orthogonal)
    start = time.perf_counter()
    model = pretrained(f"poisson{dim}d")
    jax.block_until_ready(jax.tree_util.tree_leaves(eqx.filter(model, eqx.is_array)))
    emit({"benchmark": "dcdm_setup", "dim": dim, "load_seconds": time.perf_counter() - start})
    # 64-bit mode globally (the host callbacks run on runtime threads, which
    # would not see the thread-local `jax.enable_x64` context)
    previous = bool(jax.config.jax_enable_x64)
    jax.config.update("jax_enable_x64", True)
    last = None  # (cells, run seconds, compile seconds) of the last scene
    try:
        for resolution in resolutions:
            cells = resolution**dim
            # one compilation per grid for the pytree directions (their arrays are
            # arguments); the AMG and IC(0) closures compile once per scene
            compiled = {}
            for seed in seeds:
                if seconds_left is not None and last is not None:
                    ratio = (cells / last[0]) ** 1.5
                    predicted = last[1] * ratio + last[2]
                    if predicted > seconds_left():
                        emit(
                            {
                                "benchmark": "dcdm_solve",
                                "dim": dim,
                                "resolution": resolution,
                                "seed": int(seed),
                                "note": f"skipped: predicted {predicted:.0f} s, "
                                f"{max(seconds_left(), 0):.0f} s left",
                            }
                        )
                        continue
                scene_start, compile_total = time.perf_counter(), 0.0
                labels = scene(config, resolution, seed)
                b = jnp.asarray(random_rhs(labels, seed=int(seed), kind="smooth"), jnp.float64)
                op, matrix = PoissonOperator(labels), assemble(labels)
                for method in methods:
                    if method in HOST_METHODS and cells > host_max_cells:
                        continue
                    direction, setup = shipped_direction(method, model, labels, matrix)
                    record = time_solve(op, b, direction, settings, repeats, compiled.get(method))
                    if method in ("dcdm", "cg", "jacobi"):
                        compiled[method] = record["compiled"]
                    del record["compiled"]
                    compile_total += record["compile_seconds"]
                    emit(
                        {
                            "benchmark": "dcdm_solve",
                            "dim": dim,
                            "resolution": resolution,
                            "seed": int(seed),
                            "scene": f"n{resolution}_seed{seed}",
                            "method": method,
                            "setup_seconds": setup,
                            "rtol": rtol,
                            **record,
                            **env,
                        }
                    )
                elapsed = time.perf_counter() - scene_start
                last = (cells, elapsed - compile_total, compile_total)
    finally:
        jax.config.update("jax_enable_x64", previous)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dim", type=int, default=2, choices=(2, 3))
    parser.add_argument("--train-resolution", type=int, default=None)
    parser.add_argument("--steps", type=int, default=2000)
    parser.add_argument("--batch-size", type=int, default=None)
    parser.add_argument("--rtols", type=float, nargs="+", default=None)
    parser.add_argument("--width", type=int, default=None, help="feature channels")
    parser.add_argument(
        "--smooth", type=int, default=None, help="multilevel: convolutions per level and side"
    )
    parser.add_argument("--loss", choices=("auto", "paper", "a_norm"), default=None)
    parser.add_argument(
        "--train-scene",
        choices=("scene", "empty_box"),
        default="scene",
        help="train on the config's scene (obstacles, free surface) or on an empty closed box",
    )
    parser.add_argument("--n-ritz", type=int, default=800)
    parser.add_argument("--n-rhs", type=int, default=1000)
    parser.add_argument("--resolutions", type=int, nargs="+", default=None)
    parser.add_argument("--seeds", type=int, nargs="+", default=[101])
    parser.add_argument("--max-steps", type=int, default=2000)
    parser.add_argument("--factor", type=float, default=None, help="low-end weight of the rhs")
    parser.add_argument("--n-orthogonal", type=int, default=None)
    parser.add_argument(
        "--model",
        choices=("paper", "symmetric", "multilevel"),
        default="paper",
        help="the paper's network, or a symmetric linear NᵀN (no label channels)",
    )
    parser.add_argument(
        "--methods",
        nargs="+",
        default=None,
        help="solvers to evaluate (default: the config's, dcdm cg jacobi ic0 mic0 amg)",
    )
    parser.add_argument("--workdir", type=Path, default=None)
    parser.add_argument("--quick", action="store_true", help="a seconds-long smoke run")
    parser.add_argument(
        "--pretrained",
        action="store_true",
        help="no training: time the shipped generator, sciml.dcdm.pretrained('poisson<dim>d')",
    )
    parser.add_argument(
        "--save-weights", type=Path, default=None, help="write the trained network's leaves here"
    )
    parser.add_argument(
        "--shipped",
        action="store_true",
        help="time the shipped weights against CG, Jacobi, device AMG (and IC(0) on small "
        "grids): a warm-up and --repeats timed solves per scene and method",
    )
    parser.add_argument("--repeats", type=int, default=3, help="--shipped: timed solves")
    parser.add_argument(
        "--host-max-cells",
        type=int,
        default=65536,
        help="--shipped: the largest grid (cells) for the host-callback ic0 and amg",
    )
    args = parser.parse_args(argv)
    if args.shipped:
        resolutions = args.resolutions or ((256, 512, 1024) if args.dim == 2 else (64, 128))
        bench_shipped(
            args.dim,
            resolutions,
            args.seeds if args.seeds != [101] else (101, 102, 103, 104),
            tuple(args.methods or SHIPPED_METHODS),
            rtol=(args.rtols or [1e-6])[0],
            max_steps=args.max_steps,
            n_orthogonal=args.n_orthogonal or 2,
            repeats=args.repeats,
            host_max_cells=args.host_max_cells,
        )
        return
    if args.pretrained and args.save_weights is not None:
        parser.error("--save-weights: nothing is trained with --pretrained")

    module = dcdm_poisson2d if args.dim == 2 else dcdm_poisson3d
    config = module.get_config("tiny" if args.quick else None)
    if not args.quick:
        config.data.resolution = args.train_resolution or (64 if args.dim == 2 else 16)
        config.data.n_ritz = args.n_ritz
        config.data.n_rhs = args.n_rhs
        config.train.steps = args.steps
        config.train.progress = False
        config.train.eval_every = max(args.steps // 4, 1)
        config.train.checkpoint_every = max(args.steps // 4, 1)
        config.eval.resolutions = tuple(
            args.resolutions or ((64, 128, 256) if args.dim == 2 else (16, 32, 64))
        )
        config.eval.scene_seeds = tuple(args.seeds)
        config.eval.max_steps = args.max_steps
    if args.factor is not None:
        config.data.factor = args.factor
    config.model.kind = args.model
    config.model.label_channels = False
    if args.width is not None:
        config.model.width = args.width
    if args.smooth is not None:
        config.model.smooth = args.smooth
    if args.loss is not None:
        config.model.loss = args.loss
    if args.batch_size is not None:
        config.train.batch_size = args.batch_size
    if args.methods is not None:
        config.eval.methods = tuple(args.methods)
    if args.n_orthogonal is not None:
        config.eval.n_orthogonal = args.n_orthogonal
    workdir = (
        args.workdir
        or Path("runs") / f"bench_dcdm_{args.dim}d_{args.model}{'_quick' if args.quick else ''}"
    )
    workdir.mkdir(parents=True, exist_ok=True)
    env = environment()
    # the training scene: the config's (seed data.scene_seed) or an empty closed box;
    # evaluation always uses the config's held-out scenes
    train_config = copy.deepcopy(config)
    if args.train_scene == "empty_box":
        train_config.data.n_obstacles, train_config.data.free_surface = 0, False
    if args.pretrained:
        model = pretrained(f"poisson{args.dim}d")
    else:
        start = time.perf_counter()
        trained = train_experiment(build(train_config, workdir), train_config, workdir, plots=False)
        model = trained.model
        if args.save_weights is not None:
            args.save_weights.parent.mkdir(parents=True, exist_ok=True)
            eqx.tree_serialise_leaves(args.save_weights, model)
        emit(
            {
                "benchmark": "dcdm_train",
                "dim": args.dim,
                "train_resolution": int(config.data.resolution),
                "train_scene": args.train_scene,
                "steps": trained.summary["steps"],
                "valid_loss": trained.summary.get("valid_loss"),
                "seconds": time.perf_counter() - start,
                **env,
            }
        )
        for method, losses in one_step_losses(model, train_config, workdir).items():
            emit({"benchmark": "dcdm_one_step_loss", "method": method, **losses, **env})
    resolutions = tuple(config.eval.resolutions)
    for resolution in resolutions:  # one resolution at a time, printed as it finishes
        for rtol in args.rtols or (float(config.eval.rtol),):
            config.eval.resolutions, config.eval.rtol = (resolution,), rtol
            results, _ = evaluate_scenes(model, config)
            for name, methods in results.items():
                for method, record in methods.items():
                    row = {"scene": name, "rtol": rtol, "method": method, **record}
                    emit({"benchmark": "dcdm_solve", **row, **env})


if __name__ == "__main__":
    main()
