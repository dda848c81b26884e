"""Every study setting of an online config is checked by the runner's `parse()`
(the task's `validate_config`) before anything is written: each bad value fails
with one line naming the key, and leaves no run directory behind."""

from pathlib import Path

import pytest

from experiments import run
from sciml.experiment import ConfigError


CONFIG = str(Path(__file__).parents[2] / "experiments" / "configs" / "online_heat.py") + ":tiny"

# (override, words the error must contain): one bad setting each
BAD = [
    ("study.simulation=solvers.streams.no_such_solver", ["study.simulation", "no_such_solver"]),
    ("study.simulation=no_such_package.heat", ["study.simulation", "no_such_package"]),
    ("study.simulation=heat_fields", ["study.simulation", "dotted"]),
    ("study.solver=solvers.streams.heat_fields", ["'study.solver'", "'study.simulation'"]),
    ("study.concurrency=0", ["study.concurrency", ">= 1"]),
    ("study.concurrency=-2", ["study.concurrency", ">= 1"]),
    ("study.runs_per_job=0", ["study.runs_per_job"]),
    ("study.n_runs=-1", ["study.n_runs"]),
    ("study.max_attempts=0", ["study.max_attempts"]),
    ("study.timeout=0.0", ["study.timeout"]),
    ("study.start_timeout=-1.0", ["study.start_timeout"]),
    ("study.sampler=grid", ["study.sampler", "sobol"]),
    ("study.space.T0=[1.0,0.5]", ["study.space.T0"]),
    ("study.space.T0=[0.5,0.5]", ["study.space.T0"]),
    ("study.address=udp://host:1", ["study.address", "tcp://"]),
    ("buffer.capacity=0", ["buffer.capacity", ">= 1"]),
    ("buffer.capacity=-5", ["buffer.capacity", ">= 1"]),
    ("buffer.kind=ring", ["buffer.kind", "reservoir"]),
    ("train.batch_size=64", ["train.batch_size", "buffer.capacity"]),
    ("buffer.watermark=41", ["buffer.watermark", "buffer.capacity"]),
    ("buffer.watermark=-1", ["buffer.watermark"]),
    ("buffer.reads=0", ["buffer.reads"]),
    ("launcher.kind=kubernetes", ["launcher.kind", "slurm"]),
    ("launcher.threads=-1", ["launcher.threads"]),
]


def test_the_tiny_config_itself_passes(tmp_path):
    config, workdir = run.parse(["--config", CONFIG, "--workdir", str(tmp_path / "run")])
    assert workdir == tmp_path / "run" and not workdir.exists()


@pytest.mark.parametrize("override,words", BAD, ids=[o for o, _ in BAD])
def test_a_bad_study_setting_fails_in_parse_and_writes_nothing(tmp_path, override, words):
    workdir = tmp_path / "run"
    with pytest.raises(ConfigError) as info:
        run.parse(["--config", CONFIG, "--workdir", str(workdir), f"--config.{override}"])
    message = str(info.value)
    assert all(word in message for word in words), message
    assert "\n" not in message
    assert list(tmp_path.iterdir()) == []


def test_a_config_with_the_old_solver_key_is_told_the_new_one(tmp_path):
    """A study config written before the rename (`study.solver`) fails in `parse`."""
    config = tmp_path / "old_online.py"
    config.write_text(
        f"import importlib.util\n"
        f"spec = importlib.util.spec_from_file_location('online_heat', {CONFIG.split(':')[0]!r})\n"
        "online_heat = importlib.util.module_from_spec(spec)\n"
        "spec.loader.exec_module(online_heat)\n\n\n"
        "def get_config(variant=''):\n"
        "    config = online_heat.get_config('tiny')\n"
        "    config.study.solver = config.study.simulation\n"
        "    return config\n"
    )
    with pytest.raises(ConfigError, match="'study.solver' was renamed 'study.simulation'"):
        run.parse(["--config", str(config), "--workdir", str(tmp_path / "run")])
    assert not (tmp_path / "run").exists()
