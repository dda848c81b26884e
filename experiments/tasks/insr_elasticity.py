"""INSR on 2-D elastodynamics, next to an exact representation and P1 / P2 meshes.

Fits the SIREN displacement to the scene's initial condition, steps it with
`sciml.insr.IncrementalPotential` (quasi-static for the stretch) and the
configured per-step solver (every step's weights saved), and reports:

- `error`: against the scene's analytic answer, at the last step —
  `free_fall`: relative error of the body's mean displacement against
  `dₙ = (f/2k)Δt² n(n+1)/2`; `stretch`: relative error of the mean lateral
  stretch `λ₂ = mean F₁₁` against `(a + bλ₁)/(a + bλ₁²)` at the nominal
  `λ₁ = 1 + d/L`; `column`: relative error of the energy ratio `E_n/E_0`
  against implicit Euler's `(1 + ω₁²Δt²)⁻ⁿ`, `ω₁ = π√((a+b)/k)/(2L)`;
  `floor`: none (null);
- `floor`: the same integrator and solver with a field that contains the
  answer exactly (affine displacement; the column's first mode), same metric —
  what remains is sampling and penalty error;
- `grid_first_order`: the same integrator and solver on a P1 triangle mesh
  field (nodal displacements as the unknowns, about the SIREN's memory);
- `grid_second_order`: the same on a P2 (quadratic Lagrange) triangle mesh
  field with about the same number of unknowns;
- `seconds_per_step`: wall time of `integrate` / steps (compilation included).

Energies are means over an `n_grid²` midpoint grid of the body: kinetic
`k‖(uⁿ − uⁿ⁻¹)/Δt‖²`, elastic `ψ(F)`, contact `k_c/2 max(0, −d)²`, and the
potential `−f·u` of a force that acts throughout. Writes `weights.eqx`,
`times.npy`, `plots/deformed.png` (the deformed body at snapshots) and
`plots/energy.png`.
"""

from __future__ import annotations

import math
import time
from pathlib import Path

import equinox as eqx
import jax
import jax.numpy as jnp
import lineax as lx
import numpy as np
import optimistix as optx

from experiments.tasks.insr_common import validate_insr_config
from sciml import insr
from sciml.solution import RESULTS


SCENE_TIMES = {  # (dt, t1)
    "free_fall": (0.05, 1.0),
    "stretch": (0.25, 1.0),  # four quasi-static load steps (ramp over [0, 1])
    "column": (0.08, 1.6),  # ω₁Δt = 0.2
    "floor": (0.05, 3.0),
}
SOLVERS = ("least_squares", "adam")
FIELDS = ("siren",)


def _choose(kind: str, name: str, accepted) -> str:
    if name not in accepted:
        raise ValueError(f"unknown {kind} {name!r}; accepted: {', '.join(map(repr, accepted))}.")
    return name


class P1Field(eqx.Module):
    """Piecewise-linear displacement on a structured triangle mesh of the
    rectangle (`nx × ny` cells, each split along its diagonal); the nodal
    values `(nx+1, ny+1, 2)` are the unknowns."""

    values: jax.Array
    lower: tuple = eqx.field(static=True)
    upper: tuple = eqx.field(static=True)

    def __call__(self, x):
        nx, ny = self.values.shape[0] - 1, self.values.shape[1] - 1
        lo, hi = jnp.asarray(self.lower, x.dtype), jnp.asarray(self.upper, x.dtype)
        g = (x - lo) / (hi - lo) * jnp.array([nx, ny], x.dtype)
        i = jnp.clip(jnp.floor(g[0]).astype(int), 0, nx - 1)
        j = jnp.clip(jnp.floor(g[1]).astype(int), 0, ny - 1)
        s, t = g[0] - i, g[1] - j
        v00, v10 = self.values[i, j], self.values[i + 1, j]
        v01, v11 = self.values[i, j + 1], self.values[i + 1, j + 1]
        lower_tri = v00 + s * (v10 - v00) + t * (v01 - v00)
        upper_tri = v11 + (1 - s) * (v01 - v11) + (1 - t) * (v10 - v11)
        return jnp.where(s + t <= 1, lower_tri, upper_tri)


