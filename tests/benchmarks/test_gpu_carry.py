"""The carry folder for the GPU machine (`python -m benchmarks.gpu.carry`).

The GPU machine has torch, jax, numpy, scipy and the rest of `PREINSTALLED`;
a clean virtual environment here has none of them, and `pip install
--no-index` cannot fetch them. So the offline test is in two halves, both
honest about what they show:

1. every carried wheel installs offline, by the suite's own install step
   (`benchmarks.gpu._lease.install`: `pip install --no-index --no-deps`, the
   pure-Python wheels first), into a fresh Python 3.12 virtual environment (so each is a wheel for
   CPython 3.12 on this x86-64 Linux), and every carried top-level module
   that needs nothing preinstalled imports there (pyzmq, ml-collections and
   the pure-Python requirements);
2. the dependency closure is checked from the wheels' metadata: each
   requirement of a carried wheel is carried (in a version that satisfies
   it), preinstalled on the GPU machine, or left out on purpose (`wandb`).

The modules that import numpy, scipy or torch (pyamg, tensorly, neuralop)
are imported only on the GPU machine, by the suite's environment row.
"""

import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import tomllib

from benchmarks.gpu import _lease, carry


ROOT = Path(__file__).resolve().parents[2]
# carried distributions that import without the preinstalled packages
IMPORTS_ALONE = {
    "pyzmq": "zmq",
    "ml-collections": "ml_collections",
    "absl-py": "absl",
    "pyyaml": "yaml",
    "opt-einsum": "opt_einsum",
    "ruamel-yaml": "ruamel.yaml",
    "typing-extensions": "typing_extensions",
    "requests": "requests",
}


def python312() -> str | None:
    """A working Python 3.12: `python3.12` on the PATH, else a pyenv 3.12 (whose
    shim runs only where that version is selected)."""
    candidates = [shutil.which("python3.12")]
    if shutil.which("pyenv"):
        bare = subprocess.run(["pyenv", "versions", "--bare"], capture_output=True, text=True)
        for version in bare.stdout.split():
            if version.startswith("3.12"):
                prefix = subprocess.run(
                    ["pyenv", "prefix", version], capture_output=True, text=True
                )
                candidates.append(str(Path(prefix.stdout.strip()) / "bin" / "python3.12"))
    for candidate in filter(None, candidates):
        check = [candidate, "-c", "import sys; assert sys.version_info[:2] == (3, 12)"]
        if subprocess.run(check, capture_output=True).returncode == 0:
            return candidate
    return None


def test_names_and_markers_are_those_of_the_gpu_machine():
    # the markers of a Requires-Dist line decide whether it is carried
    assert carry.MARKERS["python_version"] == "3.12"
    assert carry.is_preinstalled("Torch") and carry.is_preinstalled("nvidia_cublas_cu12")
    assert carry.is_preinstalled("orbax_checkpoint")
    assert not carry.is_preinstalled("pyzmq")
    assert carry.canonical("ruamel.yaml") == "ruamel-yaml"


@pytest.mark.slow
def test_carry_folder_installs_offline_into_a_clean_python312(tmp_path):
    interpreter = python312()
    if interpreter is None:
        pytest.skip("no Python 3.12 here (python3.12 or a pyenv 3.12)")
    probe = [sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "six"]
    if subprocess.run([*probe, "--dest", str(tmp_path / "probe")]).returncode != 0:
        pytest.skip("no package index reachable: `pip download six` failed")
    dest = tmp_path / "carry"
    wheels = carry.prepare(dest)
    names = set(wheels)
    assert {"pyzmq", "pyamg", "ml-collections", "neuraloperator", "requests"} <= names
    assert not any(carry.is_preinstalled(n) for n in names)
    assert "wandb" not in names
    assert carry.unmet(wheels) == []
    size = carry.size_mib(dest.glob("*"))
    assert size + carry.tree_mib() < carry.LIMIT_MIB, size

    env = tmp_path / "venv"
    subprocess.run([interpreter, "-m", "venv", str(env)], check=True)
    python = env / "bin" / "python"
    assert (
        "3.12"
        in subprocess.run([python, "--version"], capture_output=True, text=True, check=True).stdout
    )
    # the suite's own install step (pure-Python wheels first, then the rest)
    with open(tmp_path / "pip.txt", "w") as log:
        record = _lease.install(dest, log, python=str(python))
    assert record["failed"] == [], (tmp_path / "pip.txt").read_text()[-3000:]
    assert set(record["installed"]) == names
    modules = [IMPORTS_ALONE[n] for n in names if n in IMPORTS_ALONE]
    assert {"zmq", "ml_collections", "requests"} <= set(modules)
    code = f"import importlib; [importlib.import_module(m) for m in {modules!r}]"
    done = subprocess.run([python, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr


def test_carry_prints_one_lease_command_and_pins_what_it_needs():
    assert carry.lease_command(".gpu-carry") == (
        "PYTHONPATH=. python3 -m benchmarks.gpu --lease --carry .gpu-carry --out $OUT"
    )
    for requirement in carry.NEEDED:
        assert "==" in requirement, requirement
    # the pure-Python need the configs import comes first
    assert carry.NEEDED[0].startswith("ml-collections==")


def test_every_dependency_of_the_package_is_carried_or_preinstalled():
    # the lease of 2026-11-30 lost its online row to this: tensorboardX, which
    # the training log imports, was neither carried nor on the GPU machine
    from packaging.requirements import Requirement

    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    carried = {carry.canonical(Requirement(line).name) for line in carry.NEEDED}
    needed = [Requirement(line).name for line in project["dependencies"]]
    missing = [
        name
        for name in needed
        if not carry.is_preinstalled(name) and carry.canonical(name) not in carried
    ]
    assert missing == []


def test_unmet_requirements_are_reported(tmp_path, monkeypatch):
    # a carried wheel that needs a package neither carried nor preinstalled
    from packaging.requirements import Requirement

    needs = {
        "alpha": [Requirement("beta>=2"), Requirement("numpy"), Requirement("wandb")],
        "beta": [],
    }
    wheels = {"alpha": tmp_path / "alpha-1.0-py3-none-any.whl"}
    monkeypatch.setattr(carry, "requirements", lambda path: needs[carry.wheel_name(path)])
    assert carry.unmet(wheels) == ["alpha needs beta>=2"]
    wheels["beta"] = tmp_path / "beta-1.5-py3-none-any.whl"
    assert carry.unmet(wheels) == ["alpha needs beta>=2"]  # too old
    wheels["beta"] = tmp_path / "beta-2.1-py3-none-any.whl"
    assert carry.unmet(wheels) == []
