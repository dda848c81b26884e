"""DCDM on voxel pressure-Poisson systems: train on one scene (or on several
sizes and scene families at once), compare with the classical baselines on
held-out scenes and larger grids.

Training (Kaneda et al., ICML 2023): Ritz vectors of the training scene's
matrix from Lanczos, right-hand sides biased towards the low end of its
spectrum (cached in `ritz.h5` in the run directory), the scale-free loss
`‖b − α* A f(b)‖²` or the A-norm loss `1 − (qᵀb)²/((qᵀAq)(bᵀx*))` (with the
exact solutions `x*` of the training right-hand sides, from a sparse direct
solve, cached beside them; `config.model.loss`, by default the paper's loss for
the paper's network and the A-norm loss for the symmetric ones), Adam through
`sciml.training`. With `data.resolutions` and `data.families` every step
takes a batch of every training scene and averages their losses.

Evaluation: for every held-out scene (other obstacle seeds; `eval.families`:
closed tanks and/or free surfaces) at every evaluation resolution, one
consistent right-hand side (`eval.rhs`: smooth, or the divergence of a random
smooth velocity) is solved from
`x₀ = 0` to `‖b − A x‖ ≤ rtol · ‖b‖` by DCDM and by CG, Jacobi-, IC(0)-,
MIC(0)- and AMG-preconditioned CG, all through the same `sciml.dcdm.solve`
(float64 outer loop, same matrix, same stopping rule). Each solve is compiled
ahead of time, so the timing excludes compilation; preconditioner setup is timed separately.
`summary["eval"][scene][method]` holds `iterations`, `seconds`,
`setup_seconds`, `converged`, `result` (the `RESULTS` name),
`relative_residual` and `iterations_at` (the iterations to each of
`eval.rtols`, read off the same iterates); `plots/residuals.png`
shows the residual histories.

On several processes (`--processes N`) the training batches are split over
them; process 0 alone builds `ritz.h5` (the others read it back), runs the
evaluation and writes the files.
"""

from __future__ import annotations

import functools
import itertools
import time
from pathlib import Path

import equinox as eqx
import h5py
import jax
import jax.numpy as jnp
import numpy as np

from experiments.tasks.dcdm.dcdm_plots import plot_scene_residuals
from sciml.dcdm import (
    DCDM,
    DCDMNet,
    Identity,
    IncompleteCholesky,
    Jacobi,
    MultilevelDCDMNet,
    SmoothedAggregationAMG,
    SymmetricDCDMNet,
    dcdm_loss,
    direction_fn,
    label_channels,
    pretrained,
    pretrained_info,
    ritz_dataset,
    solve,
)
from sciml.distributed import ProcessGroup, is_main_process
from sciml.experiment import (
    ConfigError,
    Experiment,
    Task,
    build_block,
    check_config,
    load_run,
    save_figure,
    train_experiment,
)
from sciml.solution import RESULTS, result_name
from solvers.poisson import (
    FLUID,
    PoissonOperator,
    assemble,
    direct_solver,
    make_scene,
    project_rhs,
    random_rhs,
)


BASELINES = {
    "cg": Identity(),
    "jacobi": Jacobi(),
    "ic0": IncompleteCholesky(),
    "mic0": IncompleteCholesky(modified=True),
    "amg": SmoothedAggregationAMG(),
}


FAMILIES = ("closed", "free_surface")


def scene(config, resolution: int, seed: int, family: str | None = None) -> np.ndarray:
    """The scene of obstacle seed `seed`: a `"closed"` tank (walls and
    obstacles, all-Neumann) or one with a `"free_surface"`; `family=None`:
    `config.data.free_surface` decides."""
    data = config.data
    if family is not None and family not in FAMILIES:
        raise ValueError(f"scene family must be one of {FAMILIES}, got {family!r}.")
    return make_scene(
        int(resolution),
        dim=int(data.dim),
        seed=int(seed),
        n_obstacles=int(data.n_obstacles),
        free_surface=bool(data.free_surface) if family is None else family == "free_surface",
    )


def scene_name(resolution: int, seed: int, family: str | None = None) -> str:
    """`n128_seed101`, or with a family `n128_closed_seed101`."""
    return f"n{resolution}_seed{seed}" if family is None else f"n{resolution}_{family}_seed{seed}"


