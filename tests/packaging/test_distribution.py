"""What the wheel ships: the library `sciml` under a distribution name of ours.

`pyproject.toml` is read directly; where hatchling (the build backend, in the
`dev` extra) is importable, its wheel builder lists the files a wheel would
hold, without building one. Building and installing a real wheel is the
manual check described in the README.
"""

import re
from pathlib import Path

import pytest


tomllib = pytest.importorskip("tomllib")  # Python >= 3.11

ROOT = Path(__file__).resolve().parents[2]
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
NAME = PYPROJECT["project"]["name"]


def test_distribution_name_is_ours():
    # `sciml` on the package index is an unrelated project.
    assert NAME == "sciml-jax"
    init = (ROOT / "sciml" / "__init__.py").read_text(encoding="utf-8")
    assert re.search(rf"_version\(\"{NAME}\"\)", init), (
        "sciml.__version__ must read {NAME}'s metadata"
    )


def test_wheel_packages_are_the_library_only():
    packages = PYPROJECT["tool"]["hatch"]["build"]["targets"]["wheel"]["packages"]
    assert packages == ["sciml"]


def test_checkout_folders_are_on_the_test_path():
    # `solvers` and `experiments` are not installed; tests import them from the checkout.
    assert "." in PYPROJECT["tool"]["pytest"]["ini_options"]["pythonpath"]


def test_wheel_file_list():
    builder_module = pytest.importorskip("hatchling.builders.wheel")
    builder = builder_module.WheelBuilder(str(ROOT))
    files = {Path(f.distribution_path).as_posix() for f in builder.recurse_included_files()}
    top = {f.split("/")[0] for f in files}
    assert top == {"sciml"}, f"the wheel would install top-level {sorted(top - {'sciml'})}"
    assert "sciml/ssm/ptd_perturbations.npz" in files  # package data
    for init in sorted(ROOT.glob("sciml/**/__init__.py")):
        assert init.relative_to(ROOT).as_posix() in files
    for module in sorted(ROOT.glob("sciml/**/*.py")):
        assert module.relative_to(ROOT).as_posix() in files
