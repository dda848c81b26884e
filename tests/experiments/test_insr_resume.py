"""The runner's `--resume` continues an INSR integration from its last
checkpoint and ends with the same fields and errors as the run that was not
interrupted."""

import json
import shutil
from pathlib import Path

import pytest

from experiments import run


CONFIG = str(Path(__file__).parents[2] / "experiments" / "configs" / "insr_advection1d.py")


@pytest.mark.slow
def test_resume_continues_an_interrupted_integration(tmp_path, capsys):
    workdir = tmp_path / "run"
    args = ["--config", CONFIG + ":tiny", "--config.train.checkpoint_every=1"]
    assert run.main([*args, "--workdir", str(workdir)]) == 0
    straight = json.loads((workdir / "summary.json").read_text())
    weights = (workdir / "weights.eqx").read_bytes()
    steps = sorted(int(p.name) for p in (workdir / "checkpoints").iterdir() if p.name.isdigit())
    assert steps[-1] == straight["n_steps"] == 3
    capsys.readouterr()

    # as if killed during the last step: its checkpoint was never written
    shutil.rmtree(workdir / "checkpoints" / "3")
    (workdir / "summary.json").unlink()
    assert run.main(["--resume", str(workdir)]) == 0
    assert "integrate: resuming from step 2 of 3" in capsys.readouterr().err
    resumed = json.loads((workdir / "summary.json").read_text())
    assert (workdir / "weights.eqx").read_bytes() == weights  # bit-identical fields
    for key in ("error", "final_error", "failed_steps", "mean_iterations"):
        assert resumed[key] == straight[key], key