def training_scenes(config) -> dict[str, np.ndarray]:
    """The training scenes: seed `data.scene_seed` at every resolution of
    `data.resolutions` (or `data.resolution` alone) in every family of
    `data.families` (or the one `data.free_surface` gives)."""
    data = config.data
    resolutions = tuple(data.get("resolutions", ())) or (data.resolution,)
    families = tuple(data.get("families", ())) or (None,)
    seed = int(data.scene_seed)
    return {
        scene_name(n, seed, family): scene(config, n, seed, family)
        for n in resolutions
        for family in families
    }


MODELS = ("paper", "symmetric", "multilevel")
LOSSES = ("auto", "paper", "a_norm")
Network = DCDMNet | SymmetricDCDMNet | MultilevelDCDMNet


def make_model(config) -> Network:
    """The network of `config.model.kind`: `"paper"` (the paper's nonlinear
    network, optionally with label channels), `"symmetric"` (`NᵀN` with the
    paper's architecture as a linear `N`; see `sciml.dcdm.SymmetricDCDMNet`)
    or `"multilevel"` (`NᵀN` with `N` a linear V-cycle whose depth follows the
    grid; see `sciml.dcdm.MultilevelDCDMNet`)."""
    model_cfg, dim = config.model, int(config.data.dim)
    kind = model_cfg.get("kind", "paper")
    key = jax.random.key(int(config.seed))
    if kind == "paper":
        return DCDMNet(
            dim,
            pairs=tuple(int(p) for p in model_cfg.pairs),
            width=int(model_cfg.width),
            label_channels=bool(model_cfg.label_channels),
            odd=bool(model_cfg.get("odd", False)),
            reference_layout=bool(model_cfg.get("reference_layout", False)),
            key=key,
        )
    if kind not in MODELS:
        raise ValueError(f"config.model.kind: unknown {kind!r}; accepted: {', '.join(MODELS)}")
    if kind == "symmetric":
        if model_cfg.label_channels:
            raise ValueError(
                "config.model.label_channels must be False with config.model.kind='symmetric' "
                "(label channels would enter additively and make the direction non-linear; "
                "kind='multilevel' takes them as geometry masks)."
            )
        pairs = tuple(int(p) for p in model_cfg.pairs)
        return SymmetricDCDMNet(dim, pairs=pairs, width=int(model_cfg.width), key=key)
    net = MultilevelDCDMNet(
        dim,
        width=int(model_cfg.width),
        smooth=int(model_cfg.get("smooth", 2)),
        coarsest=int(model_cfg.get("coarsest", 4)),
        gains=int(model_cfg.get("gains", 1)),
        geometry=bool(model_cfg.label_channels),  # multiplicative masks: N stays linear
        key=key,
    )
    init = model_cfg.get("init", "")
    return start_from(net, init) if init else net


def start_from(net: MultilevelDCDMNet, init: str) -> MultilevelDCDMNet:
    """`net` with the trained weights of `init` (a run directory of this task or
    a shipped name): the convolutions as they are, one shared gain spread over
    per-level gains, geometry weights kept if `init` has them (ones if not)."""
    if Path(init).is_dir():  # a finished run of this task: its trained model
        start, run_config = load_run(init, build_model=make_model)
        held = f"a {run_config.model.to_dict()} network"
    else:
        try:
            start, held = pretrained(init), f"a {pretrained_info(init)['architecture']} network"
        except ValueError as error:
            raise ValueError(
                f"config.model.init: {error} Or a run directory of this task."
            ) from None
    convs = lambda m: (m.stem, m.pre, m.post, m.coarse)  # noqa: E731
    shapes = lambda m: [x.shape for x in jax.tree_util.tree_leaves(convs(m))]  # noqa: E731
    if (
        net.dim != start.dim
        or net.coarsest != start.coarsest
        or shapes(net) != shapes(start)
        or start.gains not in (1, net.gains)
        or (start.geometry is not None and net.geometry is None)
    ):
        raise ValueError(
            f"config.model.init={init!r} holds {held}; set config.model.width, smooth, "
            "coarsest, gains (1 or its own), label_channels and data.dim to match it."
        )
    gain = jnp.broadcast_to(start.gain, net.gain.shape).astype(net.gain.dtype)
    net = eqx.tree_at(lambda m: (*convs(m), m.gain), net, (*convs(start), gain))
    if start.geometry is not None:
        net = eqx.tree_at(lambda m: m.geometry, net, start.geometry)
    return net


def loss_kind(config) -> str:
    """`"paper"` or `"a_norm"`: `config.model.loss`, where `"auto"` is the
    paper's loss for the paper's network and the A-norm loss otherwise."""
    loss = config.model.get("loss", "auto")
    if loss not in LOSSES:
        raise ValueError(f"config.model.loss: unknown {loss!r}; accepted: {', '.join(LOSSES)}")
    if loss == "auto":
        return "paper" if config.model.get("kind", "paper") == "paper" else "a_norm"
    return loss


