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
    """The paper's clamped stretch at its field size (SIREN 3×68, 14,418
    weights; `experiments/configs/insr_stretch.py`): the task's own INSR run
    (four load steps, clamps exact), then the P1 / P2 meshes of the SIREN's
    memory and the P2 reference solved by the sparse Newton (on the host),
    one line each as it finishes, with its relative L2 error against the
    reference (`experiments.tasks.insr.insr_stretch`); the last line holds the
    verdict. The smoke run is the `tiny` variant."""
    import jax

    from experiments.configs import insr_stretch as configs
    from experiments.tasks.insr import insr_common as common, insr_stretch as task

    config = configs.get_config("tiny" if smoke else None)
    with config.unlocked():
        config.meshes.memory = (1.0,)  # the equal-memory meshes only
    with jax.enable_x64(True), tempfile.TemporaryDirectory() as workdir:
        problem, field, integrator, initial, dt, t1 = task.build(config)
        n_weights = common.n_weights(field.network)
        keys = tuple(jax.random.split(jax.random.key(config.seed + 1)))
        start = time.perf_counter()
        run = common.run_and_save(workdir, field, integrator, problem, initial, dt, t1, keys)
        emit(
            {
                "representation": "INSR (SIREN)",
                "unknowns": n_weights,
                "seconds": time.perf_counter() - start,
            }
        )
        reference, sized = task.run_meshes(config, workdir, problem, n_weights)
        summary = task.evaluate(config, problem, run, reference, sized, n_weights)
    for name, label in (("insr", "INSR (SIREN)"), ("p1", "P1 mesh"), ("p2", "P2 mesh")):
        row = summary[name]
        emit(
            {
                "representation": label,
                "unknowns": row["bytes"] // 4,
                "error": row["error"],
                "error_near_corner": row["error_near_corner"],
                "error_interior": row["error_interior"],
                "seconds": row["seconds"],
            }
        )
    emit(
        {
            "representation": "reference (P2)",
            "unknowns": summary["reference"]["n_values"][-1],
            "error": summary["reference"]["refinement_error"],
            "seconds": summary["reference"]["seconds"],
            "verdict": summary["verdict"],
        }
    )
