"""Every ```python block of the Markdown pages and of the library's docstrings runs,
and every `Solution` it makes succeeded.

The tutorials are executed by the site build; this covers the other pages (API
reference, experiments, design, results, ...). The blocks of one page run in
order, as one script, in a fresh interpreter (64-bit mode off, as a reader's
first session is), in an empty folder; a `UserWarning` (a `PrecisionWarning`
included) is an error. At the end every `Solution` the script holds (also in
lists, tuples and dicts) must be successful. A block that cannot run outside a
cluster or without a user's own data says so in a comment on the line before
its fence, `<!-- snippet: not run (reason) -->`.

Snippets on the API pages use only the installed package's public API: no
`solvers`, `experiments` or `tests` imports and no private `sciml` modules
(docs/api/solvers.md documents `solvers` itself and may import it).
"""

import ast
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest


ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
_BLOCK = re.compile(
    r"(?:<!-- snippet: not run \((?P<reason>[^)]+)\) -->\s*\n)?^```python\n(?P<code>.*?)^```",
    re.DOTALL | re.MULTILINE,
)
_CHECK_SOLUTIONS = """
import jax.numpy as _jnp
import lineax as _lx
from sciml.solution import Solution as _Solution


def _unsuccessful(item):
    if isinstance(item, _Solution):
        return not bool(_jnp.all(item.successful))
    if isinstance(item, _lx.Solution):
        return not bool(_jnp.all(item.result == _lx.RESULTS.successful))
    return False


def _leaves(value, depth=0):
    yield value
    if depth < 2 and isinstance(value, (list, tuple)):
        for item in value:
            yield from _leaves(item, depth + 1)
    if depth < 2 and isinstance(value, dict):
        for item in value.values():
            yield from _leaves(item, depth + 1)


_failed = [
    (_name, str(_item))
    for _name, _value in list(globals().items())
    if not _name.startswith("_")
    for _item in _leaves(_value)
    if _unsuccessful(_item)
]
assert not _failed, f"unsuccessful Solution(s): {_failed}"
"""
# Pages whose snippets train or integrate for more than a few seconds.
SLOW = {"api/insr.md", "insr_fluids.md"}


def blocks(page: Path) -> list[tuple[str, str | None]]:
    """`(code, reason it is not run or None)` for each ```python block of `page`."""
    text = page.read_text(encoding="utf-8")
    return [(m.group("code"), m.group("reason")) for m in _BLOCK.finditer(text)]


PAGES = sorted(
    str(p.relative_to(DOCS)) for p in DOCS.rglob("*.md") if "```python" in p.read_text("utf-8")
)


def test_pages_are_found():
    assert "api/dcdm.md" in PAGES and "experiments.md" in PAGES


def _imports(code: str) -> list[str]:
    names = []
    for node in ast.walk(ast.parse(code)):
        if isinstance(node, ast.Import):
            names += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.append(node.module)
    return names


@pytest.mark.parametrize(
    "page", [p for p in PAGES if p.startswith("api/") and p != "api/solvers.md"]
)
def test_api_snippets_use_the_public_api(page):
    for code, _ in blocks(DOCS / page):
        for name in _imports(code):
            top = name.split(".")[0]
            assert top not in ("solvers", "experiments", "tests"), (
                f"{page}: imports {name!r}, which is not in the installed package"
            )
            assert not any(part.startswith("_") for part in name.split(".")), (
                f"{page}: imports the private module {name!r}"
            )


def run_script(script: str, folder: Path) -> subprocess.CompletedProcess:
    """`script` and the `Solution` check in a fresh interpreter, in `folder`."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("JAX_ENABLE_X64", "XLA_"))}
    env["MPLBACKEND"] = "Agg"
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    return subprocess.run(
        [sys.executable, "-W", "error::UserWarning", "-c", script + "\n" + _CHECK_SOLUTIONS],
        cwd=folder,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )


@pytest.mark.parametrize(
    "page", [pytest.param(p, marks=pytest.mark.slow) if p in SLOW else p for p in PAGES]
)
def test_page_snippets_run_and_succeed(page, tmp_path):
    runnable = [code for code, reason in blocks(DOCS / page) if reason is None]
    if not runnable:
        pytest.skip(f"{page}: every block is marked not run")
    result = run_script("\n\n".join(runnable), tmp_path)
    assert result.returncode == 0, f"{page}: its snippets failed:\n{result.stderr[-4000:]}"


def _docstring_blocks() -> list[tuple[str, int, str, str | None]]:
    """`(module file, block number, code, reason)` for each ```python block in the
    library's docstrings (mkdocstrings renders them on the API pages)."""
    found = []
    for path in sorted((ROOT / "sciml").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not isinstance(
                node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)
            ):
                continue
            doc = ast.get_docstring(node)
            if doc and "```python" in doc:
                for i, m in enumerate(_BLOCK.finditer(doc)):
                    found.append(
                        (str(path.relative_to(ROOT)), i, m.group("code"), m.group("reason"))
                    )
    return found


DOCSTRING_BLOCKS = _docstring_blocks()


def test_docstring_blocks_are_found():
    assert {f for f, *_ in DOCSTRING_BLOCKS} >= {"sciml/dcdm/_solver.py", "sciml/ssm/_models.py"}


@pytest.mark.parametrize(
    "path, index, code, reason",
    DOCSTRING_BLOCKS,
    ids=[f"{f}-{i}" for f, i, *_ in DOCSTRING_BLOCKS],
)
def test_docstring_snippets_run_and_succeed(path, index, code, reason, tmp_path):
    # each block alone, as a reader copies it from the API page
    if reason is not None:
        pytest.skip(f"{path}: marked not run ({reason})")
    for name in _imports(code):
        assert name.split(".")[0] not in ("solvers", "experiments", "tests"), (path, name)
    result = run_script(code, tmp_path)
    assert result.returncode == 0, f"{path} block {index} failed:\n{result.stderr[-4000:]}"


def test_an_unsuccessful_solution_fails_the_check(tmp_path):
    failing = (
        "import jax.numpy as jnp\n"
        "from sciml.dcdm import DCDM, Identity, solve\n"
        "sol = solve(lambda x: 2.0 * x - jnp.roll(x, 1) - jnp.roll(x, -1) + 0.1 * x,"
        " jnp.arange(8.0), Identity(), DCDM(rtol=1e-4, max_steps=1), throw=False)\n"
    )
    result = run_script(failing, tmp_path)
    assert result.returncode != 0 and "unsuccessful Solution" in result.stderr, result.stderr
    assert run_script(failing.replace("max_steps=1", "max_steps=50"), tmp_path).returncode == 0
