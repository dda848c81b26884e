"""`python -m solvers.generate`: resumable, deterministic, refuses foreign files."""

import datetime
import functools
import json

import h5py
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from solvers import burgers, darcy, generate, poisson


def _read(path):
    with h5py.File(path, "r") as f:
        return {k: f[k][...] for k in f}, dict(f.attrs)


def test_matches_make_dataset_and_is_deterministic(tmp_path):
    out = generate.generate("darcy", 5, 17, tmp_path / "a.h5", seed=3, chunk=2, progress=False)
    data, attrs = _read(out)
    ref = darcy.make_dataset(5, 17, seed=3)
    assert data["done"].all() and attrs["problem"] == "darcy" and attrs["seed"] == 3
    # The file adds a channel axis (axis 1) to the arrays of make_dataset.
    np.testing.assert_array_equal(data["inputs"][:, 0], ref["inputs"].astype(np.float32))
    np.testing.assert_array_equal(data["outputs"][:, 0], ref["outputs"].astype(np.float32))
    again = generate.generate("darcy", 5, 17, tmp_path / "b.h5", seed=3, chunk=5, progress=False)
    for key in ("inputs", "outputs"):
        np.testing.assert_array_equal(_read(again)[0][key], data[key])


def test_resume_completes_only_missing_samples(tmp_path, monkeypatch):
    path = tmp_path / "ns.h5"
    params = {"t_final": 0.1, "record_every": 0.05, "dt": 0.01}
    kwargs = dict(seed=1, params=params, chunk=2, progress=False)
    full = _read(generate.generate("navier_stokes", 5, 16, tmp_path / "full.h5", **kwargs))[0]

    from solvers import navier_stokes

    real = navier_stokes.make_dataset
    calls = []

    @functools.wraps(real)
    def interrupted(n, resolution, *, start=0, **kw):
        calls.append((start, n))
        if len([c for c in calls if c[1] > 0]) == 2:  # n = 0: the up-front check
            raise KeyboardInterrupt
        return real(n, resolution, start=start, **kw)

    monkeypatch.setattr(navier_stokes, "make_dataset", interrupted)
    with pytest.raises(KeyboardInterrupt):
        generate.generate("navier_stokes", 5, 16, path, **kwargs)
    partial = _read(path)[0]
    assert partial["done"].tolist() == [True, True, False, False, False]

    calls.clear()

    @functools.wraps(real)
    def counted(n, resolution, *, start=0, **kw):
        calls.append((start, n))
        return real(n, resolution, start=start, **kw)

    monkeypatch.setattr(navier_stokes, "make_dataset", counted)
    generate.generate("navier_stokes", 5, 16, path, **kwargs)
    assert calls == [(2, 2), (4, 1)]  # finished samples are never recomputed
    resumed = _read(path)[0]
    for key in ("inputs", "outputs", "times", "done"):
        np.testing.assert_array_equal(resumed[key], full[key])
    assert resumed["outputs"].shape == (5, 2, 1, 16, 16)  # (sample, time, channel, x, y)


def test_refuses_foreign_or_mismatched_files(tmp_path):
    path = generate.generate("darcy", 2, 9, tmp_path / "d.h5", progress=False)
    before = path.read_bytes()
    with pytest.raises(ValueError, match="holds problem 'darcy'"):
        generate.generate("heat", 2, 9, path, progress=False)
    with pytest.raises(ValueError, match="seed"):
        generate.generate("darcy", 2, 9, path, seed=1, progress=False)
    with pytest.raises(ValueError, match="forcing"):
        generate.generate("darcy", 2, 9, path, params={"forcing": 2.0}, progress=False)
    assert path.read_bytes() == before
    other = tmp_path / "plain.h5"
    with h5py.File(other, "w") as f:
        f["x"] = np.zeros(3)
    with pytest.raises(ValueError, match="not written by solvers.generate"):
        generate.generate("darcy", 2, 9, other, progress=False)


