"""What the wheel ships: the library `sciml` under a distribution name of ours.

`pyproject.toml` is read directly; where hatchling (the build backend, in the
`dev` extra) is importable, its wheel builder lists the files a wheel would
hold, without building one; the last test builds and installs one into a
fresh environment and runs the installed command.
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


@pytest.mark.slow
def test_a_fresh_install_runs_the_checkouts_configs_from_its_root(tmp_path):
    """`pip install .` into a fresh environment, then the installed `sciml-run`
    run from the checkout's root on one of its configs (whose task is the
    checkout's `experiments.tasks.quickstart`), as its `--help` shows. The
    environment gets this one's third-party packages through a path entry
    (not its editable `sciml`: the `.pth` files of an added path are not
    read), so nothing is downloaded."""
    import os
    import subprocess
    import sys
    import sysconfig

    pytest.importorskip("hatchling")  # the build backend, for --no-build-isolation
    env_dir = tmp_path / "env"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(env_dir)], check=True)
    python = env_dir / "bin" / "python"
    purelib = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    Path(purelib, "_dependencies.pth").write_text(sysconfig.get_path("purelib") + "\n")
    install = [sys.executable, "-m", "pip", "--python", str(python), "install", "--quiet"]
    install += ["--no-deps", "--no-build-isolation", "--no-index", str(ROOT)]
    subprocess.run(install, check=True, timeout=300)
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    where = subprocess.run(
        [str(python), "-c", "import sciml; print(sciml.__file__)"],
        cwd=tmp_path,
        env=env,
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    assert Path(where).is_relative_to(env_dir), where  # the installed library, not the checkout
    config = "experiments/configs/quickstart.py:tiny"
    run = [str(env_dir / "bin" / "sciml-run"), "--config", config, "--workdir", str(tmp_path / "r")]
    done = subprocess.run(run, cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "r" / "summary.json").is_file()
