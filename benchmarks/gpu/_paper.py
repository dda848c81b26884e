"""`--part paper`: the experiments whose claims need scale, each cut to fit.

Each function is one row of `_rows.ROWS` (`run(smoke, clock)`); it runs the
experiment's own task code at the suite's sizes and prints JSON lines as
results arrive (one per trained model, per solve, per scene).
"""

from __future__ import annotations

import tempfile
import time
from pathlib import Path

from benchmarks._common import emit
from benchmarks.gpu._rows import Clock
from benchmarks.gpu._speed import run_dcdm


def ns_turbulent(smoke: bool, clock: Clock) -> None:
    """The pre-registered paired comparison (`ns_turbulent:paper`): the dense
    FNO against the 158× joint Tucker TFNO and the paper's MG-TFNO (2 levels,
    padding 1/16, joint Tucker, 158×), each at its swept learning rate, on 250
    training and 256 test samples of developed turbulence generated on the
    device, trained once per seed (initialisation and batch order; the data
    are the same), seed by seed so that a row cut short still holds whole
    seeds. One line per trained model with its training-set errors (final and
    at every evaluation) beside the test errors, then one line per candidate
    with the mean paired differences, their 95 % t-intervals and the verdict
    fixed in advance, and one with the overfitting reading
    (`experiments/configs/ns_turbulent.py`). The smoke run is `:paper_tiny`
    with two seeds."""
    from experiments.configs import ns_turbulent as configs
    from experiments.tasks.operators import ns_turbulent as task
    from experiments.tasks.operators.operators_ns import data_from_config

    config = configs.get_config("paper_tiny" if smoke else "paper")
    with config.unlocked():
        config.data.path = config.data.test_path = config.data.path_2x = ""
        config.train.progress = False
        if smoke:
            config.seeds = (0, 1)
    (n_train,) = config.train_sizes
    sized = task.size_config(config, n_train)
    start = time.perf_counter()
    data = data_from_config(sized)
    emit(
        {
            "model": "data",
            "n_train": n_train,
            "n_test": int(config.data.n_test),
            "resolution": int(config.data.resolution),
            "seconds": time.perf_counter() - start,
        }
    )
    runs = {spec: {} for spec in config.paired}
    dense_params = None
    with tempfile.TemporaryDirectory() as workdir:
        for seed in config.seeds:
            for spec in config.paired:
                start = time.perf_counter()
                folder = task.model_dir(Path(workdir), n_train, spec, seed)
                row = task.seed_row(task.seed_config(sized, seed), spec, data, folder)
                runs[spec][seed] = row
                dense_params = dense_params or row["n_params"]
                emit(
                    {
                        "model": spec,
                        "seed": int(seed),
                        "n_train": n_train,
                        "steps": int(config.train.steps),
                        **row,
                        "compression": dense_params / row["n_params"],
                        "seconds": time.perf_counter() - start,
                    }
                )
    paired, _ = task.paired_results(runs, tuple(config.paired))
    for cand in config.paired[1:]:
        prefix = f"paired/{cand}."
        values = {
            f"paired.{k[len(prefix) :]}": v for k, v in paired.items() if k.startswith(prefix)
        }
        emit(
            {
                "model": f"paired: {config.paired[0]} − {cand}",
                "n_seeds": len(config.seeds),
                **values,
            }
        )
    emit({"model": "paired", "paired.overfitting": paired["paired.overfitting"]})


def dcdm_3d(smoke: bool, clock: Clock) -> None:
    """The shipped 3-D weights (`pretrained("poisson3d")`; nothing is trained in
    the row) at 64³ and 128³ against CG, Jacobi- and device AMG-PCG."""
    run_dcdm(3, (64, 128), smoke, clock)


def insr_elasticity(smoke: bool, clock: Clock) -> None:
    """The elasticity stretch at the paper's field size (SIREN 3×68, 20,000
    points, four load steps): the task's representations stepped by the same
    integrator and solver, one line each as it finishes (INSR first, then the
    exact-field floor and the P1 / P2 meshes of the SIREN's memory), each with
    its error against the analytic stretch (`experiments.tasks.insr.insr_elasticity`)."""
    import equinox as eqx
    import jax
    import numpy as np

    from experiments.configs import insr_elasticity as configs
    from experiments.tasks.insr import insr_elasticity as task
    from experiments.tasks.insr.insr_common import integrate_steps
    from sciml import insr
    from solvers.mesh_fields import interpolate, p1_field, p2_field

    config = configs.get_config("tiny" if smoke else None)
    scene = config.problem.scene
    with jax.enable_x64(True):
        problem, field, integrator, initial, dt, t1 = task.build(config)
        n_steps = insr.number_of_steps(0.0, t1, dt)
        key_init, key_run, key_ref = jax.random.split(jax.random.key(config.seed + 1), 3)
        x = task.grid_points(problem, int(config.eval.n_grid))
        n_params = sum(a.size for a in jax.tree_util.tree_leaves(eqx.filter(field, eqx.is_array)))
        start = time.perf_counter()
        fit = eqx.filter_jit(insr.fit_initial)(field, problem, initial, key=key_init, throw=False)
        emit({"representation": "initial fit", "seconds": time.perf_counter() - start})

        def mesh(make):
            values = make(problem, int(n_params))
            if scene == "column":  # the initial condition at the nodes
                values = interpolate(values, problem.initial_condition)
            return values

        representations = {
            "INSR (SIREN)": (lambda: fit.value, key_run),
            "floor (exact field)": (lambda: task.exact_field(problem, scene), key_ref),
            "P1 mesh": (lambda: mesh(p1_field), key_ref),
            "P2 mesh": (lambda: mesh(p2_field), key_ref),
        }
        if scene == "floor":  # no exact field to compare with
            del representations["floor (exact field)"]
        if smoke:  # the same loop, two of its four compilations
            representations = {k: representations[k] for k in ("INSR (SIREN)", "P1 mesh")}
        for name, (make, key) in representations.items():
            field0 = make()
            start = time.perf_counter()
            # the task's own stepping call (jitted `integrate`, every step saved)
            sol = integrate_steps(field0, integrator, problem, dt, t1, key)
            jax.block_until_ready(sol.stats["loss"])
            seconds = time.perf_counter() - start
            unknowns = jax.tree_util.tree_leaves(eqx.filter(field0, eqx.is_inexact_array))
            emit(
                {
                    "representation": name,
                    "scene": scene,
                    "error": task.scene_error(problem, scene, sol.value, x, dt, n_steps),
                    "unknowns": int(sum(a.size for a in unknowns)),
                    "seconds_per_step": seconds / n_steps,
                    "failed_steps": int(sol.stats["num_failed_steps"]),
                    "mean_iterations": float(np.mean(np.asarray(sol.stats["iterations"]))),
                }
            )
