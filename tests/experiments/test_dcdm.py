"""The DCDM experiment configs, run end to end in their tiny variants."""

from pathlib import Path

import numpy as np
import pytest

from experiments import run
from sciml.training import read_metrics


CONFIGS = Path(__file__).parents[2] / "experiments" / "configs"
METHODS = {"dcdm", "cg", "jacobi", "ic0", "mic0", "amg"}


@pytest.mark.parametrize("name", ["dcdm_poisson2d", "dcdm_poisson3d"])
@pytest.mark.slow
def test_tiny_config_trains_and_compares(name, tmp_path):
    config = run.load_config(f"{CONFIGS / name}.py:tiny")
    summary = run.main_from_config(config, tmp_path)
    # the scale-free loss is at most ‖b‖² = 1 and training lowers it
    train = [m for m in read_metrics(tmp_path / "metrics.jsonl") if m["split"] == "train"]
    assert train[-1]["loss"] < train[0]["loss"] <= 1.0
    assert set(summary["eval"]) == {f"n{n}_seed101" for n in config.eval.resolutions}
    for scene in summary["eval"].values():
        assert set(scene) == METHODS
        for method in ("cg", "jacobi", "ic0", "mic0", "amg"):
            record = scene[method]
            assert record["converged"] and record["relative_residual"] <= 1e-6
            assert record["result"] == "successful"
            assert record["iterations"] >= 1 and record["seconds"] > 0
        # whatever the tiny network does, a claimed convergence is real
        if scene["dcdm"]["converged"]:
            assert scene["dcdm"]["relative_residual"] <= 1e-6
        assert scene["amg"]["iterations"] <= scene["cg"]["iterations"]
    assert (tmp_path / "plots" / "residuals.png").is_file()
    assert (tmp_path / "ritz.h5").is_file()


@pytest.mark.parametrize("kind", ["symmetric", "multilevel"])
@pytest.mark.slow
def test_tiny_config_with_a_symmetric_model(kind, tmp_path):
    """The symmetric generators train with the A-norm loss (in [0, 1]); the
    multilevel one here on four scenes at once (two sizes, closed and free
    surface) with per-level gains and geometry masks, evaluated on both
    families with divergence right-hand sides at two tolerances."""
    config = run.load_config(f"{CONFIGS / 'dcdm_poisson2d'}.py:tiny")
    config.model.kind = kind
    config.model.label_channels = kind == "multilevel"
    config.eval.methods = ("dcdm", "cg")
    if kind == "multilevel":
        config.model.gains = 3
        config.data.resolutions, config.data.families = (16, 32), ("closed", "free_surface")
        config.eval.families, config.eval.rhs = ("closed", "free_surface"), "divergence"
        config.eval.rtols = (1e-4,)
    summary = run.main_from_config(config, tmp_path)
    train = [m for m in read_metrics(tmp_path / "metrics.jsonl") if m["split"] == "train"]
    assert train[-1]["loss"] < train[0]["loss"] <= 1.0
    if kind == "multilevel":  # the loss is the mean of the four scenes' losses
        scenes = [f"loss_n{n}_{f}_seed0" for n in (16, 32) for f in ("closed", "free_surface")]
        assert train[-1]["loss"] == pytest.approx(np.mean([train[-1][k] for k in scenes]))
        assert set(summary["eval"]) == {
            f"n{n}_{f}_seed101" for n in (16, 32) for f in ("closed", "free_surface")
        }
    for scene in summary["eval"].values():
        # a symmetric positive semi-definite generator makes DCDM a PCG
        # (tested exactly in tests/dcdm/test_symmetric.py): it converges
        assert scene["dcdm"]["converged"], scene["dcdm"]
        assert scene["dcdm"]["relative_residual"] <= 1e-6
        if kind == "multilevel":  # 1e-4 is reached first, on the same iterates
            for record in scene.values():
                assert 1 <= record["iterations_at"]["0.0001"] < record["iterations"]


@pytest.mark.parametrize(
    "kind, labels, match",
    [("unet", False, "model.kind.*accepted"), ("symmetric", True, "label_channels")],
)
def test_bad_model_block_is_refused_before_the_data_are_built(kind, labels, match, tmp_path):
    config = run.load_config(f"{CONFIGS / 'dcdm_poisson2d'}.py:tiny")
    config.model.kind = kind
    config.model.label_channels = labels
    with pytest.raises(ValueError, match=match):
        run.main_from_config(config, tmp_path)
    assert not (tmp_path / "ritz.h5").exists()


