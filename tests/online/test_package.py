"""`sciml.online` imports its names on first use: a solver process (the worker,
`SolverClient`) starts without importing JAX, and the lazy table matches the
imports that type checkers and the API docs read."""

import ast
import re
import subprocess
import sys
from pathlib import Path

import sciml.online


def test_the_solver_side_imports_no_jax():
    code = (
        "import sys, sciml.online, sciml.online.worker\n"
        "from sciml.online import SolverClient, SolverJob\n"
        "assert 'jax' not in sys.modules, sorted(m for m in sys.modules if 'jax' in m)[:5]\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=120)


def test_lazy_names_match_the_typing_imports_and_resolve():
    tree = ast.parse(Path(sciml.online.__file__).read_text())
    typing_block = next(
        node for node in tree.body if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.dump(node)
    )
    imported = {
        alias.asname: f".{node.module}" for node in typing_block.body for alias in node.names
    }
    assert imported == sciml.online._EXPORTS
    for name in sciml.online.__all__:
        value = getattr(sciml.online, name)
        assert getattr(value, "__name__", name) == name or name.isupper()


def test_the_security_page_names_only_tests_that_exist():
    """Each `tests/...py::name` in docs/online_security.md is a test function
    of that file, and each file named alone exists."""
    root = Path(__file__).parents[2]
    page = (root / "docs" / "online_security.md").read_text()
    named = re.findall(r"`(tests/[\w/]+\.py)(?:::(\w+))?`", page)
    assert len(named) >= 20
    for path, name in named:
        source = (root / path).read_text()
        assert not name or re.search(rf"^def {name}\(", source, re.M), f"{path}::{name}"