def net_direction(model: Network, labels: np.ndarray):
    fluid = jnp.asarray(labels == FLUID, jnp.float32)
    onehot = label_channels(labels) if model.in_channels == 4 else None
    return direction_fn(model, fluid, onehot)


def training_rhs(config, workdir: Path, labels: np.ndarray, matrix) -> dict:
    """The training scene's right-hand sides `"rhs": (n_rhs, *grid)` from Ritz
    vectors and their exact solutions `"solutions"` (sparse direct solves),
    built once and cached in `workdir / "ritz.h5"` (the last `data.n_valid`
    are the validation set). On several processes process 0 builds the file
    and the others read it back (*collective*)."""
    group = ProcessGroup.current()
    path = workdir / "ritz.h5"
    ritz = group.on_main(lambda: _ritz_dataset(config, path, labels, matrix), lambda: None)
    key = group.broadcast(None if ritz is None else ritz["key"])  # the file's group
    return ritz if group.main else _read_ritz(path, key, int(config.data.n_rhs))


def _read_ritz(path: Path, key: str, n_rhs: int) -> dict:
    """What `ritz_dataset` returned on process 0, read back from its file."""
    with h5py.File(path, "r") as f:
        group = f[key]
        return {
            "rhs": group["rhs"][:n_rhs],
            "ritz_values": group["ritz_values"][...],
            "key": key,
            "solutions": group["solutions"][:n_rhs],
        }


def _ritz_dataset(config, path: Path, labels: np.ndarray, matrix) -> dict:
    data = config.data
    # one factorisation for every right-hand side, only if some are not cached yet
    factorised = functools.cache(lambda: direct_solver(labels))
    return ritz_dataset(
        path,
        lambda x: (matrix @ np.asarray(x).ravel()).reshape(labels.shape),
        labels,
        n_rhs=int(data.n_rhs),
        n_ritz=int(data.n_ritz),
        factor=float(data.factor),
        low_fraction=None if data.low_fraction is None else float(data.low_fraction),
        seed=int(data.rhs_seed),
        # the stored right-hand sides are float32: on a closed tank their mean
        # is off zero by rounding, which the projection removes
        solve_A=lambda b: factorised()(project_rhs(labels, b)),
    )


def build(config, workdir: Path) -> Experiment:
    """Training on every scene of `training_scenes` at once: each step takes
    `train.batch_size` right-hand sides of every scene, and the loss is the
    mean of the scenes' losses (so a 256² scene weighs as much as a 64² one)."""
    data = config.data
    model = make_model(config)  # checks the model block before the data are built
    if int(data.n_rhs) <= int(data.n_valid):
        raise ValueError(f"config.data.n_rhs must exceed config.data.n_valid ({data.n_valid}).")
    n_train = int(data.n_rhs) - int(data.n_valid)
    a_norm = loss_kind(config) == "a_norm"  # the paper's loss ignores x*
    # the right-hand sides stay on the host (float32), a batch is copied over per
    # step: at 256² one scene's 1,000 and their solutions are 0.5 GB, which
    # compiled programs should not hold as constants
    scenes = []
    for name, labels in training_scenes(config).items():
        ritz = training_rhs(config, workdir, labels, assemble(labels))
        rhs = np.asarray(ritz["rhs"], np.float32)
        x_star = np.asarray(ritz["solutions"], np.float32) if a_norm else None
        scenes.append((name, labels, PoissonOperator(labels), rhs, x_star))
    batch_size = int(config.train.batch_size)
    draw = jax.jit(lambda key: jax.random.randint(key, (batch_size,), 0, n_train))

    def batch_fn(step, key):
        batches = []  # one scene: its batches as before the scenes were several
        keys = [key] if len(scenes) == 1 else jax.random.split(key, len(scenes))
        for scene_key, (_, _, _, rhs, x_star) in zip(keys, scenes):
            i = np.asarray(draw(scene_key))
            batches.append(
                (jnp.asarray(rhs[i]), None if x_star is None else jnp.asarray(x_star[i]))
            )
        return tuple(batches)

    def scene_losses(model, batches) -> dict[str, jax.Array]:
        return {
            name: dcdm_loss(net_direction(model, labels), op, *batch)
            for (name, labels, op, _, _), batch in zip(scenes, batches)
        }

    def loss_fn(model, batches, key):
        losses = scene_losses(model, batches)
        aux = {f"loss_{name}": loss for name, loss in losses.items()} if len(scenes) > 1 else {}
        return jnp.mean(jnp.stack(list(losses.values()))), aux

    valid = [
        (jnp.asarray(rhs[n_train:]), None if x is None else jnp.asarray(x[n_train:]))
        for *_, rhs, x in scenes
    ]

    @eqx.filter_jit
    def valid_loss(model, valid):
        return jnp.mean(jnp.stack(list(scene_losses(model, valid).values())))

    def evaluate(model):
        return {"valid_loss": valid_loss(model, valid)}

    return Experiment(model=model, loss_fn=loss_fn, batch_fn=batch_fn, evaluate=evaluate)


