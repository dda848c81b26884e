"""The neural-operator experiment configs, run end to end in their tiny variants."""

import json
from pathlib import Path

import pytest

from experiments import run
from experiments.tasks.operators.operators_common import model_config
from experiments.tasks.operators.operators_table import markdown_table, parse_spec
from sciml.training import read_metrics


CONFIGS = Path(__file__).parents[2] / "experiments" / "configs"
SUMMARY_KEYS = ("test_rel_l2", "test_rel_h1", "test_rel_l2_2x", "n_params", "train_seconds")


# Upper bounds on the tiny runs' test errors (rel. L2, and at twice the resolution).
# Measured on CPU with fixed seeds, float64 (as this suite runs) / float32:
# darcy_fno 0.239, 0.262 / 0.202, 0.188; darcy_tfno 0.243, 0.247 / 0.230, 0.196;
# ns_tfno 0.103, 0.104 / 0.107, 0.107; ns_mgtfno 0.117, 0.120 / 0.289, 0.289.
# Each bound is about 1.25x the larger of the two, while predicting zero gives 1.0.
ERROR_BOUNDS = {
    "darcy_fno": (0.30, 0.33),
    "darcy_tfno": (0.31, 0.31),
    "ns_tfno": (0.14, 0.14),
    "ns_mgtfno": (0.36, 0.36),
}


@pytest.mark.parametrize("name", ["darcy_fno", "darcy_tfno", "ns_tfno", "ns_mgtfno"])
@pytest.mark.slow
def test_tiny_config_trains_and_reports(name, tmp_path):
    config = run.load_config(f"{CONFIGS / name}.py:tiny")
    summary = run.main_from_config(config, tmp_path)
    assert set(SUMMARY_KEYS) <= set(summary)
    # 60 steps give 10-25% test errors (predicting zero gives 100%)
    train = [m for m in read_metrics(tmp_path / "metrics.jsonl") if m["split"] == "train"]
    assert train[-1]["loss"] < 0.7 * train[0]["loss"]
    bound, bound_2x = ERROR_BOUNDS[name]
    assert 0.0 < summary["test_rel_l2"] < bound, summary["test_rel_l2"]
    assert 0.0 < summary["test_rel_l2_2x"] < bound_2x, summary["test_rel_l2_2x"]
    assert (tmp_path / "plots" / "predictions.png").is_file()


def test_variants_change_only_the_model():
    fno = run.load_config(f"{CONFIGS / 'darcy_fno'}.py")
    tfno = run.load_config(f"{CONFIGS / 'darcy_tfno'}.py")
    assert fno.model.factorization == "dense" and tfno.model.factorization == "tucker"
    mg = run.load_config(f"{CONFIGS / 'ns_mgtfno'}.py")
    assert (
        mg.model.kind == "mgtfno" and mg.data == run.load_config(f"{CONFIGS / 'ns_tfno'}.py").data
    )


@pytest.mark.slow
def test_compression_table_runs_and_resumes(tmp_path):
    config = run.load_config(f"{CONFIGS / 'ns_compression'}.py:tiny")
    with config.unlocked():
        config.models = ("joint:0.1", "mg1-cp:0.1")
    summary = run.main_from_config(config, tmp_path)
    for spec in config.models:
        assert 0.0 < summary[f"{spec}.test_rel_l2"] < 1.0
        assert summary[f"{spec}.compression"] == pytest.approx(
            summary["dense_params"] / summary[f"{spec}.n_params"]
        )
    table = (tmp_path / "table.md").read_text().splitlines()
    assert len(table) == 2 + len(config.models) and table[2].startswith("| joint:0.1 |")
    assert (tmp_path / "plots" / "compression.png").is_file()
    # finished models are read back, never retrained
    result = tmp_path / "models" / "joint-0.1" / "result.json"
    row = json.loads(result.read_text())
    row["test_rel_l2"] = 0.5
    result.write_text(json.dumps(row))
    again = run.main_from_config(config, tmp_path)
    assert again["joint:0.1.test_rel_l2"] == 0.5
    assert again["mg1-cp:0.1.test_rel_l2"] == summary["mg1-cp:0.1.test_rel_l2"]


def test_model_specs():
    base = model_config()
    assert parse_spec("dense", base).factorization == "dense"
    cfg = parse_spec("tt:0.02", base)
    assert (cfg.factorization, cfg.rank, cfg.kind) == ("tt", 0.02, "fno")
    cfg = parse_spec("joint:0.05", base)
    assert cfg.joint_factorization and cfg.factorization == "tucker"
    cfg = parse_spec("mg2-cp:0.1", base)
    assert (cfg.kind, cfg.levels, cfg.factorization) == ("mgtfno", 2, "cp")
    assert base.kind == "fno"  # the base config is not modified
    cfg = parse_spec("mg1-p8-tucker:0.1", base)
    assert (cfg.levels, cfg.padding_fraction, cfg.stitching) == (1, 1 / 8, True)
    cfg = parse_spec("mg2-p16-tiles-tucker:0.1", base)
    assert (cfg.levels, cfg.padding_fraction, cfg.stitching) == (2, 1 / 16, False)
    cfg = parse_spec("mg1-tiles-cp:0.1", base)
    assert (cfg.padding_fraction, cfg.stitching) == (base.padding_fraction, False)
    bad_specs = ("tucker", "dense:0.1", "svd:0.1", "mg1-joint:0.1", "mg1-dense")
    for bad in (*bad_specs, "mg1-p0-tucker:0.1", "p8-tucker:0.1", "mg1-tiles-p8-cp:0.1"):
        with pytest.raises(ValueError, match="config.models"):
            parse_spec(bad, base)


def test_markdown_table_formats_rows():
    row = {
        "n_params": 1000,
        "train_seconds": 12.3,
        "peak_memory_mb": None,
        "test_rel_l2": 0.0123,
        "test_rel_h1": 0.05,
        "test_rel_l2_2x": None,
    }
    table = markdown_table({"tucker:0.1": row}, dense_params=10_000)
    assert (
        table.splitlines()[2] == "| tucker:0.1 | 1,000 | 10.0× | 1.23% | 5.00% | – | 12 | – | – |"
    )


def test_bad_spec_fails_before_work(tmp_path):
    config = run.load_config(f"{CONFIGS / 'ns_compression'}.py:tiny")
    with config.unlocked():
        config.models = ("dense", "tucker")
    with pytest.raises(ValueError, match="bad model spec 'tucker'"):
        run.main_from_config(config, tmp_path)
    assert not (tmp_path / "models").exists()
