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

usage: python -m benchmarks.dcdm [--quick] [--dim 2] [--train-resolution 64]
       [--steps 2000] [--batch-size 16] [--resolutions 64 128 256] [--seeds 101]
       [--rtols 1e-6 1e-4] [--max-steps 2000] [--factor 9] [--n-orthogonal 2]
       [--model paper|symmetric|multilevel] [--width 16] [--smooth 2]
       [--loss auto|paper|a_norm] [--train-scene scene|empty_box]
       [--methods dcdm cg ic0] [--pretrained] [--save-weights PATH]
"""

from __future__ import annotations

import argparse
import copy
import time
from pathlib import Path

import equinox as eqx

from benchmarks._common import emit, environment
from experiments.configs import dcdm_poisson2d, dcdm_poisson3d
from experiments.tasks.dcdm.dcdm import build, evaluate_scenes, one_step_losses
from sciml.dcdm import pretrained
from sciml.experiment import train_experiment


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
    args = parser.parse_args(argv)
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
            for scene, methods in results.items():
                for method, record in methods.items():
                    row = {"scene": scene, "rtol": rtol, "method": method, **record}
                    emit({"benchmark": "dcdm_solve", **row, **env})


if __name__ == "__main__":
    main()
