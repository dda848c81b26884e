"""The char-LM experiment end to end through the runner (tiny variant)."""

import json
from pathlib import Path

import pytest

from experiments import run
from sciml.experiment._run import significant


CONFIG = str(Path(__file__).parents[2] / "experiments" / "configs" / "char_lm.py")


@pytest.mark.slow
def test_char_lm_tiny_trains_identically_in_both_modes(tmp_path):
    config = run.load_config(CONFIG + ":tiny")
    summary = run.main_from_config(config, tmp_path)
    # 20 steps from uniform over 256 bytes (5.55 nats): clearly learning
    assert summary["final_loss_sequential"] < 5.2
    # same parameters, same batches: the curves agree to float32 round-off
    assert summary["max_abs_loss_difference"] < 1e-4
    assert abs(summary["final_loss_newton"] - summary["final_loss_sequential"]) < 1e-4
    assert abs(summary["val_bpc_newton"] - summary["val_bpc_sequential"]) < 1e-4
    assert 1 <= summary["newton_iterations_max"] <= 20
    assert summary["newton_fallbacks"] == 0
    assert summary["steps"] == 20 and summary["corpus_bytes"] == 200_000
    for name in ("summary.json", "plots/learning_curves.png", "sequential/metrics.jsonl"):
        assert (tmp_path / name).is_file(), name
    assert json.loads((tmp_path / "summary.json").read_text()) == significant(summary)
