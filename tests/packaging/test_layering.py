"""The import graph, read from the source: the library never imports
`solvers/`, `experiments/` or `benchmarks/`; `solvers/` never imports the
library; inside `sciml`, each subpackage imports only from floors below its
own (so models never import `sciml.training`, and nothing runs back up);
`sciml.training` sits beside the model families, so it imports none of them;
`sciml.transport`, the process boundary, imports only `sciml._checks`, numpy,
pyzmq and the standard library (a solver process imports it without JAX);
`sciml.distributed`, several processes as one, imports only jax, numpy and
the standard library; the online trainer and the runner stand side by side
on the top floor, so the runner imports nothing of `sciml.online`;
benchmarks import the library and `solvers/`, not `experiments/` (the few
that still run an experiment's set-up are listed, and the list only shrinks)."""

import ast
import sys
from pathlib import Path

import pytest


ROOT = Path(__file__).resolve().parents[2]
OUTSIDE = ("solvers", "experiments", "benchmarks")

# floor of each top-level name under `sciml`; an import may only go to a lower floor
FLOORS = {
    "__init__": 0,
    "_checks": 0,
    "_custom_types": 0,
    "_monitor": 0,
    "_deprecated": 0,
    "solution": 1,
    "transport": 1,  # the process boundary: see TRANSPORT_IMPORTS
    "recurrence": 1,
    "data": 1,
    "distributed": 1,  # several processes as one: see DISTRIBUTED_IMPORTS
    "operators": 2,  # models
    "ssm": 2,
    "pararnn": 2,
    "insr": 2,
    "dcdm": 2,
    "interop": 2,
    "training": 2,  # beside the models: the loop knows no model family
    "online": 3,
    "experiment": 3,  # the runner, beside the online trainer: neither imports the other
    "_launch": 4,  # the command line's first module: Ctrl-C before the runner's imports
}

# what `sciml.transport` may import besides the standard library and itself
TRANSPORT_IMPORTS = {"numpy", "zmq", "sciml._checks"}
# what `sciml.distributed` may import besides the standard library and itself
DISTRIBUTED_IMPORTS = {"jax", "numpy"}


# benchmarks that still run an experiment's own set-up (its config, model and
# data builders, or its whole task); a new benchmark imports the library and
# `solvers/` only, and a file leaves this list once its set-up has moved
BENCHMARKS_USING_EXPERIMENTS = {
    "benchmarks/dcdm.py",
    # the held-out size evaluation runs the dcdm task's own evaluation
    # (`evaluate_scenes`) and loads its run directories
    "benchmarks/dcdm_growth.py",
    "benchmarks/insr.py",
    "benchmarks/gpu/_paper.py",
    "benchmarks/gpu/_speed.py",
}


def imported_modules(path: Path, source: str) -> set[str]:
    """Absolute names of the modules `source` (the file at `path`, relative to
    the repository root) imports, relative imports resolved."""
    package = list(path.with_suffix("").parts)
    package = package[:-1]  # a module's package, or an `__init__`'s own package
    names = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if not node.level:
                names.add(node.module)
                continue
            base = package[: len(package) - (node.level - 1)]
            if node.module:
                names.add(".".join([*base, node.module]))
            else:  # `from .. import x`: x may be a module
                names.update(".".join([*base, alias.name]) for alias in node.names)
    return names


def violations(path: Path, source: str) -> list[str]:
    """The imports of one file that break the rules of the module docstring."""
    top, *rest = path.with_suffix("").parts
    found = []
    for name in sorted(imported_modules(path, source)):
        head = name.split(".")
        if top == "sciml" and head[0] in OUTSIDE:
            found.append(f"{path} imports {name}: the library never imports {head[0]}/")
        if top == "solvers" and head[0] == "sciml":
            found.append(f"{path} imports {name}: solvers/ never imports the library")
        if top == "sciml" and head[0] == "sciml" and len(head) > 1:
            here = rest[0] if rest else "__init__"
            there = head[1]
            if there != here and FLOORS[there] >= FLOORS[here]:
                found.append(
                    f"{path} imports {name}: sciml.{here} (floor {FLOORS[here]}) may import "
                    f"only from lower floors, sciml.{there} is on floor {FLOORS[there]}"
                )
    return found


