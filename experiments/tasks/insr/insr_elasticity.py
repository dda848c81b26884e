"""INSR on 2-D elastodynamics, next to an exact representation and P1 / P2 meshes.

Fits the SIREN displacement to the scene's initial condition, steps it with
`sciml.insr.IncrementalPotential` (quasi-static for the stretch) and the
configured per-step solver (every step's weights saved), and reports:

- `error`: against the scene's analytic answer, at the last step —
  `free_fall`: relative error of the body's mean displacement against
  `dₙ = (f/2k)Δt² n(n+1)/2`; `roller_stretch`: relative error of the mean lateral
  stretch `λ₂ = mean F₁₁` against `(a + bλ₁)/(a + bλ₁²)` at the nominal
  `λ₁ = 1 + d/L`; `column`: relative error of the energy ratio `E_n/E_0`
  against implicit Euler's `(1 + ω₁²Δt²)⁻ⁿ`, `ω₁ = π√((a+b)/k)/(2L)`;
  `floor`: none (null);
- `floor`: the same integrator and solver with a field that contains the
  answer exactly (affine displacement; the column's first mode), same metric —
  what remains is sampling and penalty error;
- `grid_first_order`: the same integrator and solver on a P1 triangle mesh
  field (nodal displacements as the unknowns, about the SIREN's memory; with
  `problem.exact_boundary` its constrained face nodes are held at zero, else
  the constraints are the same penalty; with `solver.mesh_quadrature` on the
  mesh's Gauss points instead of random points);
- `grid_second_order`: the same on a P2 (quadratic Lagrange) triangle mesh
  field with about the same number of unknowns;
- `seconds_per_step`: wall time of `integrate` / steps (compilation included).

Every integration (INSR's and the three references') runs in compiled chunks
of `train.checkpoint_every` steps (1: a step of a large field takes minutes)
with a progress line and a checkpoint after each, in `checkpoints/` and
`references/<name>/checkpoints/`; `--resume RUN_DIR` continues each from its
last checkpoint.

Energies are means over an `n_grid²` midpoint grid of the body: kinetic
`k‖(uⁿ − uⁿ⁻¹)/Δt‖²`, elastic `ψ(F)`, contact `k_c/2 max(0, −d)²`, and the
potential `−f·u` of a force that acts throughout. Writes `weights.eqx`,
`times.npy`, `plots/deformed.png` (the deformed body at snapshots) and
`plots/energy.png`.
"""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path

import jax
import jax.numpy as jnp
import lineax as lx
import numpy as np
import optimistix as optx

from experiments.tasks.insr import insr_common as common
from experiments.tasks.insr.insr_plots import plot_deformed, plot_energy
from sciml import insr
from sciml.experiment import Task, save_figure
from sciml.solution import RESULTS
from solvers.mesh_fields import fix_nodes, interpolate, p1_field, p2_field, quadrature_points


# the scenes with an analytic answer; the paper's clamped stretch has none and
# is compared with converged meshes by `experiments/configs/insr_stretch.py`
SCENES = ("free_fall", "roller_stretch", "column", "floor")
SCENE_TIMES = {  # (dt, t1)
    "free_fall": (0.05, 1.0),
    "roller_stretch": (0.25, 1.0),  # four quasi-static load steps (ramp over [0, 1])
    "column": (0.08, 1.6),  # ω₁Δt = 0.2
    "floor": (0.05, 3.0),
}


def _affine(params, x):
    return params["A"] @ x + params["c"]


def _first_mode(problem):
    length = problem.upper[0] - problem.lower[0]

    def mode(params, x):
        s = jnp.sin(jnp.pi * (x[0] - problem.lower[0]) / (2 * length))
        return jnp.stack([params[0] * s, jnp.zeros_like(s)])

    return insr.FunctionField(mode, jnp.array([problem.initial_amplitude]))


def exact_field(problem, scene: str):
    """A field containing the scene's answer: the column's first mode, else affine."""
    if scene == "column":
        return _first_mode(problem)
    return insr.FunctionField(_affine, {"A": jnp.zeros((2, 2)), "c": jnp.zeros(2)})


