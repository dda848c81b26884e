"""Every task's `train_and_evaluate` reads as the experiment's outline.

Parsed with `ast`, nothing imported or run: each task module under
`experiments/tasks/` that defines `train_and_evaluate` keeps its body (the
docstring left out) to at most 60 lines, and draws no figure itself. Figures
come from the family's plotting functions (`<family>_plots.py`, each taking
`ax=None` and returning the axes) and are written with
`sciml.experiment.save_figure`.
"""

import ast
from pathlib import Path

import pytest


TASKS = Path(__file__).parents[2] / "experiments" / "tasks"
MAX_LINES = 60
# names a task body would draw through: pyplot, a figure, an axis, axes
DRAWING = {"plt", "pyplot", "matplotlib", "fig", "figure", "ax", "axes"}


def _train_and_evaluate(path: Path):
    tree = ast.parse(path.read_text(), filename=str(path))
    for node in ast.walk(tree):  # also one a factory builds (the online tasks')
        if isinstance(node, ast.FunctionDef) and node.name == "train_and_evaluate":
            return node
    return None


def _body_lines(fn: ast.FunctionDef) -> int:
    body = fn.body
    if isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
        body = body[1:]  # the docstring
    return fn.end_lineno - body[0].lineno + 1


def _drawing(fn: ast.FunctionDef) -> list[str]:
    """`name.attr` uses and imports of a drawing name inside `fn`, with their lines."""
    found = []
    for node in ast.walk(fn):
        if (
            isinstance(node, ast.Attribute)
            and isinstance(node.value, ast.Name)
            and node.value.id in DRAWING
        ):
            found.append(f"line {node.lineno}: {node.value.id}.{node.attr}")
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names = [getattr(node, "module", None) or ""] + [a.name for a in node.names]
            if any(n.split(".")[0] == "matplotlib" for n in names):
                found.append(f"line {node.lineno}: imports matplotlib")
    return found


TASK_FILES = sorted(p for p in TASKS.rglob("*.py") if _train_and_evaluate(p) is not None)


def test_the_tasks_are_found():
    # a moved folder must not leave this test checking nothing
    names = {p.stem for p in TASK_FILES}
    assert {"insr_elasticity", "ptd_robustness", "char_lm", "dcdm", "quickstart"} <= names


@pytest.mark.parametrize("path", TASK_FILES, ids=lambda p: str(p.relative_to(TASKS)))
def test_train_and_evaluate_reads_as_an_outline(path):
    fn = _train_and_evaluate(path)
    lines = _body_lines(fn)
    assert lines <= MAX_LINES, (
        f"{path.name}: train_and_evaluate is {lines} lines (at most {MAX_LINES}); move its "
        "steps into named functions"
    )
    drawing = _drawing(fn)
    assert not drawing, (
        f"{path.name}: train_and_evaluate draws itself ({'; '.join(drawing)}); call the "
        "family's plotting functions (ax=None, return the axes) and save_figure"
    )
