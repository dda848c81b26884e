"""How a DCDM generator's iteration count grows with the grid: held-out closed
tanks and free-surface scenes from 64² to 512², against CG, IC(0), MIC(0) and
AMG-PCG.

Every scene (`--families` × `--seeds` × `--resolutions`) gets one right-hand
side (`--rhs`: `divergence`, `b = −div u*` of a random smooth velocity, the
paper's kind of system; or `smooth`), solved from `x₀ = 0` to the tightest of
`--rtols` by every method through the same `sciml.dcdm.solve` (float64 outer
loop, one relative criterion on the true residual); the looser tolerances are
read off the same iterates. One JSON line per scene and method is appended to
`--out` as it finishes, and a rerun skips the lines already there (so a killed
run resumes; the baselines' lines serve every model evaluated into the same
file, so a second model costs only its own solves). At the end, per family and tolerance: the mean iterations per
size and method, and DCDM's growth per doubling (per scene,
`(iterations at the largest / at the smallest)^(1 / doublings)`; the mean over
scenes, and the largest single doubling), also written as Markdown beside
`--out`.

The generator is `--model`: a shipped name (`poisson2d`) or a run directory
of `experiments/configs/dcdm_poisson2d.py`. Held-out seeds are never used
for any choice: the defaults (201–204) are the final evaluation's.

usage: python -m benchmarks.dcdm_growth [--model poisson2d] [--resolutions 64 128 256 512]
       [--families closed free_surface] [--seeds 201 202 203 204] [--rhs divergence]
       [--rtols 1e-6 1e-4] [--methods dcdm cg ic0 mic0 amg] [--out PATH]
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np

from benchmarks._common import emit, environment, machine_load
from experiments.configs import dcdm_poisson2d
from experiments.tasks.dcdm.dcdm import FAMILIES, evaluate_scenes, make_model, scene_name
from sciml.dcdm import pretrained
from sciml.dcdm._pretrained import NAMES
from sciml.experiment import load_run


METHODS = ("dcdm", "cg", "ic0", "mic0", "amg")


def load_generator(model: str):
    """A shipped generator by name, or the trained model of a run directory."""
    if model in NAMES:
        return pretrained(model)
    if Path(model).is_dir():
        return load_run(model, build_model=make_model)[0]
    raise ValueError(
        f"--model must be a shipped name {NAMES} or a run directory of the dcdm_poisson2d "
        f"experiment, got {model!r}."
    )


def growth(iterations: list[int | None]) -> dict[str, float | None]:
    """Per-doubling growth of one scene's counts over consecutive doublings:
    the geometric mean `(last / first)^(1 / doublings)` and the largest single
    ratio (`None` where a count is missing: not converged)."""
    if len(iterations) < 2 or any(n is None or n < 1 for n in iterations):
        return {"mean": None, "max": None}
    ratios = [b / a for a, b in zip(iterations, iterations[1:])]
    return {
        "mean": (iterations[-1] / iterations[0]) ** (1 / len(ratios)),
        "max": max(ratios),
    }


def read_rows(path: Path) -> list[dict]:
    if not path.is_file():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def table(rows: list[dict], resolutions, families, seeds, rtols, methods) -> str:
    """The Markdown summary: per family and tolerance, mean iterations per size
    and method, and DCDM's growth per doubling (mean over scenes, largest)."""
    lookup = {(r["family"], r["seed"], r["resolution"], r["method"]): r for r in rows}
    lines = []
    for family in families:
        for rtol in rtols:
            key = f"{rtol:g}"  # as `iterations_at` names it
            shown = f"{rtol:.0e}".replace("e-0", "e-")
            lines += [
                f"**{family.replace('_', ' ')}, rtol {shown}** (mean iterations over seeds "
                f"{', '.join(map(str, seeds))})",
                "",
                "| method | "
                + " | ".join(f"{n}²" for n in resolutions)
                + " | growth per doubling |",
                "| --- " * (len(resolutions) + 2) + "|",
            ]
            for method in methods:
                counts = {
                    s: [
                        lookup.get((family, s, n, method), {}).get("iterations_at", {}).get(key)
                        for n in resolutions
                    ]
                    for s in seeds
                }
                means = []
                for i in range(len(resolutions)):
                    column = [c[i] for c in counts.values()]
                    means.append(
                        "—" if any(c is None for c in column) else f"{np.mean(column):.1f}"
                    )
                grown = [growth(c) for c in counts.values()]
                if any(g["mean"] is None for g in grown):
                    summary = "—"
                else:
                    summary = (
                        f"{np.mean([g['mean'] for g in grown]):.2f} "
                        f"(largest {max(g['max'] for g in grown):.2f})"
                    )
                lines.append(f"| {method} | " + " | ".join(means) + f" | {summary} |")
            lines.append("")
    return "\n".join(lines)