class P2Field(eqx.Module):
    """Piecewise-quadratic (P2 Lagrange) displacement on the mesh of
    `P1Field`: `nx × ny` cells split along the diagonal from `(i+1, j)` to
    `(i, j+1)`. The unknowns are the values at the vertices and edge midpoints,
    together the nodes of the doubled grid `(2nx+1, 2ny+1, 2)` (a cell's
    centre is the midpoint of its diagonal). On a triangle with barycentric
    coordinates `λ`, vertex `a` weighs `λ_a(2λ_a − 1)` and the midpoint of
    edge `ab` weighs `4λ_aλ_b`."""

    values: jax.Array
    lower: tuple = eqx.field(static=True)
    upper: tuple = eqx.field(static=True)

    def __call__(self, x):
        nx, ny = (self.values.shape[0] - 1) // 2, (self.values.shape[1] - 1) // 2
        lo, hi = jnp.asarray(self.lower, x.dtype), jnp.asarray(self.upper, x.dtype)
        g = (x - lo) / (hi - lo) * jnp.array([nx, ny], x.dtype)
        i = jnp.clip(jnp.floor(g[0]).astype(int), 0, nx - 1)
        j = jnp.clip(jnp.floor(g[1]).astype(int), 0, ny - 1)
        s, t = g[0] - i, g[1] - j

        def v(a, b):  # the node at (a, b) of the cell, in half-cell units
            return self.values[2 * i + a, 2 * j + b]

        def quadratic(la, lb, lc, va, vb, vc, vab, vac, vbc):
            vertices = la * (2 * la - 1) * va + lb * (2 * lb - 1) * vb + lc * (2 * lc - 1) * vc
            return vertices + 4 * (la * lb * vab + la * lc * vac + lb * lc * vbc)

        # lower triangle (0,0), (1,0), (0,1); upper triangle (1,1), (0,1), (1,0)
        lower_tri = quadratic(1 - s - t, s, t, v(0, 0), v(2, 0), v(0, 2), v(1, 0), v(0, 1), v(1, 1))
        upper_tri = quadratic(
            s + t - 1, 1 - s, 1 - t, v(2, 2), v(0, 2), v(2, 0), v(1, 2), v(2, 1), v(1, 1)
        )
        return jnp.where(s + t <= 1, lower_tri, upper_tri)