def narrow_violations(
    path: Path, source: str, room: str = "transport", allowed: set[str] = TRANSPORT_IMPORTS
) -> list[str]:
    """The imports of a `sciml/<room>` file that are neither the standard
    library, nor `sciml.<room>` itself, nor in `allowed`."""
    found = []
    for name in sorted(imported_modules(path, source)):
        head = name.split(".")[0]
        if head in sys.stdlib_module_names or name.startswith(f"sciml.{room}"):
            continue
        if not any(name == m or name.startswith(m + ".") for m in allowed):
            found.append(f"{path} imports {name}: sciml.{room} imports only {allowed}")
    return found


def _files(top: str) -> list[Path]:
    return sorted(p.relative_to(ROOT) for p in (ROOT / top).rglob("*.py"))


def test_every_sciml_subpackage_has_a_floor():
    names = {p.parts[1].removesuffix(".py") for p in _files("sciml")}
    assert names <= set(FLOORS), f"give these a floor in FLOORS: {sorted(names - set(FLOORS))}"


@pytest.mark.parametrize("top", ["sciml", "solvers"])
def test_imports_follow_the_layers(top):
    found = [v for p in _files(top) for v in violations(p, (ROOT / p).read_text())]
    assert not found, "\n".join(found)


def test_the_transport_imports_only_the_standard_library_numpy_and_zmq():
    files = _files("sciml/transport")
    assert files
    found = [v for p in files for v in narrow_violations(p, (ROOT / p).read_text())]
    assert not found, "\n".join(found)
    path = Path("sciml/transport/_client.py")
    bad = "import jax\nimport zmq\nfrom .._checks import check_int\nfrom ..online import FIFO\n"
    assert narrow_violations(path, bad) == [
        f"{path} imports jax: sciml.transport imports only {TRANSPORT_IMPORTS}",
        f"{path} imports sciml.online: sciml.transport imports only {TRANSPORT_IMPORTS}",
    ]


def test_the_distributed_room_imports_only_jax_numpy_and_the_standard_library():
    files = _files("sciml/distributed")
    assert files
    found = [
        v
        for p in files
        for v in narrow_violations(p, (ROOT / p).read_text(), "distributed", DISTRIBUTED_IMPORTS)
    ]
    assert not found, "\n".join(found)


def test_the_runner_and_the_online_trainer_import_neither_the_other():
    path = Path("sciml/experiment/_supervisor.py")
    (found,) = violations(path, "from sciml.online import LocalLauncher\n")
    assert "sciml.experiment (floor 3) may import only from lower floors" in found
    # nothing above them but the command line's first module
    below_the_command = [floor for name, floor in FLOORS.items() if name != "_launch"]
    assert FLOORS["online"] == FLOORS["experiment"] == max(below_the_command)


def test_the_reader_sees_relative_absolute_and_forbidden_imports():
    path = Path("sciml/ssm/_models.py")
    source = (
        "import jax\nfrom ..recurrence import Dense\nfrom . import _init\n"
        "from sciml.training import fit\nfrom solvers.heat import solve\n"
    )
    assert imported_modules(path, source) == {
        "jax",
        "sciml.recurrence",
        "sciml.ssm._init",
        "sciml.training",
        "solvers.heat",
    }
    found = violations(path, source)
    assert len(found) == 2, found
    assert "sciml.ssm (floor 2) may import only from lower floors" in found[0]
    assert "the library never imports solvers/" in found[1]
    # the real tree has the edges this reader must see
    models = imported_modules(
        Path("sciml/pararnn/_solve.py"), (ROOT / "sciml/pararnn/_solve.py").read_text()
    )
    assert {"sciml.recurrence", "sciml.solution", "sciml._checks"} <= models
    init = Path("sciml/ssm/__init__.py")
    assert "sciml.ssm._s4d" in imported_modules(init, (ROOT / init).read_text())


def test_benchmarks_import_experiments_only_where_listed():
    using = {
        str(p)
        for p in _files("benchmarks")
        if any(
            name.split(".")[0] == "experiments"
            for name in imported_modules(p, (ROOT / p).read_text())
        )
    }
    new = sorted(using - BENCHMARKS_USING_EXPERIMENTS)
    assert not new, f"benchmarks import the library and solvers/, not experiments/: {new}"
    stale = sorted(BENCHMARKS_USING_EXPERIMENTS - using)
    assert not stale, f"these no longer import experiments/; remove them from the list: {stale}"