def one_step_losses(model: Network, config, workdir: Path, n_samples: int = 32) -> dict:
    """The one-step losses of the network and of every baseline preconditioner
    as the direction, on the training scene: the paper's `‖b − α* A q(b)‖²`
    (`ritz_valid`, `white_noise`) and the A-norm loss
    `‖x* − α* q‖²_A / ‖x*‖²_A` (`*_a_norm`), means over the first `n_samples`
    validation right-hand sides and over as many unit-norm white-noise
    right-hand sides (projected onto the range of `A`). A direction generator
    with a low paper loss can still converge slowly inside the iteration:
    the A-norm loss weighs the low modes that set the iteration count."""
    labels = scene(config, config.data.resolution, config.data.scene_seed)
    matrix = assemble(labels)
    ritz = training_rhs(config, workdir, labels, matrix)
    valid = ritz["rhs"][-int(config.data.n_valid) :][:n_samples]
    valid_x = ritz["solutions"][-int(config.data.n_valid) :][:n_samples]
    noise = np.stack([random_rhs(labels, seed=(0, i), kind="noise") for i in range(valid.shape[0])])
    solve_noise = direct_solver(labels)  # factorised once
    noise_x = np.stack([solve_noise(b) for b in noise])
    sets = {
        "ritz_valid": (jnp.asarray(valid, jnp.float32), jnp.asarray(valid_x, jnp.float32)),
        "white_noise": (jnp.asarray(noise, jnp.float32), jnp.asarray(noise_x, jnp.float32)),
    }
    op = PoissonOperator(labels)
    directions = {"dcdm": net_direction(model, labels)}
    directions.update({name: b.build(matrix, labels.shape) for name, b in BASELINES.items()})
    losses = {}
    for name, f in directions.items():
        losses[name] = {}
        for set_name, (b, x) in sets.items():
            losses[name][set_name] = float(dcdm_loss(f, op, b))
            losses[name][f"{set_name}_a_norm"] = float(dcdm_loss(f, op, b, x))
    return losses


def dcdm_settings(config) -> DCDM:
    """The iteration's settings of `config.eval` (`rtol`, `max_steps`, `n_orthogonal`)."""
    ev = config.eval
    return DCDM(rtol=ev.rtol, max_steps=ev.max_steps, n_orthogonal=ev.n_orthogonal)


def timed_solve(op, b, direction, config) -> tuple[dict, np.ndarray]:
    """Compiles, then times one solve; returns its record and residual history."""
    settings = dcdm_settings(config)
    run = jax.jit(lambda b: solve(op, b, direction, settings, throw=False))
    compiled = run.lower(b).compile()
    start = time.perf_counter()
    sol = jax.block_until_ready(compiled(b))
    seconds = time.perf_counter() - start
    history = np.asarray(sol.stats["residual_history"])
    steps = int(sol.stats["num_steps"])
    record = {
        "iterations": steps,
        "seconds": seconds,
        "converged": bool(sol.result == RESULTS.successful),
        "result": result_name(sol.result),
        "relative_residual": float(sol.stats["residual_norm"]) / float(history[0]),
    }
    return record, history[: steps + 1] / history[0]


def iterations_to(history: np.ndarray, rtol: float) -> int | None:
    """The first iteration whose relative residual (`history`, starting at
    1) is at most `rtol`; `None` if none is."""
    below = np.flatnonzero(np.asarray(history) <= rtol)
    return int(below[0]) if below.size else None


