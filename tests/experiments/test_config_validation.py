"""The runner checks the whole config before it writes anything.

Each mistaken value of the issue that found these (an unknown optimiser name,
`train.log_every=0`, a zero-sized data parameter), in every config family,
ends the command with one `error:` line naming the key, and no run directory.
"""

from pathlib import Path

import pytest

from sciml.experiment import main
from sciml.experiment._catalogue import installed_from


ROOT = Path(__file__).resolve().parents[2]
CONFIGS = sorted(p.stem for p in (ROOT / "experiments" / "configs").glob("[a-z]*.py"))

# A size of each config's data (or of the data its solver makes) that 0 makes meaningless.
DATA_SIZE = {
    "char_lm": "data.seq_len",
    "char_lm_compare": "data.val_windows",
    "darcy_fno": "data.n_train",
    "darcy_tfno": "data.resolution",
    "dcdm_poisson2d": "data.n_rhs",
    "dcdm_poisson3d": "data.n_ritz",
    "insr_advection1d": "solver.n_points",
    "insr_elasticity": "solver.n_points",
    "insr_stretch": "eval.n_grid",
    "insr_taylor_green": "solver.n_boundary",
    "ns_compression": "data.n_train",
    "ns_mgtfno": "data.n_test",
    "ns_tfno": "data.resolution",
    "ns_turbulent": "data.n_train",
    "online_heat": "study.n_runs",
    "online_ns_tfno": "study.n_validation",
    "online_vs_offline": "offline.n_runs",
    "ptd_robustness": "data.n_test",
    "quickstart": "data.n_train",
    "ssm_adding": "data.length",
    "ssm_recall": "data.n_classes",
}
# A choice of each config's own parts (model, solver, problem) with a value not accepted.
CHOICE = {
    "char_lm": "model.dtype",
    "char_lm_compare": "baseline",
    "darcy_fno": "model.kind",
    "darcy_tfno": "model.factorization",
    "dcdm_poisson2d": "model.kind",
    "dcdm_poisson3d": "model.kind",
    "insr_advection1d": "integrator",
    "insr_elasticity": "solver.name",
    "insr_stretch": "solver.name",
    "insr_taylor_green": "projection",
    "ns_compression": "model.kind",
    "ns_mgtfno": "model.factorization",
    "ns_tfno": "model.kind",
    "ns_turbulent": "model.factorization",
    "online_heat": "buffer.kind",
    "online_ns_tfno": "launcher.kind",
    "online_vs_offline": "study.sampler",
    "ptd_robustness": None,
    "quickstart": None,
    "ssm_adding": "model.layer",
    "ssm_recall": "model.discretization",
}


def test_every_config_has_a_case():
    assert sorted(DATA_SIZE) == CONFIGS and sorted(CHOICE) == CONFIGS


def _cases():
    for name in CONFIGS:
        if not name.startswith("insr_"):  # an INSR config trains no model: no optimizer
            yield name, "optimizer.name", "adamm", "'adam'"  # the did-you-mean
        yield name, "train.log_every", "0", ">= 1"
        yield name, DATA_SIZE[name], "0", ">= 1"
        if CHOICE[name] is not None:
            yield name, CHOICE[name], "nonsense", "accepted"


@pytest.mark.parametrize(("name", "key", "value", "expected"), list(_cases()))
def test_mistaken_value_fails_before_any_file(name, key, value, expected, tmp_path, capsys):
    run_dir = tmp_path / "run"
    argv = [
        "--config",
        str(ROOT / "experiments" / "configs" / f"{name}.py") + ":tiny",
        "--workdir",
        str(run_dir),
        f"--config.{key}={value}",
    ]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: "), err
    assert repr(key) in err[0] and expected in err[0], err[0]
    assert list(tmp_path.iterdir()) == []


def test_wrong_values_name_key_value_and_accepted(tmp_path, capsys):
    config = str(ROOT / "experiments" / "configs" / "quickstart.py")
    assert (
        main(["--config", config, "--workdir", str(tmp_path / "r"), "--config.model.depth=-2"]) == 2
    )
    assert "config key 'model.depth' must be an integer >= 1, got -2" in capsys.readouterr().err
    assert (
        main(
            [
                "--config",
                config,
                "--workdir",
                str(tmp_path / "r"),
                "--config.optimizer.schedule=cosin",
            ]
        )
        == 2
    )
    err = capsys.readouterr().err
    assert "'optimizer.schedule'" in err and "'constant'" in err and "'cosine'" in err
    assert not (tmp_path / "r").exists()


def test_did_you_mean_for_keys_and_config_names(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(ROOT)
    assert main(["--config", "experiments/configs/quikstart.py"]) == 2
    assert "did you mean 'experiments/configs/quickstart.py'?" in capsys.readouterr().err
    assert main(["--config", "experiments.configs.quikstart"]) == 2
    assert "did you mean 'experiments.configs.quickstart'?" in capsys.readouterr().err
    config = "experiments/configs/quickstart.py"
    assert main(["--config", config, "--config.train.log_evry=3"]) == 2
    assert "did you mean 'train.log_every'?" in capsys.readouterr().err
    assert main(["--config", config, "--config.modle.width=3"]) == 2
    assert "did you mean 'model'?" in capsys.readouterr().err


def test_help_lists_configs_and_override_syntax(capsys, monkeypatch):
    monkeypatch.chdir(ROOT)
    with pytest.raises(SystemExit):
        main(["--help"])
    out = capsys.readouterr().out
    assert "```" not in out
    assert "--config.KEY=VALUE" in out
    for name in CONFIGS:
        assert f"experiments/configs/{name}.py" in out
    # where the guide is, and where this copy came from (pip records it)
    assert "docs/experiments.md" in out and "tensorboard --logdir runs/" in out
    source = installed_from()
    assert source is None or f"source: {source}" in out


@pytest.mark.parametrize("key", ["newton.fallback", "newton.method"])
def test_char_lm_refuses_newton_settings_it_cannot_run(key, tmp_path, capsys):
    # char_lm runs only the sequential fallback and the automatic linear solver
    config = str(ROOT / "experiments" / "configs" / "char_lm.py") + ":tiny"
    argv = ["--config", config, "--workdir", str(tmp_path / "r"), f"--config.{key}=none"]
    assert main(argv) == 2
    assert f"config key {key!r} is 'none'; accepted: " in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    ("name", "accepted"), [("online_heat", "'mse', 'l2'"), ("online_ns_tfno", "'h1', 'l2'")]
)
def test_online_surrogate_loss_is_checked_before_any_file(name, accepted, tmp_path, capsys):
    config = str(ROOT / "experiments" / "configs" / f"{name}.py") + ":tiny"
    argv = ["--config", config, "--workdir", str(tmp_path / "r"), "--config.train.loss=mae"]
    assert main(argv) == 2
    assert f"config key 'train.loss' is 'mae'; accepted: {accepted}" in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == []
