"""The offline counterpart of a study: the online runs 0 … M − 1, on disk, resumable."""

import h5py
import numpy as np

from sciml.online import ParameterSpace, RunTable, Study, offline_data, validation_data


N_STEPS = 3


def make_study(**kwargs):
    return Study(
        simulation="tests.online.stream_solvers.counter",
        space=ParameterSpace({"a": (0.0, 1.0)}),
        n_runs=10,
        n_steps=N_STEPS,
        settings={"n_steps": N_STEPS},
        n_validation=2,
        seed=5,
        **kwargs,
    )


def test_offline_runs_are_the_first_online_runs(tmp_path):
    study = make_study()
    data = offline_data(study, 4, tmp_path / "offline.h5")
    table = RunTable(
        study.space, study.sampler, n_runs=study.n_runs, n_steps=N_STEPS, seed=5, max_attempts=1
    )
    assert data["u"].shape == (4 * N_STEPS, 3, 4, 4)
    np.testing.assert_array_equal(data["run"], np.repeat(np.arange(4), N_STEPS))
    np.testing.assert_array_equal(data["step"], np.tile(np.arange(N_STEPS), 4))
    for r in range(4):
        spec = table.spec(r)  # what the online study sends run r
        rows = data["u"][r * N_STEPS : (r + 1) * N_STEPS]
        np.testing.assert_allclose(rows[:, 0], np.float32(spec.params["a"]))
        np.testing.assert_array_equal(rows[:, 1, 0, 0], np.arange(N_STEPS))
        np.testing.assert_array_equal(rows[:, 2], spec.seed % 1000)
        np.testing.assert_allclose(data["params"][r * N_STEPS, 0], np.float32(spec.params["a"]))
    # held-out runs: other parameters and seeds
    held_out = validation_data(study)
    assert not set(held_out["u"][:, 2, 0, 0]) & set(data["u"][:, 2, 0, 0])
    assert not set(held_out["params"][:, 0]) & set(data["params"][:, 0])


def test_offline_data_resumes_only_unfinished_runs(tmp_path):
    study, path = make_study(), tmp_path / "offline.h5"
    first = offline_data(study, 3, path)
    with h5py.File(path, "a") as f:  # an interrupted generation: run 2 not done
        f["done"][2] = False
        f["u"][2 * N_STEPS :] = -1.0
        f["u"][:N_STEPS] = -2.0  # a done run is never solved again
    again = offline_data(study, 3, path)
    np.testing.assert_array_equal(again["u"][2 * N_STEPS :], first["u"][2 * N_STEPS :])
    np.testing.assert_array_equal(again["u"][:N_STEPS], -2.0)
    # another size (or study) replaces the file
    bigger = offline_data(study, 4, path)
    np.testing.assert_array_equal(bigger["u"][: 3 * N_STEPS], first["u"])


def test_the_documented_defaults_of_a_study():
    study = Study("m.f", ParameterSpace({"a": (0.0, 1.0)}), n_runs=4, n_steps=2)
    settings = (study.concurrency, study.runs_per_job, study.n_validation, study.seed)
    assert settings == (2, 4, 4, 0)
    assert (study.max_attempts, study.timeout, study.start_timeout) == (3, 120.0, 60.0)