def least_squares(
    s,
    *,
    n_points: int,
    max_steps: int,
    n_boundary: int = 50,
    rounds: int = 1,
    grad_rtol: float | None = None,
    overfit_rtol: float | None = None,
):
    """The `solver` block's `LeastSquaresSolver` (sampling, stopping rule and
    overfitting check of the config; CG on JᵀJ when `solver.matrix_free`)."""
    if s.matrix_free:
        # a CG that hits its cap returns its iterate (inexact Gauss–Newton) instead
        # of ending the Levenberg–Marquardt solve after that iteration
        cg = lx.CG(rtol=s.cg_rtol, atol=0.0, max_steps=s.cg_max_steps)
        linear = lx.Normal(insr.Truncated(cg))
        optimiser = optx.LevenbergMarquardt(rtol=s.rtol, atol=s.atol, linear_solver=linear)
    else:
        optimiser = common.levenberg_marquardt(s)
    collocation = insr.Collocation(
        n_points=n_points,
        n_boundary=n_boundary,
        n_grid=s.n_grid,
        rounds=rounds,
        n_heldout=s.n_heldout or None,
        overfit_rtol=overfit_rtol,
    )
    return insr.LeastSquaresSolver(
        optimiser,
        collocation=collocation,
        stopping=insr.Stopping(max_steps=max_steps, grad_rtol=grad_rtol),
        matrix_free=bool(s.matrix_free),
    )


def build(config):
    """`(problem, field, integrator, initial solver, dt, t1)` from the config."""
    p = config.problem
    scene = common.choose("problem.scene", p.scene, SCENES)
    dt0, t10 = SCENE_TIMES[scene]
    dt = float(p.dt) or dt0
    t1 = float(p.t1) or t10
    overrides = {"ramp_time": t1} if scene == "roller_stretch" else {}
    problem = insr.Elasticity2D.scene(scene, exact_boundary=bool(p.exact_boundary), **overrides)
    field = problem.constrain(common.siren(config, 2, 2))
    solver, initial = common.step_solvers(config, _least_squares)
    integrator = insr.IncrementalPotential(solver, quasi_static=scene == "roller_stretch")
    return problem, field, integrator, initial, dt, t1


def _least_squares(config):
    """The per-step and initial-fit solvers of the `solver` block."""
    s = config.solver
    solver = least_squares(
        s,
        n_points=s.n_points,
        n_boundary=s.n_boundary,
        max_steps=s.max_steps,
        rounds=s.rounds,
        grad_rtol=s.grad_rtol or None,
        overfit_rtol=s.overfit_rtol or None,
    )
    initial = least_squares(
        s, n_points=s.n_points, max_steps=config.initial.max_steps, rounds=s.rounds
    )
    return solver, initial


def mesh_stepper(config, integrator, mesh):
    """The integrator of `mesh`: `integrator` itself, or with
    `solver.mesh_quadrature = k > 0` its least-squares solver on the mesh's
    Gauss points alone (the degree-2 rule on `k²` sub-triangles of every
    element, `solvers.mesh_fields.quadrature_points`), on which the solver's
    mean is the integral over the body. Random or grid points are not a
    quadrature of a mesh field: elements with few points make its normal
    equations nearly singular, and the solve lowers the energy where the points
    are sparse."""
    k = int(config.solver.mesh_quadrature)
    if not k:
        return integrator
    if not isinstance(integrator.solver, insr.LeastSquaresSolver):
        raise ValueError(
            "`solver.mesh_quadrature` > 0 needs the least-squares solver (`solver.name` "
            f"'least_squares'), got {type(integrator.solver).__name__}; set it to 0 for Adam."
        )
    collocation = dataclasses.replace(
        integrator.solver.collocation, n_points=0, n_grid=0, quadrature=quadrature_points(mesh, k)
    )
    solver = dataclasses.replace(integrator.solver, collocation=collocation)
    return dataclasses.replace(integrator, solver=solver)


def step_checks(sol) -> dict:
    """Per-step honesty of a least-squares run: gradient and loss ratios, the
    training-point and held-out energies, and how many steps were flagged
    overfitted (empty for the Adam solver, which does not report them)."""
    if "energy_heldout" not in sol.stats:
        return {}
    stats = {k: np.asarray(sol.stats[k]) for k in ("grad_ratio", "loss_ratio", "energy")}
    heldout = np.asarray(sol.stats["energy_heldout"])
    step_result = np.asarray(sol.stats["step_result"])
    overfitted = RESULTS.insr_overfitted._value  # noqa: SLF001
    return {
        "max_grad_ratio": float(stats["grad_ratio"].max()),
        "max_loss_ratio": float(stats["loss_ratio"].max()),
        "max_heldout_excess": float(np.max(heldout / stats["energy"] - 1)),
        "overfitted_steps": int(np.sum(step_result == int(overfitted))),
        "step_energy": stats["energy"].tolist(),
        "step_energy_heldout": heldout.tolist(),
        "step_grad_ratio": stats["grad_ratio"].tolist(),
    }