def test_one_step_losses_report_the_paper_and_the_a_norm_loss(tmp_path):
    """Both losses for the network and every baseline; the A-norm loss lies in
    [0, 1] and ranks AMG (a near-inverse) ahead of plain CG (M = I)."""
    from experiments.tasks.dcdm.dcdm import make_model, one_step_losses

    config = run.load_config(f"{CONFIGS / 'dcdm_poisson2d'}.py:tiny")
    config.model.kind = "multilevel"
    losses = one_step_losses(make_model(config), config, tmp_path, n_samples=8)
    assert set(losses) == METHODS
    for values in losses.values():
        assert set(values) == {
            "ritz_valid",
            "white_noise",
            "ritz_valid_a_norm",
            "white_noise_a_norm",
        }
        assert all(0 <= values[k] <= 1 for k in ("ritz_valid_a_norm", "white_noise_a_norm"))
    assert losses["amg"]["ritz_valid_a_norm"] < losses["cg"]["ritz_valid_a_norm"]


def test_multilevel_model_can_start_from_the_shipped_weights():
    """`model.init` loads the shipped generator (to fine-tune it) and refuses
    an architecture that does not match it."""
    import equinox as eqx

    from experiments.tasks.dcdm.dcdm import make_model
    from sciml.dcdm import pretrained

    config = run.load_config(f"{CONFIGS / 'dcdm_poisson2d'}.py:tiny")
    config.model.kind, config.model.width, config.model.init = "multilevel", 8, "poisson2d"
    assert eqx.tree_equal(make_model(config), pretrained("poisson2d"))
    config.model.width = 4
    with pytest.raises(ValueError, match="config.model.init"):
        make_model(config)
    config.model.init = "poisson1d"
    with pytest.raises(ValueError, match="config.model.init: `name` must be one of"):
        make_model(config)


def test_per_level_gains_and_geometry_start_from_the_shipped_weights():
    """Fine-tuning the shipped generator with per-level gains and geometry
    masks: its convolutions, its one gain on every level, masks of ones (so
    the start is the shipped generator, level for level)."""
    import jax.numpy as jnp

    from experiments.tasks.dcdm.dcdm import make_model
    from sciml.dcdm import label_channels, pretrained
    from solvers.poisson import make_scene

    config = run.load_config(f"{CONFIGS / 'dcdm_poisson2d'}.py:tiny")
    config.model.kind, config.model.width, config.model.init = "multilevel", 8, "poisson2d"
    config.model.gains, config.model.label_channels = 4, True
    net, shipped = make_model(config), pretrained("poisson2d")
    assert net.gains == 4 and net.in_channels == 4
    np.testing.assert_array_equal(net.gain, np.full(4, shipped.gain))
    labels = make_scene(32, seed=9, n_obstacles=2, free_surface=True)
    r = jnp.asarray(np.random.default_rng(0).standard_normal((1, 32, 32)), jnp.float32)
    both = jnp.concatenate([r, label_channels(labels)])
    # measured: equal to float32 rounding (~1e-7 of the largest entry)
    np.testing.assert_allclose(net(both), shipped(r), rtol=0, atol=1e-5 * np.abs(shipped(r)).max())


@pytest.mark.slow
def test_multilevel_model_can_start_from_a_finished_run(tmp_path):
    """`model.init` also takes a run directory of the task (how the shipped 2-D
    weights were fine-tuned from a 64² run): the run's trained model, exactly."""
    import equinox as eqx

    from experiments.tasks.dcdm.dcdm import make_model
    from sciml.experiment import load_run

    argv = [f"--config={CONFIGS / 'dcdm_poisson2d'}.py:tiny", f"--workdir={tmp_path / 'first'}"]
    assert run.main([*argv, "--config.model.kind=multilevel", "--config.model.width=4"]) == 0
    trained, _ = load_run(tmp_path / "first", build_model=make_model)
    config = run.load_config(f"{CONFIGS / 'dcdm_poisson2d'}.py:tiny")
    config.model.kind, config.model.width = "multilevel", 4
    config.model.init = str(tmp_path / "first")
    assert eqx.tree_equal(make_model(config), trained)
    fresh = config.copy_and_resolve_references()
    fresh.model.init = ""
    assert not eqx.tree_equal(make_model(fresh), trained)  # the run's values, not an initialisation
