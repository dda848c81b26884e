"""The turbulent Navier–Stokes comparison (`ns_turbulent`): its spectrum, the
tiny config end to end (tables per training-set size, summary keys, plots,
resume), and the pre-registered paired comparison (its t-interval, verdict and
5-seed smoke run)."""

import json

import numpy as np
import pytest

from experiments import run
from experiments.tasks.operators.ns_turbulent import (
    PAIRED_METRICS,
    overfitting,
    paired_results,
    radial_spectrum,
    sweep_learning_rates,
    verdict,
)
from sciml.experiment import choose_on_grid, paired_difference


CONFIGS = run.__file__.rsplit("/", 1)[0] + "/configs"
PAPER_MODELS = run.load_config(f"{CONFIGS}/ns_turbulent.py:paper").models


def test_radial_spectrum_of_single_modes_and_parseval():
    s = 32
    x = np.arange(s) / s
    # cos(2π(3x + 4y)) has |k| = 5 exactly; amplitude a gives mean(w²) = a²/2
    w = 2.0 * np.cos(2 * np.pi * (3 * x[:, None] + 4 * x[None, :]))
    k, e = radial_spectrum(w)
    assert k.shape == e.shape == (s // 2 + 1,)
    np.testing.assert_allclose(e[5], 2.0, rtol=1e-12)
    np.testing.assert_allclose(np.delete(e, 5), 0.0, atol=1e-24)
    # the (1, 1) mode, |k| = √2, lands in shell round(√2) = 1
    w = np.sin(2 * np.pi * (x[:, None] + x[None, :]))
    np.testing.assert_allclose(radial_spectrum(w)[1][1], 0.5, rtol=1e-12)
    # Parseval on a random batch: the shells sum to mean(w²) (the corner modes
    # beyond |k| = s/2 are outside the shells, so a band-limited field is used)
    rng = np.random.default_rng(0)
    coeffs = np.zeros((3, s, s), complex)
    coeffs[:, :6, :6] = rng.normal(size=(3, 6, 6)) + 1j * rng.normal(size=(3, 6, 6))
    w = np.fft.ifft2(coeffs).real
    np.testing.assert_allclose(radial_spectrum(w)[1].sum(), np.mean(w**2), rtol=1e-12)
    with pytest.raises(ValueError, match="`w` must be square"):
        radial_spectrum(np.zeros((4, 8)))


@pytest.mark.slow
def test_tiny_config_reports_every_size_and_model_and_resumes(tmp_path):
    config = run.load_config(f"{CONFIGS}/ns_turbulent.py:tiny")
    summary = run.main_from_config(config, tmp_path)
    for n in config.train_sizes:
        for spec in config.models:
            for metric in (
                "test_rel_l2",
                "test_rel_h1",
                "test_rel_l2_2x",
                "n_params",
                "compression",
                "peak_memory_mb",
            ):
                assert np.isfinite(summary[f"n{n}/{spec}.{metric}"]), (n, spec, metric)
    assert summary["n8/dense.compression"] == 1.0
    # the per-tile MG-TFNO has its own parameters (two input channels per tile)
    assert summary["n8/mg1-p8-tiles-tucker:0.1.compression"] > 1.0
    table = (tmp_path / "table.md").read_text()
    assert "### 8 training samples" in table and "### 16 training samples" in table
    for name in ("compression", "predictions", "spectra"):
        assert (tmp_path / "plots" / f"{name}.png").stat().st_size > 10_000
    spectra = json.loads((tmp_path / "spectra.json").read_text())
    assert set(spectra) == {"truth", *config.plot_models}
    # resume: every model has its result, so nothing retrains and the numbers repeat
    again = run.main_from_config(config, tmp_path)
    assert again == summary


def test_plot_models_must_be_trained(tmp_path):
    config = run.load_config(f"{CONFIGS}/ns_turbulent.py:tiny")
    with config.unlocked():
        config.plot_models = ("tucker:0.1",)
    with pytest.raises(ValueError, match="config.plot_models"):
        run.main_from_config(config, tmp_path)
    assert not (tmp_path / "models").exists()


SHARDED = """
import jax, optax
from experiments import run
from experiments.tasks.operators.operators_ns import data_from_config, experiment
from experiments.tasks.operators.operators_common import train_step_memory
from experiments.tasks.operators.operators_table import parse_spec, sharded_step_memory
config = run.load_config("{configs}/ns_turbulent.py:tiny")
config.memory_devices = 4
data = data_from_config(config)
optimizer = optax.adam(1e-3)
out = []
for spec in ("mg1-p8-tucker:0.1", "dense"):
    model_cfg = parse_spec(spec, config.model)
    exp = experiment(config, data, model_cfg)
    batch = exp.batch_fn(0, jax.random.key(0))
    out.append(train_step_memory(exp.model, exp.loss_fn, batch, optimizer))
    out.append(sharded_step_memory(config, model_cfg, exp, batch, optimizer))
print(jax.device_count(), *out)
"""


@pytest.mark.slow
def test_mg_rows_get_their_memory_per_device_with_the_tiles_sharded():
    import os
    import subprocess
    import sys

    env = {**os.environ, "XLA_FLAGS": "--xla_force_host_platform_device_count=4"}
    result = subprocess.run(
        [sys.executable, "-c", SHARDED.format(configs=CONFIGS)],
        capture_output=True,
        text=True,
        env=env,
        check=True,
    )
    devices, mg, mg_sharded, dense, dense_sharded = result.stdout.split()[-5:]
    assert devices == "4" and dense_sharded == "None"
    # 4 tiles of the batch, one per device: each holds about a quarter of the
    # tile activations (measured 0.26 of the one-device peak; parameters and
    # optimiser state are replicated)
    assert 0.2 < int(mg_sharded) / int(mg) < 0.35, (mg, mg_sharded)


# --- the pre-registered paired comparison (`:paper`) ----------------------------


def test_paired_interval_matches_a_hand_computed_value():
    # d = baseline - candidate = (2, 2, -1, 4, 2) / 100: mean 0.018, sample sd
    # sqrt(1.28e-3 / 4) = 0.017889, standard error 0.008 exactly; t(0.975, 4 dof)
    # = 2.776445 from a t table, so the interval is 0.018 -+ 0.0222116
    baseline = [0.30, 0.32, 0.29, 0.35, 0.31]
    candidate = [0.28, 0.30, 0.30, 0.31, 0.29]
    diff = paired_difference(baseline, candidate)
    half = 2.776445 * 0.008
    # rtol 1e-6 for the table's 7 digits (measured 2e-7); the sd over n instead of
    # n - 1 misses by 0.56, the normal quantile 1.96 instead of t by 1.55
    np.testing.assert_allclose(
        [diff["mean"], diff["low"], diff["high"]], [0.018, 0.018 - half, 0.018 + half], rtol=1e-6
    )
    assert verdict(diff) == "not shown: the interval contains 0"
    assert verdict(paired_difference(baseline, np.subtract(candidate, 0.03))) == "direction holds"
    assert verdict(paired_difference(candidate, baseline)) == "not shown: the interval contains 0"
    assert verdict({"low": -0.2, "high": -0.1}) == "direction reversed"
    with pytest.raises(ValueError, match="two or more seeds"):
        paired_difference([0.3], [0.2])


def test_paired_results_hold_every_seed_and_each_candidates_verdict():
    rng = np.random.default_rng(0)
    runs = {
        spec: {
            seed: {m: float(rng.uniform(0.1, 0.2)) + shift for m in PAIRED_METRICS}
            for seed in (0, 1, 2)
        }
        for spec, shift in (("dense", 0.5), ("joint:0.001", 0.0), ("mg2-p16-joint:0.001", 0.9))
    }
    for seed in (0, 1, 2):  # the training curve of one model
        runs["dense"][seed].update({"train_rel_h1@500": 0.8, "train_rel_h1@1000": 0.7})
    summary, table = paired_results(runs, ("dense", "joint:0.001", "mg2-p16-joint:0.001"))
    # every seed 0.3 to 0.6 apart one way, 0.3 to 0.5 the other
    assert summary["paired/joint:0.001.verdict"] == "direction holds"
    assert summary["paired/mg2-p16-joint:0.001.verdict"] == "direction reversed"
    for seed in (0, 1, 2):
        for m in PAIRED_METRICS:
            assert summary[f"dense/seed{seed}.{m}"] == runs["dense"][seed][m]
        assert summary[f"dense/seed{seed}.train_rel_h1@1000"] == 0.7
    test_h1 = [
        runs["dense"][s]["test_rel_h1"] - runs["joint:0.001"][s]["test_rel_h1"] for s in (0, 1, 2)
    ]
    np.testing.assert_allclose(
        summary["paired/joint:0.001.test_rel_h1.mean"], np.mean(test_h1), rtol=1e-14
    )
    assert "**direction holds**" in table and "**direction reversed**" in table
    assert table.count(" | 2 | ") == 3  # a row per model and seed
    assert "train H1, step 500 | train H1, step 1000 |" in table
    # the dense model's train and test errors are alike (0.6-0.7): no overfitting
    assert summary["paired.overfitting"] == "overfitting regime not shown"


def test_overfitting_needs_every_seed_below_the_ratio():
    rows = {
        0: {"train_rel_h1": 0.20, "test_rel_h1": 0.30},
        1: {"train_rel_h1": 0.10, "test_rel_h1": 0.50},
    }
    # 0.20 / 0.30 = 0.667 and 0.2 are below 0.7; at 0.22 / 0.30 = 0.733 the first seed is not
    assert overfitting(rows) == "overfitting regime shown"
    rows[0]["train_rel_h1"] = 0.22
    assert overfitting(rows) == "overfitting regime not shown"


def test_a_rate_on_the_grid_edge_is_flagged():
    assert choose_on_grid({2e-3: 0.5, 4e-3: 0.4, 8e-3: 0.45}) == (4e-3, False)
    assert choose_on_grid({2e-3: 0.5, 4e-3: 0.4, 8e-3: 0.3}) == (8e-3, True)
    assert choose_on_grid({8e-3: 0.2, 2e-3: 0.1, 4e-3: 0.4}) == (2e-3, True)
    with pytest.raises(ValueError, match="three or more"):
        choose_on_grid({1e-3: 0.1, 2e-3: 0.2})


def test_the_sweep_scores_a_split_of_the_training_set_not_the_test_set(tmp_path, monkeypatch):
    import experiments.tasks.operators.ns_turbulent as task

    config = run.load_config(f"{CONFIGS}/ns_turbulent.py:paper64_tiny")
    with config.unlocked():
        config.models = ("dense", "joint:0.001")
        config.plot_models = config.paired = config.seeds = ()
        config.sweep_learning_rates = (1e-3, 1e-2, 1e-1)
    # samples numbered by their value: training 0..7, test 100..103
    x_train = np.arange(8.0)[:, None, None, None] * np.ones((1, 1, 4, 4))
    x_test = 100 + np.arange(4.0)[:, None, None, None] * np.ones((1, 1, 4, 4))
    monkeypatch.setattr(task, "raw_arrays", lambda config: (x_train, x_train, x_test, x_test))
    trained = []

    def train_model(config, spec, data, folder):  # lowest error at 1e-2 (dense) / 1e-1 (joint)
        trained.append((spec, data))
        lr = float(spec.split("@")[1])
        error = abs(np.log10(lr) + (2 if spec.startswith("dense") else 1)) + 0.1
        return {"test_rel_l2": error, "test_rel_h1": error, "n_params": 1, "train_seconds": 0.0}

    monkeypatch.setattr(task, "train_model", train_model)
    summary = sweep_learning_rates(config, tmp_path)
    assert [spec for spec, _ in trained] == [
        f"{s}@{lr:g}" for s in ("dense", "joint:0.001") for lr in (1e-3, 1e-2, 1e-1)
    ]
    # n_val = 4 of the 8 training samples are scored (scaled by the other 4's
    # statistics); the test samples never appear
    mean, std = np.mean(np.arange(4.0)), np.std(np.arange(4.0))
    for _, data in trained:
        np.testing.assert_allclose(np.asarray(data.x_train)[:, 0, 0, 0] * std + mean, [0, 1, 2, 3])
        np.testing.assert_allclose(np.asarray(data.x_test)[:, 0, 0, 0] * std + mean, [4, 5, 6, 7])
    assert (summary["sweep/dense.learning_rate"], summary["sweep/dense.at_edge"]) == (1e-2, False)
    assert summary["sweep/joint:0.001.learning_rate"] == 0.1
    assert summary["sweep/joint:0.001.at_edge"] is True
    assert summary["sweep/dense@0.01.val_rel_h1"] == 0.1
    table = (tmp_path / "sweep.md").read_text()
    assert (
        "| dense FNO | 110.00% (110.00%) | **10.00% (10.00%)** | 110.00% (110.00%) | 0.01 |"
        in table
    )
    assert (tmp_path / "plots" / "sweep.png").stat().st_size > 10_000


def test_subsampled_fields_are_the_fields_at_every_other_point():
    from experiments.tasks.operators.operators_ns import raw_arrays

    config = run.load_config(f"{CONFIGS}/ns_turbulent.py:tiny")
    with config.unlocked():  # two training samples, one test sample and its 64² twin
        config.data.n_train, config.data.n_test = 2, 1
    full = raw_arrays(config)
    with config.unlocked():
        config.data.subsample = 2
    coarse = raw_arrays(config)
    for a, b in zip(full, coarse, strict=True):
        assert b.shape == (*a.shape[:2], a.shape[2] // 2, a.shape[3] // 2)
        # point (i, j) of the 16² grid is point (2i, 2j) of the 32² one
        for i, j in ((0, 0), (3, 5), (b.shape[2] - 1, 1)):
            np.testing.assert_array_equal(b[:, :, i, j], a[:, :, 2 * i, 2 * j])
    with config.unlocked():
        config.data.subsample = 3
    with pytest.raises(ValueError, match="config.data.subsample: 3 does not divide"):
        run.validate(config)


def test_a_paired_comparison_needs_seeds_and_trained_models(tmp_path):
    config = run.load_config(f"{CONFIGS}/ns_turbulent.py:paper_tiny")
    assert config.seeds == (0, 1, 2, 3, 4) and config.paired == PAPER_MODELS
    with config.unlocked():
        config.seeds = (3,)
    with pytest.raises(ValueError, match="config.paired needs two or more distinct config.seeds"):
        run.main_from_config(config, tmp_path)
    with config.unlocked():
        config.seeds = (0, 1)
        config.paired = (PAPER_MODELS[0], "tucker:0.1")
    with pytest.raises(ValueError, match="config.paired must be two or more distinct models"):
        run.main_from_config(config, tmp_path)
    assert not (tmp_path / "models").exists()


@pytest.mark.slow
def test_paper64_tiny_gives_the_paired_table(tmp_path):
    # two of the five seeds and two of the three models keep it to four short
    # trainings (three candidates are checked in the paired table's test)
    config = run.load_config(f"{CONFIGS}/ns_turbulent.py:paper64_tiny")
    dense, mg = PAPER_MODELS[0], PAPER_MODELS[2]
    with config.unlocked():
        config.seeds = (0, 1)
        config.models = config.paired = config.plot_models = (dense, mg)
    summary = run.main_from_config(config, tmp_path)
    for seed in config.seeds:
        for spec in config.paired:
            # the training H1 of every evaluation (steps 5 and 10); the last is the final one
            for m in (*PAIRED_METRICS, "train_rel_h1@5", "train_rel_h1@10"):
                assert np.isfinite(summary[f"n8/{spec}/seed{seed}.{m}"]), (seed, spec, m)
            final = summary[f"n8/{spec}/seed{seed}.train_rel_h1"]
            assert summary[f"n8/{spec}/seed{seed}.train_rel_h1@10"] == final
        folder = tmp_path / "models" / "n8" / dense.replace(":", "-") / f"seed{seed}"
        assert (folder / "result.json").is_file()
    # the seeds differ (initialisation and batch order), the data do not
    test_l2 = [summary[f"n8/{dense}/seed{s}.test_rel_l2"] for s in config.seeds]
    assert test_l2[0] != test_l2[1]
    for m in PAIRED_METRICS:
        assert summary[f"n8/paired/{mg}.{m}.low"] < summary[f"n8/paired/{mg}.{m}.high"]
    assert summary[f"n8/paired/{mg}.verdict"] in (
        "direction holds",
        "direction reversed",
        "not shown: the interval contains 0",
    )
    assert summary["n8/paired.overfitting"] in (
        "overfitting regime shown",
        "overfitting regime not shown",
    )
    assert "#### 2 seeds, paired" in (tmp_path / "table.md").read_text()
    assert (tmp_path / "plots" / "paired.png").stat().st_size > 10_000