def grid_points(problem, n: int) -> jax.Array:
    """`(n², 2)` cell midpoints of an `n × n` grid of the body."""
    axes = [lo + (u - lo) * (np.arange(n) + 0.5) / n for lo, u in zip(problem.lower, problem.upper)]
    return jnp.asarray(np.stack(np.meshgrid(*axes, indexing="ij"), -1).reshape(-1, 2))


def displacements(fields, x) -> np.ndarray:
    """`(T, n, 2)` displacements of stacked fields at points `x`."""
    return np.asarray(jax.vmap(lambda f: jax.vmap(f)(x))(fields))


def energies(problem, fields, x, dt: float) -> dict[str, np.ndarray]:
    """Per-step mean energies `(T,)` over the points `x` (zero initial velocity)."""
    u = displacements(fields, x)
    previous = np.concatenate([u[:1], u[:-1]])
    kinetic = problem.mass * np.mean(np.sum(((u - previous) / dt) ** 2, -1), -1)
    psi = jax.vmap(lambda f: jnp.mean(jax.vmap(lambda y: problem.energy_density(f, y))(x)))
    elastic = np.asarray(psi(fields))
    out = {"kinetic": kinetic, "elastic": elastic}
    total = kinetic + elastic
    if problem.floor is not None:
        depth = np.maximum(0.0, problem.floor - (np.asarray(x)[None, :, 1] + u[..., 1]))
        out["contact"] = np.mean(problem.contact_stiffness / 2 * depth**2, -1)
        total = total + out["contact"]
    if problem.n_force_steps is None and any(problem.force):
        total = total - np.mean(u @ np.asarray(problem.force), -1)
    out["total"] = total
    return out


def scene_error(problem, scene: str, fields, x, dt: float, n_steps: int) -> float | None:
    """The `error` of the module docstring for stacked fields (None for the floor scene)."""
    if scene == "free_fall":
        u = displacements(jax.tree_util.tree_map(lambda a: a[-1:], fields), x)[0]
        d = np.asarray(problem.force) / (2 * problem.mass) * dt**2 * n_steps * (n_steps + 1) / 2
        return float(np.linalg.norm(u.mean(0) - d) / np.linalg.norm(d))
    if scene == "roller_stretch":
        last = insr.field_at(fields, -1)
        lam2 = float(np.mean(jax.vmap(lambda y: problem.deformation_gradient(last, y)[1, 1])(x)))
        right = next(c for c in problem.constraints if getattr(c, "face", None) == "right")
        lam1 = 1 + right.displacement / (problem.upper[0] - problem.lower[0])
        a, b = problem.a, problem.b
        exact = (a + b * lam1) / (a + b * lam1**2)
        return abs(lam2 - exact) / exact
    if scene == "column":
        e = energies(problem, fields, x, dt)["total"]
        length = problem.upper[0] - problem.lower[0]
        omega = math.pi * math.sqrt((problem.a + problem.b) / problem.mass) / (2 * length)
        exact = (1 + omega**2 * dt**2) ** (-n_steps)
        return abs(e[-1] / e[0] - exact) / exact
    return None


def run_references(config, workdir, problem, integrator, n_params: int, dt, t1, key):
    """The floor (an exact representation; none for the floor scene) and the P1 / P2
    meshes of about `n_params` unknowns, each integrated like INSR; returns the
    references' solutions and the two meshes."""
    scene = config.problem.scene
    references = {}
    if scene != "floor":
        references["floor"] = common.integrate_steps(
            exact_field(problem, scene),
            integrator,
            problem,
            dt,
            t1,
            key,
            **common.long_run(config, workdir, "floor"),
        )
    # with `exact_boundary` the meshes hold their constrained face nodes
    # at zero (exact, as finite elements do), else the penalty of the paper
    mesh_problem = problem
    if not problem.exact_boundary:
        mesh_problem = insr.Elasticity2D.scene(
            scene, **({"ramp_time": t1} if scene == "roller_stretch" else {})
        )
    meshes = {
        "grid_first_order": p1_field(problem, int(n_params)),
        "grid_second_order": p2_field(problem, int(n_params)),
    }
    for name, mesh in meshes.items():
        if scene == "column":  # the initial condition at the nodes
            mesh = interpolate(mesh, problem.initial_condition)
        if problem.exact_boundary:
            mesh = fix_nodes(mesh, problem.constraints)
        references[name] = common.integrate_steps(
            mesh,
            mesh_stepper(config, integrator, mesh),
            mesh_problem,
            dt,
            t1,
            key,
            **common.long_run(config, workdir, name),
        )
    return references, meshes


