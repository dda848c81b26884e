"""The runner's `--resume` continues an INSR integration (and, for
elasticity, its reference integrations) from the last checkpoints and ends
with the same fields and errors as the run that was not interrupted."""

import json
import shutil
from pathlib import Path

import pytest

from experiments import run


CONFIGS = Path(__file__).parents[2] / "experiments" / "configs"


def _steps(folder: Path) -> list[int]:
    return sorted(int(p.name) for p in folder.iterdir() if p.name.isdigit())


@pytest.mark.slow
@pytest.mark.parametrize(
    ("config", "keys", "references"),
    [
        ("insr_advection1d.py", ("error", "final_error"), ()),
        ("insr_elasticity.py", ("error", "floor", "grid_first_order"), ("grid_first_order",)),
    ],
)
def test_resume_continues_an_interrupted_integration(tmp_path, capsys, config, keys, references):
    workdir = tmp_path / "run"
    args = ["--config", str(CONFIGS / config) + ":tiny", "--config.train.checkpoint_every=1"]
    assert run.main([*args, "--workdir", str(workdir)]) == 0
    straight = json.loads((workdir / "summary.json").read_text())
    weights = (workdir / "weights.eqx").read_bytes()
    folders = [workdir / "checkpoints"]
    folders += [workdir / "references" / name / "checkpoints" for name in references]
    for folder in folders:
        assert _steps(folder)[-1] == straight["n_steps"] == 3
    capsys.readouterr()

    # as if killed during the last step of each: its checkpoint was never written
    for folder in folders:
        shutil.rmtree(folder / "3")
    (workdir / "summary.json").unlink()
    assert run.main(["--resume", str(workdir)]) == 0
    err = capsys.readouterr().err
    assert "integrate: resuming from step 2 of 3" in err
    for name in references:
        assert f"{name}: resuming from step 2 of 3" in err
    resumed = json.loads((workdir / "summary.json").read_text())
    assert (workdir / "weights.eqx").read_bytes() == weights  # bit-identical fields
    for key in (*keys, "failed_steps", "mean_iterations"):
        assert resumed[key] == straight[key], key
