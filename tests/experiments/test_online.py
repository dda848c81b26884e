"""The online-training configs besides the flagship, tiny, end to end: the heat
surrogate, and online vs offline (heat end to end; Navier–Stokes through its
offline part and the problem check)."""

import json
import math
from pathlib import Path

import h5py
import numpy as np
import pytest

from experiments import run
from experiments.tasks.online import online_ns, online_vs_offline
from experiments.tasks.online.online_common import study_from_config
from sciml.experiment._run import significant
from sciml.online import validation_data
from sciml.training import read_metrics


CONFIGS = Path(__file__).parents[2] / "experiments" / "configs"


@pytest.mark.slow
def test_online_heat_tiny_end_to_end(tmp_path):
    config = run.load_config(str(CONFIGS / "online_heat.py") + ":tiny")
    summary = run.main_from_config(config, tmp_path)
    study = config.study
    assert summary["samples_received"] == study.n_runs * study.n_steps
    assert summary["duplicates_dropped"] == 0 and summary["runs_failed"] == 0
    assert summary["runs_diverged"] == summary["validation_runs_diverged"] == 0
    assert summary["samples_trained"] == 4 * summary["steps"] == 4 * 40
    # 40 steps of a small MLP on 40 streamed fields: the MSE logged from step 10
    # on falls (measured 0.094 -> 0.054) and the validation error ends well below
    # that of predicting zero (1; measured 0.31).
    losses = [r["loss"] for r in read_metrics(tmp_path / "metrics.jsonl") if r["split"] == "train"]
    assert losses[-1] < 0.75 * losses[0]
    assert 0.0 < summary["val_rel_l2"] < 0.6
    for name in ("loss.png", "validation.png", "buffer.png", "predictions.png"):
        assert (tmp_path / "plots" / name).is_file(), name


@pytest.mark.slow
def test_online_vs_offline_tiny_end_to_end(tmp_path):
    config = run.load_config(str(CONFIGS / "online_vs_offline.py") + ":tiny")
    summary = run.main_from_config(config, tmp_path)
    study, m = config.study, config.offline.n_runs
    for key in ("offline_test_rel_l2", "online_test_rel_l2", "improvement_percent", "val_rel_l2"):
        assert math.isfinite(summary[key]), key
    assert 0 < summary["offline_test_rel_l2"] < 1 and 0 < summary["online_test_rel_l2"] < 1
    assert summary["offline_steps"] == summary["online_steps"] == summary["steps"] == 40
    # online: every planned run streamed; offline: only its M runs, on disk
    assert summary["samples_received"] == study.n_runs * study.n_steps
    assert summary["online_runs"] == study.n_runs and summary["offline_runs"] == m == 2
    with h5py.File(tmp_path / "offline" / "data.h5") as f:
        np.testing.assert_array_equal(np.unique(f["run"][...]), np.arange(m))
        assert f["done"][...].all() and f["temperature"].shape[0] == m * study.n_steps
    # both scored on the same held-out runs, whose parameters no training run has
    test = validation_data(study_from_config(config), tmp_path / "online" / "validation.h5")
    with h5py.File(tmp_path / "offline" / "data.h5") as f:
        assert not set(test["params"][:, 0]) & set(f["params"][:, 0])
    final = {}
    for part in ("offline", "online"):
        evals = [r for r in read_metrics(tmp_path / part / "metrics.jsonl") if r["split"] == "eval"]
        final[part] = evals[-1]["val_rel_l2"]
    assert final == {
        "offline": summary["offline_test_rel_l2"],
        "online": summary["online_test_rel_l2"],
    }
    assert (tmp_path / "plots" / "online_vs_offline.png").is_file()
    # a finished part is not run again: a second call only reads the summaries
    assert run.main_from_config(config, tmp_path) == summary
    assert json.loads((tmp_path / "summary.json").read_text()) == significant(summary)


@pytest.mark.slow  # ~40 s on 2 CPU cores (data generation, TFNO compile, 10 steps)
def test_online_vs_offline_navier_stokes_offline_part(tmp_path):
    config = run.load_config(str(CONFIGS / "online_vs_offline.py") + ":navier_stokes_tiny")
    config.train.steps = 10
    build = online_vs_offline.surrogate_builder(config)
    assert build is online_ns.surrogate
    study = study_from_config(config)
    test = validation_data(study)
    surrogate = build(config, study)
    untrained = surrogate.evaluate(surrogate.model, test)["val_rel_l2"]
    summary = online_vs_offline.run_offline(config, tmp_path, surrogate, study, test)
    assert summary["runs"] == 2 and summary["steps"] == 10
    assert summary["samples"] == 2 * study.n_steps and summary["epochs"] == 10 * 4 / 8
    # ten steps from a TFNO's initialisation learn: validation error measured 1.84
    # untrained, 1.12 after training (ratio 0.61); bound 0.75x the untrained error
    # measured here, which the untrained network (ratio 1) fails
    assert summary["val_rel_l2"] < 0.75 * untrained
    assert math.isfinite(summary["val_rel_h1"])


def test_online_vs_offline_problem_must_match_the_study():
    config = run.load_config(str(CONFIGS / "online_vs_offline.py") + ":tiny")
    config.problem = "navier_stokes"
    with pytest.raises(ValueError, match="needs config.study.simulation"):
        online_vs_offline.surrogate_builder(config)
    config.problem = "burgers"
    with pytest.raises(ValueError, match="config.problem must be one of"):
        online_vs_offline.surrogate_builder(config)