def error_summary(problem, scene: str, sol, references: dict, meshes: dict, x, dt, n_steps):
    """`error`, the step checks, the references' failed steps and errors, and a note."""
    summary = {"error": scene_error(problem, scene, sol.value, x, dt, n_steps)}
    summary.update(step_checks(sol))
    for name in ("grid_first_order", "grid_second_order"):
        summary[f"{name}_failed_steps"] = int(references[name].stats["num_failed_steps"])
    for name in ("floor", "grid_first_order", "grid_second_order"):
        ref = references.get(name)
        summary[name] = (
            None if ref is None else scene_error(problem, scene, ref.value, x, dt, n_steps)
        )
    summary["note"] = (
        "error: vs the scene's analytic answer (free_fall: mean displacement; roller_stretch: "
        "lambda_2; column: energy ratio; floor scene: none). floor: the same integrator with "
        "an exact representation. grid_first_order / grid_second_order: P1 / P2 triangles "
        f"with {meshes['grid_first_order'].values.size} / "
        f"{meshes['grid_second_order'].values.size} nodal unknowns and the same integrator "
        "and sampling."
    )
    return summary


def train_and_evaluate(config, workdir) -> dict:
    workdir = Path(workdir)
    scene = config.problem.scene
    with jax.enable_x64(bool(config.x64)):
        problem, field, integrator, initial, dt, t1 = build(config)
        key_init, key_run, key_ref = jax.random.split(jax.random.key(config.seed + 1), 3)
        run = common.run_and_save(
            workdir,
            field,
            integrator,
            problem,
            initial,
            dt,
            t1,
            (key_init, key_run),
            **common.long_run(config, workdir),  # checkpointed, resumable chunks
        )
        sol, times, n_steps = run.sol, run.times, run.n_steps
        x = grid_points(problem, int(config.eval.n_grid))
        n_params = common.n_weights(field)
        references, meshes = run_references(
            config, workdir, problem, integrator, n_params, dt, t1, key_ref
        )
        summary = error_summary(problem, scene, sol, references, meshes, x, dt, n_steps)
        energy = energies(problem, sol.value, x, dt)
        ref_energy = {k: energies(problem, r.value, x, dt)["total"] for k, r in references.items()}
        u_plot = displacements(sol.value, x)

    summary.update(common.run_summary(run, n_params))
    summary.update(
        scene=scene,
        dt=dt,
        grid_bytes=int(4 * meshes["grid_first_order"].values.size),
        grid_second_order_bytes=int(4 * meshes["grid_second_order"].values.size),
        final_energy_ratio=float(energy["total"][-1] / energy["total"][0])
        if energy["total"][0]
        else None,
    )

    plots, steps = workdir / "plots", common.snapshot_steps(config, n_steps)
    title = f"{scene}: deformed body (SIREN, {n_params} weights)"
    deformed = plot_deformed(x, u_plot, times, steps, floor=problem.floor, title=title)
    save_figure(deformed[0, 0], plots / "deformed.png", bbox_inches="tight")
    energy_ax = plot_energy(times, energy, ref_energy, title=f"{scene}: energy")
    save_figure(energy_ax, plots / "energy.png", bbox_inches="tight")
    return summary


def validate_config(config) -> None:
    """Field, solver and evaluation sizes and choices, checked by the runner
    before anything is written."""
    common.validate_insr_config(
        config,
        positive=("eval.n_grid", "solver.rounds", "solver.cg_max_steps"),
        positive_numbers=("solver.cg_rtol",),
        choices={"problem.scene": SCENES},
    )


TASK = Task(train_and_evaluate, validate=validate_config, build=build)
