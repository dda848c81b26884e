"""The operator experiments read their data from generated files when
`config.data.path` is set (in-process generation stays the default)."""

import numpy as np
import pytest

from experiments import run
from experiments.tasks.operators import operators_darcy
from solvers import darcy, generate


CONFIGS = run.__file__.rsplit("/", 1)[0] + "/configs"


@pytest.fixture(scope="module")
def darcy_files(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("darcy")
    coarse = generate.generate("darcy", 12, 17, tmp / "d17.h5", seed=5, progress=False)
    fine = generate.generate("darcy", 12, 33, tmp / "d33.h5", seed=5, progress=False)
    return coarse, fine


def _config(**data):
    config = run.load_config(f"{CONFIGS}/darcy_fno.py:tiny")
    with config.unlocked():
        config.data.update(data)
        config.train.steps = 5
    return config


def test_darcy_reads_the_files_it_is_given(darcy_files, tmp_path):
    coarse, fine = darcy_files
    config = _config(path=str(coarse), path_2x=str(fine), n_train=8, n_test=4, resolution=17)
    exp = operators_darcy.build(config)
    # Independent reference: the solver called directly, split by sample index.
    ref = darcy.make_dataset(12, 17, seed=5)
    ref_fine = darcy.make_dataset(12, 33, seed=5)
    a_train = ref["inputs"][:8].astype(np.float32)
    mean, std = a_train.mean(), a_train.std()
    batch_x, batch_y = exp.batch_fn(0, __import__("jax").random.key(0))
    assert batch_x.shape == (4, 1, 17, 17) and batch_y.shape == (4, 1, 17, 17)
    summary = run.main_from_config(config, tmp_path)
    assert "test_rel_l2_2x" in summary and np.isfinite(summary["test_rel_l2"])
    # The data the task built are the files' samples, scaled as in-process data are.
    from experiments.tasks.operators.operators_common import OperatorData, arrays_from_files

    arrays = arrays_from_files(config.data, problem="darcy")
    np.testing.assert_array_equal(arrays[0][:, 0], a_train)
    np.testing.assert_array_equal(arrays[3][:, 0], ref["outputs"][8:].astype(np.float32))
    np.testing.assert_array_equal(arrays[5][:, 0], ref_fine["outputs"][8:].astype(np.float32))
    data = OperatorData.from_arrays(*arrays)
    np.testing.assert_allclose(data.x_mean, mean, rtol=1e-6)
    np.testing.assert_allclose(data.x_std, std, rtol=1e-6)


def test_bad_data_files_name_the_config_key(darcy_files, tmp_path):
    coarse, _ = darcy_files
    with pytest.raises(ValueError, match="resolution 17, the config 33"):
        operators_darcy.build(_config(path=str(coarse), n_train=8, n_test=4, resolution=33))
    with pytest.raises(ValueError, match="holds 8 finished samples .* asks for 8 and 6"):
        operators_darcy.build(_config(path=str(coarse), n_train=8, n_test=6, resolution=17))
    heat = generate.generate("heat", 2, 9, tmp_path / "h.h5", params={"n_steps": 2}, progress=False)
    with pytest.raises(ValueError, match="holds problem 'heat'"):
        operators_darcy.build(_config(path=str(heat), n_train=1, n_test=1, resolution=9))


def test_a_separate_test_file_serves_every_training_size(darcy_files, tmp_path):
    from experiments.tasks.operators.operators_common import arrays_from_files

    coarse, _ = darcy_files  # seed 5
    test = generate.generate("darcy", 4, 17, tmp_path / "t17.h5", seed=6, progress=False)
    test_fine = generate.generate("darcy", 4, 33, tmp_path / "t33.h5", seed=6, progress=False)
    ref_test = darcy.make_dataset(3, 17, seed=6)
    ref_fine = darcy.make_dataset(3, 33, seed=6)
    for n_train in (5, 12):  # the whole training file, and a part of it
        config = _config(
            path=str(coarse),
            test_path=str(test),
            path_2x=str(test_fine),
            n_train=n_train,
            n_test=3,
            resolution=17,
        )
        arrays = arrays_from_files(config.data, problem="darcy")
        ref = darcy.make_dataset(n_train, 17, seed=5)
        np.testing.assert_array_equal(arrays[0][:, 0], ref["inputs"].astype(np.float32))
        np.testing.assert_array_equal(arrays[2][:, 0], ref_test["inputs"].astype(np.float32))
        np.testing.assert_array_equal(arrays[3][:, 0], ref_test["outputs"].astype(np.float32))
        np.testing.assert_array_equal(arrays[5][:, 0], ref_fine["outputs"].astype(np.float32))
    config = _config(path=str(coarse), test_path=str(coarse), n_train=4, n_test=2, resolution=17)
    with pytest.raises(ValueError, match="test_path: .* has the seed of config.data.path"):
        arrays_from_files(config.data, problem="darcy")
    config = _config(path=str(coarse), test_path=str(test), n_train=4, n_test=5, resolution=17)
    with pytest.raises(ValueError, match="test_path: .* holds 4 finished samples of index < 5"):
        arrays_from_files(config.data, problem="darcy")
    config = _config(path=str(coarse), test_path=str(tmp_path / "no.h5"), n_train=4, n_test=2)
    with pytest.raises(FileNotFoundError, match="config.data.test_path: .* does not exist"):
        arrays_from_files(config.data, problem="darcy")


def test_ns_checks_physical_parameters_against_the_file(tmp_path):
    from experiments.tasks.operators import operators_ns

    params = {"t_final": 0.02, "record_every": 0.01, "dt": 0.01, "viscosity": 1e-3}
    path = generate.generate(
        "navier_stokes", 4, 16, tmp_path / "ns.h5", params=params, progress=False
    )
    config = run.load_config(f"{CONFIGS}/ns_tfno.py:tiny")
    with config.unlocked():
        config.data.update(path=str(path), n_train=2, n_test=2, resolution=16, t_final=0.02)
    data = operators_ns.data_from_config(config)
    from solvers import navier_stokes as ns

    direct = ns.make_dataset(4, 16, seed=0, **params)
    np.testing.assert_allclose(
        np.asarray(data.y_test) * data.y_std,
        direct["outputs"][2:, -1:].astype(np.float32),
        rtol=1e-5,
        atol=1e-6,
    )
    with config.unlocked():
        config.data.viscosity = 1e-4
    with pytest.raises(ValueError, match="viscosity"):
        operators_ns.data_from_config(config)


def test_predictions_figure_keeps_every_title_inside(darcy_files, tmp_path):
    import jax
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    from experiments.tasks.operators.operators_common import (
        OperatorData,
        arrays_from_files,
        build_model,
        plot_predictions,
    )

    coarse, fine = darcy_files
    config = _config(path=str(coarse), path_2x=str(fine), n_train=8, n_test=4, resolution=17)
    data = OperatorData.from_arrays(*arrays_from_files(config.data, problem="darcy"))
    model = build_model(config.model, 1, 1, jax.random.key(0))
    fig = plot_predictions(model, data, tmp_path, labels=("coefficient a", "pressure u"))
    assert (tmp_path / "predictions.png").is_file()
    canvas = FigureCanvasAgg(fig)
    canvas.draw()
    renderer, bounds = canvas.get_renderer(), fig.bbox
    assert len(fig.axes) == 16  # 2 rows of 4 panels, each with a colorbar
    for ax in fig.axes:  # titles, labels and ticks all inside the saved figure
        box = ax.get_tightbbox(renderer)
        assert bounds.x0 - 1 <= box.x0 and box.x1 <= bounds.x1 + 1, ax.get_title()
        assert bounds.y0 - 1 <= box.y0 and box.y1 <= bounds.y1 + 1, ax.get_title()
    titles = [ax.get_title() for ax in fig.axes if ax.get_title()]
    assert titles == ["coefficient a", "pressure u", "prediction", "|error|"] * 2
    assert any("33×33 (zero-shot)" in ax.get_ylabel() for ax in fig.axes)
