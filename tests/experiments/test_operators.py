"""The neural-operator experiment configs, run end to end in their tiny variants."""

import json
from pathlib import Path

import pytest

from experiments import run
from experiments.tasks.operators.operators_common import model_config
from experiments.tasks.operators.operators_table import markdown_table, parse_spec, spec_config
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
    # the paper's model: the multi-grid decomposition with one Tucker tensor for all layers
    cfg = parse_spec("mg2-p16-joint:0.001", base)
    assert (cfg.kind, cfg.levels, cfg.padding_fraction) == ("mgtfno", 2, 1 / 16)
    assert (cfg.factorization, cfg.joint_factorization, cfg.rank) == ("tucker", True, 0.001)
    # a learning rate per model: the model config is that of the spec without it
    assert parse_spec("joint:0.001@1.6e-2", base) == parse_spec("joint:0.001", base)
    config = run.load_config(f"{CONFIGS / 'ns_compression'}.py:tiny")
    assert spec_config(config, "dense@4e-3").optimizer.learning_rate == 4e-3
    assert spec_config(config, "dense") is config and config.optimizer.learning_rate != 4e-3
    bad_specs = ("tucker", "dense:0.1", "svd:0.1", "mg1-dense", "dense@0", "dense@x", "dense@")
    for bad in (*bad_specs, "mg1-p0-tucker:0.1", "p8-tucker:0.1", "mg1-tiles-p8-cp:0.1"):
        with pytest.raises(ValueError, match="config.models"):
            parse_spec(bad, base)


def test_the_papers_mgtfno_has_48_pixel_tiles_and_over_150x_compression():
    # hidden 32, 24 modes, 4 layers (ns_turbulent's models): the 2-level MG-TFNO
    # with padding 1/16 sees 16 tiles of 32² + 2·8 = 48² at 128² (7.1× smaller than
    # the domain, the paper's "7×"), 3 windows × (field + 2 coordinates) = 9 channels
    import equinox as eqx
    import jax
    import jax.numpy as jnp

    from experiments.tasks.operators.operators_common import build_model

    def shapes(spec):  # the model's arrays as shapes only (the dense one has 2.6 M numbers)
        cfg = parse_spec(spec, model_config(n_modes=(24, 24), hidden_channels=32))
        return eqx.filter_eval_shape(build_model, cfg, 1, 1, jax.random.key(0))

    def count(model):  # real numbers, complex counting two
        leaves = jax.tree_util.tree_leaves(model)
        return sum(x.size * (2 if jnp.iscomplexobj(x) else 1) for x in leaves)

    mg = shapes("mg2-p16-joint:0.001")
    tiles = eqx.filter_eval_shape(mg.patch, jax.ShapeDtypeStruct((1, 128, 128), float))
    assert tiles.shape == (16, 9, 48, 48)
    assert 128**2 / 48**2 > 7
    # 2,569,057 is the dense FNO of docs/results.md; 16,229: the joint Tucker core
    # and factors (15,845 for the plain joint TFNO) plus the wider tile lifting
    assert (count(shapes("dense")), count(mg)) == (2_569_057, 16_229)
    assert 2_569_057 / 16_229 > 150


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