def main(argv=None) -> str:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="poisson2d")
    parser.add_argument("--resolutions", type=int, nargs="+", default=[64, 128, 256, 512])
    parser.add_argument("--families", nargs="+", choices=FAMILIES, default=list(FAMILIES))
    parser.add_argument("--seeds", type=int, nargs="+", default=[201, 202, 203, 204])
    parser.add_argument("--rhs", choices=("divergence", "smooth"), default="divergence")
    parser.add_argument("--rtols", type=float, nargs="+", default=[1e-6, 1e-4])
    parser.add_argument("--methods", nargs="+", choices=METHODS, default=list(METHODS))
    parser.add_argument("--max-steps", type=int, default=6000)
    parser.add_argument("--out", type=Path, default=Path("runs/dcdm_growth/rows.jsonl"))
    args = parser.parse_args(argv)
    if sorted(args.resolutions) != args.resolutions or len(set(args.resolutions)) < 2:
        parser.error("--resolutions: two or more sizes, increasing")
    model = load_generator(args.model)
    config = dcdm_poisson2d.get_config()
    config.eval.rtol = min(args.rtols)
    config.eval.rtols = tuple(sorted(args.rtols))
    config.eval.rhs = args.rhs
    config.eval.max_steps = args.max_steps
    args.out.parent.mkdir(parents=True, exist_ok=True)
    rows = read_rows(args.out)
    # the baselines do not depend on the generator: one row per scene serves
    # every model evaluated into the same file
    own = lambda r: r["method"] != "dcdm" or r["model"] == args.model  # noqa: E731
    done = {(r["rhs"], r["scene"], r["method"]) for r in rows if own(r)}
    env = environment()
    for n in args.resolutions:  # the small grids of every scene first
        for family in args.families:
            for seed in args.seeds:
                name = scene_name(n, seed, family)
                todo = [m for m in args.methods if (args.rhs, name, m) not in done]
                if not todo:
                    continue
                config.eval.resolutions, config.eval.families = (n,), (family,)
                config.eval.scene_seeds, config.eval.methods = (seed,), tuple(todo)
                results, _ = evaluate_scenes(model, config)
                for method, record in results[name].items():
                    row = {
                        "benchmark": "dcdm_growth",
                        "load": machine_load(),
                        "model": args.model,
                        "rhs": args.rhs,
                        "scene": name,
                        "family": family,
                        "seed": seed,
                        "resolution": n,
                        "method": method,
                        **record,
                        **env,
                    }
                    emit(row)
                    with args.out.open("a") as f:
                        f.write(json.dumps(row, default=float) + "\n")
                    rows.append(row)
    mine = [r for r in rows if own(r) and r["rhs"] == args.rhs]
    text = table(
        mine, args.resolutions, args.families, args.seeds, sorted(args.rtols), args.methods
    )
    args.out.with_suffix(".md").write_text(text + "\n")
    print(text)
    return text


if __name__ == "__main__":
    main()
