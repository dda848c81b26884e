"""The house's loops read as outlines and ask nothing of what they hold.

Parsed with `ast`, nothing run: `fit`'s body (the docstring left out) is at
most 60 lines; `solve_recurrence` calls no `isinstance` on a solver type and
probes nothing with `getattr`; the runner reads the task's declared fields and
probes no task module with `getattr`.
"""

import ast
from pathlib import Path


ROOT = Path(__file__).resolve().parents[2]
SOLVERS = {"Sequential", "Newton", "DampedNewton", "Fallback", "Auto"}


def _function(path: str, name: str) -> ast.FunctionDef:
    tree = ast.parse((ROOT / path).read_text())
    (fn,) = [n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef) and n.name == name]
    return fn


def _body_lines(fn: ast.FunctionDef) -> int:
    body = fn.body
    if isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
        body = body[1:]
    return fn.end_lineno - body[0].lineno + 1


def _calls(node: ast.AST, name: str) -> list[ast.Call]:
    return [
        n
        for n in ast.walk(node)
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id == name
    ]


def test_fit_is_the_outline_of_its_loop():
    lines = _body_lines(_function("sciml/training/_fit.py", "fit"))
    assert lines <= 60, f"fit is {lines} lines; move a rule into a collaborator of _loop.py"


def test_solve_recurrence_asks_no_solver_what_it_is_and_probes_no_cell():
    fn = _function("sciml/pararnn/_solve.py", "solve_recurrence")
    kinds = [ast.unparse(c.args[1]) for c in _calls(fn, "isinstance")]
    assert not [k for k in kinds if any(s in k for s in SOLVERS | {"AbstractSolver"})], kinds
    assert not _calls(fn, "getattr")


def test_the_runner_reads_the_task_it_declared():
    for name in ("_cli.py", "_run.py", "_resume.py", "_run_dir.py"):  # `_task.py` declares
        path = ROOT / "sciml" / "experiment" / name
        probes = [ast.unparse(c) for c in _calls(ast.parse(path.read_text()), "getattr")]
        assert not probes, f"{path.name}: {probes}"