def evaluate_scenes(model: Network, config) -> tuple[dict, dict]:
    """Every held-out scene × resolution × method; returns summary and histories."""
    ev = config.eval
    results, histories = {}, {}
    # 64-bit mode is switched on globally (and back after), not by the
    # thread-local `jax.enable_x64` context: the baselines' host callbacks run
    # on runtime threads, which would not see the context.
    previous = bool(jax.config.jax_enable_x64)
    jax.config.update("jax_enable_x64", bool(ev.x64))
    try:
        dtype = jnp.float64 if ev.x64 else jnp.float32
        families = tuple(ev.get("families", ())) or (None,)
        for resolution, family, seed in itertools.product(ev.resolutions, families, ev.scene_seeds):
            labels = scene(config, resolution, seed, family)
            name = scene_name(resolution, seed, family)
            kind = ev.get("rhs", "smooth")
            b = jnp.asarray(random_rhs(labels, seed=int(seed), kind=kind), dtype)
            op = PoissonOperator(labels)
            matrix = assemble(labels)
            results[name], histories[name] = {}, {}
            for method in ev.methods:
                if method == "dcdm":
                    direction, setup = net_direction(model, labels), 0.0
                elif method in BASELINES:
                    precond = BASELINES[method].build(matrix, labels.shape)
                    direction, setup = precond, precond.setup_seconds
                else:
                    accepted = ", ".join(["dcdm", *BASELINES])
                    raise ValueError(
                        f"config.eval.methods: unknown {method!r}; accepted: {accepted}"
                    )
                record, history = timed_solve(op, b, direction, config)
                record["setup_seconds"] = setup
                # looser tolerances read off the same iterates (x₀ = 0 and the
                # directions do not depend on the tolerance)
                record["iterations_at"] = {
                    f"{rtol:g}": iterations_to(history, float(rtol)) for rtol in ev.get("rtols", ())
                }
                results[name][method] = record
                histories[name][method] = history
    finally:
        jax.config.update("jax_enable_x64", previous)
    return results, histories


def train_and_evaluate(config, workdir: Path) -> dict:
    """Trains the network, then compares it with the baselines; see the module docstring."""
    workdir = Path(workdir)
    main = is_main_process()
    if main:
        workdir.mkdir(parents=True, exist_ok=True)
    trained = train_experiment(build(config, workdir), config, workdir)
    if not main:  # the evaluation is process 0's: its timings are not shared with the others
        return trained.summary
    results, histories = evaluate_scenes(trained.model, config)
    plot_dir = workdir / "plots"
    plot_dir.mkdir(parents=True, exist_ok=True)
    axes = plot_scene_residuals(histories, float(config.eval.rtol))
    save_figure(axes[0, 0], plot_dir / "residuals.png", dpi=110)
    return {**trained.summary, "eval": results}


def validate_config(config) -> None:
    """Data, model and evaluation sizes and choices, checked by the runner
    before anything is written."""
    check_config(
        config,
        positive=(
            "data.resolution", "data.n_ritz", "data.n_rhs", "data.n_valid", "model.width",
            "model.pairs", "model.gains", "eval.resolutions",
        ),
        non_negative=("data.n_obstacles",),
        choices={
            "data.dim": (2, 3), "model.kind": MODELS, "model.loss": LOSSES,
            "eval.rhs": ("smooth", "divergence"),
        },
    )  # fmt: skip
    for key in ("data.families", "eval.families"):
        block, name = key.split(".")
        families = tuple(config[block].get(name, ()))
        if any(f not in FAMILIES for f in families) or len(set(families)) != len(families):
            raise ConfigError(
                f"config key {key!r} must hold distinct scene families of {FAMILIES} "
                f"(empty: data.free_surface decides), got {families!r}."
            )
    resolutions = tuple(config.data.get("resolutions", ()))
    if any(not isinstance(n, int) or n < 2 for n in resolutions):
        raise ConfigError(
            f"config key 'data.resolutions' must hold grid sizes >= 2 (empty: "
            f"data.resolution alone), got {resolutions!r}."
        )
    rtols = tuple(config.eval.get("rtols", ()))
    if any(not isinstance(r, float) or not config.eval.rtol <= r < 1 for r in rtols):
        raise ConfigError(
            f"config key 'eval.rtols' must hold tolerances in [eval.rtol, 1) (read off the "
            f"iterates of the eval.rtol solve), got {rtols!r}."
        )
    unknown = [m for m in config.eval.methods if m not in ("dcdm", *BASELINES)]
    if unknown:
        accepted = ", ".join(repr(m) for m in ("dcdm", *BASELINES))
        raise ConfigError(f"config key 'eval.methods' holds {unknown}; accepted: {accepted}.")
    build_block(config, "eval", lambda: dcdm_settings(config))  # DCDM checks its settings


TASK = Task(train_and_evaluate, validate=validate_config, data_parallel=True)