def p1_field(problem, n_values: int) -> P1Field:
    """A zero P1 field with about `n_values` nodal unknowns, cells near-square."""
    width, height = (u - lo for lo, u in zip(problem.lower, problem.upper))
    nodes = max(n_values // 2, 4)
    ny = max(1, round(math.sqrt(nodes * height / width)) - 1)
    nx = max(1, nodes // (ny + 1) - 1)
    return P1Field(jnp.zeros((nx + 1, ny + 1, 2)), problem.lower, problem.upper)


def p2_field(problem, n_values: int) -> P2Field:
    """A zero P2 field with about `n_values` nodal unknowns (vertices and edge
    midpoints), cells near-square."""
    width, height = (u - lo for lo, u in zip(problem.lower, problem.upper))
    nodes = max(n_values // 2, 9)
    ny = max(1, round((math.sqrt(nodes * height / width) - 1) / 2))
    nx = max(1, (nodes // (2 * ny + 1) - 1) // 2)
    return P2Field(jnp.zeros((2 * nx + 1, 2 * ny + 1, 2)), problem.lower, problem.upper)


def interpolate(mesh, function):
    """`mesh` with its nodal values set to `function` (one point `(2,) → (2,)`)."""
    shape = mesh.values.shape[:2]
    axes = [np.linspace(lo, u, n) for lo, u, n in zip(mesh.lower, mesh.upper, shape)]
    nodes = jnp.asarray(np.stack(np.meshgrid(*axes, indexing="ij"), -1))
    return eqx.tree_at(lambda m: m.values, mesh, jax.vmap(jax.vmap(function))(nodes))


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


def build(config):
    """`(problem, field, integrator, initial solver, dt, t1)` from the config."""
    p = config.problem
    scene = _choose("problem.scene", p.scene, insr.SCENES)
    dt0, t10 = SCENE_TIMES[scene]
    dt = float(p.dt) or dt0
    t1 = float(p.t1) or t10
    overrides = {"ramp_time": t1} if scene == "stretch" else {}
    problem = insr.Elasticity2D.scene(scene, **overrides)
    _choose("field.name", config.field.name, FIELDS)
    field = insr.SIREN(
        2,
        2,
        width=config.field.width,
        hidden_layers=config.field.hidden_layers,
        omega0=config.field.omega0,
        key=jax.random.key(config.seed),
    )
    s = config.solver
    _choose("solver.name", s.name, SOLVERS)
    if s.name == "least_squares":
        optimiser = optx.LevenbergMarquardt(
            rtol=s.rtol, atol=s.atol, linear_solver=lx.Normal(lx.Cholesky())
        )
        solver = insr.LeastSquaresSolver(
            optimiser, n_points=s.n_points, n_boundary=s.n_boundary, max_steps=s.max_steps
        )
        initial = insr.LeastSquaresSolver(
            optimiser, n_points=s.n_points, max_steps=config.initial.max_steps
        )
    else:
        solver = insr.AdamSolver(
            learning_rate=s.learning_rate,
            n_points=s.n_points,
            n_boundary=s.n_boundary,
            max_iters=s.max_iters,
        )
        initial = solver
    integrator = insr.IncrementalPotential(solver, quasi_static=scene == "stretch")
    return problem, field, integrator, initial, dt, t1


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
    if scene == "stretch":
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


def _run(field, integrator, problem, dt, t1, key):
    return eqx.filter_jit(insr.integrate)(
        field,
        integrator,
        problem,
        0.0,
        t1,
        dt,
        key=key,
        saveat=insr.SaveAt(t0=True, steps=True),
        throw=False,
    )


def train_and_evaluate(config, workdir) -> dict:
    import matplotlib.pyplot as plt

    workdir = Path(workdir)
    scene = config.problem.scene
    with jax.enable_x64(bool(config.x64)):
        problem, field, integrator, initial, dt, t1 = build(config)
        n_steps = insr.number_of_steps(0.0, t1, dt)
        key_init, key_run, key_ref = jax.random.split(jax.random.key(config.seed + 1), 3)

        start = time.perf_counter()
        fit = eqx.filter_jit(insr.fit_initial)(field, problem, initial, key=key_init, throw=False)
        jax.block_until_ready(fit.stats["loss"])
        initial_seconds = time.perf_counter() - start

        start = time.perf_counter()
        sol = _run(fit.value, integrator, problem, dt, t1, key_run)
        jax.block_until_ready(sol.stats["loss"])
        seconds_per_step = (time.perf_counter() - start) / n_steps
        eqx.tree_serialise_leaves(workdir / "weights.eqx", sol.value)
        times = np.asarray(sol.stats["ts"])
        np.save(workdir / "times.npy", times)

        x = grid_points(problem, int(config.eval.n_grid))
        n_params = sum(a.size for a in jax.tree_util.tree_leaves(eqx.filter(field, eqx.is_array)))
        references = {}
        if scene != "floor":
            references["floor"] = _run(
                exact_field(problem, scene), integrator, problem, dt, t1, key_ref
            )
        meshes = {
            "grid_first_order": p1_field(problem, int(n_params)),
            "grid_second_order": p2_field(problem, int(n_params)),
        }
        for name, mesh in meshes.items():
            if scene == "column":  # the initial condition at the nodes
                mesh = interpolate(mesh, problem.initial_condition)
            references[name] = _run(mesh, integrator, problem, dt, t1, key_ref)

        summary = {"error": scene_error(problem, scene, sol.value, x, dt, n_steps)}
        for name in ("floor", "grid_first_order", "grid_second_order"):
            ref = references.get(name)
            summary[name] = (
                None if ref is None else scene_error(problem, scene, ref.value, x, dt, n_steps)
            )
        summary["note"] = (
            "error: vs the scene's analytic answer (free_fall: mean displacement; stretch: "
            "lambda_2; column: energy ratio; floor scene: none). floor: the same integrator with "
            "an exact representation. grid_first_order / grid_second_order: P1 / P2 triangles "
            f"with {meshes['grid_first_order'].values.size} / "
            f"{meshes['grid_second_order'].values.size} nodal unknowns and the same integrator "
            "and sampling."
        )
        energy = energies(problem, sol.value, x, dt)
        ref_energy = {k: energies(problem, r.value, x, dt)["total"] for k, r in references.items()}
        u_plot = displacements(sol.value, x)

    summary.update(
        seconds_per_step=seconds_per_step,
        initial_seconds=initial_seconds,
        initial_loss=float(fit.stats["loss"]),
        scene=scene,
        n_steps=n_steps,
        dt=dt,
        n_params=int(n_params),
        param_bytes=int(4 * n_params),
        grid_bytes=int(4 * meshes["grid_first_order"].values.size),
        grid_second_order_bytes=int(4 * meshes["grid_second_order"].values.size),
        failed_steps=int(sol.stats["num_failed_steps"]),
        result=RESULTS[sol.result] if not bool(sol.successful) else "successful",
        mean_iterations=float(np.mean(np.asarray(sol.stats["iterations"]))),
        final_energy_ratio=float(energy["total"][-1] / energy["total"][0])
        if energy["total"][0]
        else None,
    )

    n = int(config.eval.n_grid)
    picks = np.unique(np.linspace(0, n_steps, int(config.eval.snapshots)).round().astype(int))
    ref_x = np.asarray(x).reshape(n, n, 2)
    deformed = np.asarray(x)[None] + u_plot[picks]
    extent = deformed.max(axis=(0, 1)) - deformed.min(axis=(0, 1))
    height = 3.2 * float(np.clip(extent[1] / extent[0], 0.25, 2.0))  # panels as tall as the body
    fig, axes = plt.subplots(
        1, len(picks), figsize=(3.2 * len(picks), height + 0.9), squeeze=False, layout="constrained"
    )
    for ax, idx in zip(axes[0], picks):
        q = (np.asarray(x) + u_plot[idx]).reshape(n, n, 2)
        step = max(1, n // 16)
        for k in range(0, n, step):
            ax.plot(q[k, :, 0], q[k, :, 1], "C0", lw=0.6)
            ax.plot(q[:, k, 0], q[:, k, 1], "C0", lw=0.6)
        ax.plot(*_outline(ref_x), "k--", lw=0.8, label="reference")
        ax.plot(*_outline(q), "C0", lw=1.5, label="INSR")
        if problem.floor is not None:
            ax.axhline(problem.floor, color="C3", lw=1.5, label="floor")
        ax.set_aspect("equal")
        ax.set_title(f"t = {times[idx]:.2f}")
    axes[0][0].legend(fontsize=7, loc="upper left")
    fig.suptitle(f"{scene}: deformed body (SIREN, {n_params} weights)")
    fig.savefig(workdir / "plots" / "deformed.png", dpi=120, bbox_inches="tight")
    plt.close(fig)

    fig, ax = plt.subplots(figsize=(7, 4))
    for label, curve in energy.items():
        ax.plot(times, curve, label=f"INSR {label}", lw=2 if label == "total" else 1)
    for label, curve in ref_energy.items():
        ax.plot(times, curve, ls="--", label=f"{label.replace('_', ' ')} total")
    ax.set_xlabel("t")
    ax.set_ylabel("energy (mean per sample)")
    ax.set_title(f"{scene}: energy")
    ax.legend(fontsize=7)
    fig.savefig(workdir / "plots" / "energy.png", dpi=120, bbox_inches="tight")
    plt.close(fig)
    return summary


def _outline(q: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The boundary polygon of an `(n, n, 2)` grid of (cell-midpoint) positions."""
    ring = np.concatenate([q[:, 0], q[-1, 1:], q[-2::-1, -1], q[0, -2::-1]])
    return ring[:, 0], ring[:, 1]


def validate_config(config) -> None:
    """Field, solver and evaluation sizes and choices, checked by the runner
    before anything is written."""
    validate_insr_config(
        config,
        positive=("eval.n_grid",),
        positive_numbers=(),
        choices={"problem.scene": insr.SCENES},
    )
