"""The line a run ends with: the headline beside its baseline, the wall time,
where the plots and the summary are."""

import pytest

from sciml.experiment import ConfigError, Headline, parse
from sciml.experiment._verdict import duration, verdict
from tests.experiments.test_runner import _project


FLAGSHIP = Headline(
    "val_rel_l2", "validation rel. L2", "persistence_rel_l2", "persistence", percent=True
)


def test_the_verdict_names_headline_baseline_time_and_files():
    summary = {"val_rel_l2": 0.0137, "persistence_rel_l2": 0.124, "steps": 1500}
    assert verdict(summary, FLAGSHIP, 492.4, "runs/online_ns_tfno/t") == (
        "done in 8 min 12 s: validation rel. L2 1.37 % (persistence 12.4 %)\n"
        "  plots: runs/online_ns_tfno/t/plots/, summary: runs/online_ns_tfno/t/summary.json"
    )
    # a task without the baseline's key (online_heat), without a headline, a nested key
    assert verdict({"val_rel_l2": 0.05}, FLAGSHIP, 41.0, "r").splitlines()[0] == (
        "done in 41 s: validation rel. L2 5 %"
    )
    assert verdict(summary, None, 4.21, "r").splitlines()[0] == "done in 4.2 s"
    nested = Headline("eval.scene.iterations", "DCDM iterations", "eval.cg", "CG")
    summary = {"eval": {"scene": {"iterations": 23}, "cg": 85.0}}
    assert verdict(summary, nested, 3725.0, "r").splitlines()[0] == (
        "done in 1 h 02 min: DCDM iterations 23 (CG 85)"
    )
    assert verdict({"steps": 3}, FLAGSHIP, 60.0, "r").splitlines()[0] == "done in 1 min 00 s"
    assert duration(59.6) == "1 min 00 s"


def test_a_bad_headline_is_refused_when_declared():
    with pytest.raises(TypeError, match="`metric` must be a non-empty string, got ''"):
        Headline("", "test error")
    with pytest.raises(ValueError, match="give `baseline` and `baseline_name` together"):
        Headline("test_mse", "test error", baseline="mean_mse")


def test_a_task_headline_that_is_not_a_headline_is_refused_before_anything_is_written(
    tmp_path, untyped
):
    config = _project(tmp_path / "project")
    task = tmp_path / "project" / "tasks" / "regression.py"
    declared = "TASK = Task(train_and_evaluate, build=build"
    task.write_text(
        task.read_text().replace(declared, f'{declared}, headline=("test_mse", "test error")')
    )
    with pytest.raises(
        ConfigError, match="`headline` must be a sciml.experiment.Headline, got tuple"
    ):
        parse(["--config", str(config), "--workdir", str(tmp_path / "run")])
    assert not (tmp_path / "run").exists()
