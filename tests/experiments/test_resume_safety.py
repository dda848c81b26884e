"""A failed `--resume` leaves the run directory as it was; resumed runs add up.

One tiny quickstart run (a few seconds) is made once for the module; each test
copies it, tries to resume it in a way that must fail, and compares a hash of
every file (path and bytes) before and after.
"""

import hashlib
import json
import shutil
from pathlib import Path

import pytest

from sciml.experiment import main


ROOT = Path(__file__).resolve().parents[2]
QUICKSTART = str(ROOT / "experiments" / "configs" / "quickstart.py") + ":tiny"


def tree_hash(folder: Path) -> dict[str, str]:
    """`{relative path: sha256 of its bytes}` for every file, and every folder by name."""
    out = {}
    for path in sorted(folder.rglob("*")):
        name = str(path.relative_to(folder))
        out[name] = hashlib.sha256(path.read_bytes()).hexdigest() if path.is_file() else "dir"
    return out


@pytest.fixture(scope="module")
def finished_run(tmp_path_factory):
    run = tmp_path_factory.mktemp("quickstart") / "run"
    assert main(["--config", QUICKSTART, "--workdir", str(run)]) == 0
    return run


@pytest.fixture
def run_copy(finished_run, tmp_path):
    copy = tmp_path / "run"
    shutil.copytree(finished_run, copy)
    return copy


@pytest.mark.parametrize(
    "override",
    [
        "--config.model.width=7",  # other shapes: the checkpoint cannot be restored
        "--config.train.log_every=0",  # a wrong value: refused before anything runs
        "--config.optimizer.name=adamm",
        "--config.data.resolution=0",
    ],
)
def test_failed_resume_leaves_the_directory_byte_identical(run_copy, override, capsys):
    before = tree_hash(run_copy)
    # more steps than the checkpoint's 300, so that the override is what fails
    assert main(["--resume", str(run_copy), override, "--config.train.steps=320"]) == 2
    err = capsys.readouterr().err
    assert "error: " in err and "Traceback" not in err, err
    assert tree_hash(run_copy) == before
    # and it still resumes
    assert main(["--resume", str(run_copy)]) == 0


def test_train_seconds_add_up_across_resumes(run_copy):
    first = json.loads((run_copy / "summary.json").read_text())
    saved = json.loads((run_copy / "train_seconds.json").read_text())["train_seconds"]
    assert float(f"{saved:.4g}") == first["train_seconds"] > 0  # summary.json: 4 digits
    # stand in for a long first part, so the sum cannot be mistaken for the second part alone
    (run_copy / "train_seconds.json").write_text(json.dumps({"train_seconds": 1000.0}))
    assert main(["--resume", str(run_copy), f"--config.train.steps={first['steps'] + 20}"]) == 0
    second = json.loads((run_copy / "summary.json").read_text())
    assert second["steps"] == first["steps"] + 20
    assert 1000.0 < second["train_seconds"] < 1000.0 + 600


def test_resume_below_the_checkpoint_step_is_refused(run_copy, capsys):
    # Before: the step-300 model came back as the result of a 100-step run,
    # with only an info line ("resuming from step 300 of 100").
    before = tree_hash(run_copy)
    assert main(["--resume", str(run_copy), "--config.train.steps=100"]) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err, err
    assert "checkpoint at step 300, past train.steps = 100" in err
    assert f"--resume {run_copy} --config.train.steps=<more than 300>" in err
    assert tree_hash(run_copy) == before
    # the same steps: the run is finished, nothing is trained, and it says so
    assert main(["--resume", str(run_copy)]) == 0
    assert "step 300 of 300: the run is finished, nothing is left to train" in (
        capsys.readouterr().err
    )