def test_cli_and_bad_arguments(tmp_path, capsys):
    out = tmp_path / "h.h5"
    heat_9 = ["heat", "--n", "3", "--resolution", "9", "--out"]
    code = generate.main(
        [
            *heat_9,
            str(out),
            "--no-progress",
            "--set",
            "n_steps=4",
            "--set",
            "record_every=2",
            "--precision",
            "float64",
        ]
    )
    assert code == 0
    data, attrs = _read(out)
    assert data["outputs"].shape == (3, 2, 1, 9, 9) and data["outputs"].dtype == np.float64
    assert attrs["precision"] == "float64"
    code = generate.main([*heat_9, str(tmp_path / "x.h5"), "--set", "bogus=1"])
    assert code == 2 and "bogus" in capsys.readouterr().err
    assert not (tmp_path / "x.h5").exists()
    with pytest.raises(ValueError, match="even"):
        generate.generate("navier_stokes", 2, 15, tmp_path / "y.h5", progress=False)
    assert not (tmp_path / "y.h5").exists()
    with pytest.raises(ValueError, match="problem"):
        generate.generate("wave", 2, 16, tmp_path / "z.h5")


def test_files_describe_themselves(tmp_path):
    params = {"t_final": 0.02, "record_every": 0.01, "dt": 0.01, "viscosity": 1e-4}
    out = generate.generate(
        "navier_stokes", 2, 8, tmp_path / "ns.h5", params=params, progress=False
    )
    with h5py.File(out, "r") as f:
        # Each physical parameter is its own attribute, defaults included.
        assert f.attrs["viscosity"] == 1e-4 and f.attrs["forcing"] == "fno"
        assert f.attrs["t_final"] == 0.02 and f.attrs["batch_size"] == 32
        assert "periodic" in f.attrs["grid"] and "Crank-Nicolson" in f.attrs["scheme"]
        assert f.attrs["package"] == "solvers" and f.attrs["package_version"]
        created = datetime.datetime.fromisoformat(f.attrs["created"])
        now = datetime.datetime.now(datetime.timezone.utc)
        assert datetime.timedelta(0) <= now - created < datetime.timedelta(hours=1)
        assert f["inputs"].attrs["axes"] == "sample, channel, x, y"
        assert f["outputs"].attrs["axes"] == "sample, time, channel, x, y"
        assert list(f["outputs"].attrs["fields"]) == ["vorticity"]
        for key in ("inputs", "outputs"):
            assert len(f[key].attrs["axes"].split(",")) == f[key].ndim
        assert f["outputs"].shape == (2, 2, 1, 8, 8)
        assert json.loads(f.attrs["params"])["viscosity"] == 1e-4


def test_burgers_file_matches_the_solver_called_directly(tmp_path):
    params = {"t_final": 0.02, "n_records": 2, "dt": 1e-3}
    out = generate.generate(
        "burgers",
        3,
        16,
        tmp_path / "b.h5",
        seed=4,
        params=params,
        chunk=2,
        precision="float64",
        progress=False,
    )
    with h5py.File(out, "r") as f:
        u0, u, times = f["inputs"][:, 0], f["outputs"][:, :, 0], f["times"][...]
        assert f["outputs"].attrs["axes"] == "sample, time, channel, x"
    expected_u0 = burgers.random_initial(jax.random.key(4), 3, 16, dtype=jnp.float64)
    np.testing.assert_array_equal(u0, np.asarray(expected_u0))
    np.testing.assert_allclose(times, [0.01, 0.02])
    direct = burgers.solve(jnp.asarray(u0), burgers.BurgersParams(dt=1e-3), times)
    np.testing.assert_allclose(u, np.asarray(direct), rtol=0, atol=1e-12)


@pytest.mark.parametrize("dim", [2, 3])
def test_poisson_file_solves_its_systems(tmp_path, dim):
    out = generate.generate(
        "poisson",
        2,
        8,
        tmp_path / "p.h5",
        seed=1,
        params={"dim": dim},
        precision="float64",
        progress=False,
    )
    with h5py.File(out, "r") as f:
        assert f["inputs"].attrs["axes"] == "sample, channel, " + ", ".join("xyz"[:dim])
        assert f.attrs["dim"] == dim and "cell-centred" in f.attrs["grid"]
        b, x, labels = f["inputs"][:, 0], f["outputs"][:, 0], f["labels"][:, 0]
    assert labels.dtype == np.int8 and b.shape == (2, *(8,) * dim)
    for i in range(2):
        # The stored solution solves the stored system: A x = b on the fluid cells
        # (A assembled independently of the solve), and the solver agrees.
        fluid = labels[i] == poisson.FLUID
        residual = poisson.assemble(labels[i]) @ x[i].ravel() - b[i].ravel()
        assert np.abs(residual[fluid.ravel()]).max() < 1e-10 * np.abs(b[i]).max()
        np.testing.assert_allclose(x[i], poisson.solve(labels[i], b[i]), atol=1e-12)
