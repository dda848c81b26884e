"""`sciml.data` against hand-built HDF5 files written here (not by the
generator), numpy statistics and explicit loops; one round trip through the
real generator."""

import json

import equinox as eqx
import h5py
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from sciml.data import Batches, Normalizer, read_dataset, read_resolutions, train_test_split


DONE = np.array([True, True, False, True, False, True])


def _write(path, *, resolution=4, seed=0, done=DONE, version=2, viscosity=1e-3, dt=0.01):
    """A small file in the generator's format 2, written by hand."""
    rng = np.random.default_rng(resolution)
    n = done.size
    inputs = rng.normal(size=(n, 2, resolution, resolution)).astype(np.float32)
    outputs = rng.normal(size=(n, 3, 1, resolution, resolution)).astype(np.float32)
    inputs[~done] = 0
    outputs[~done] = 0
    params = {"viscosity": viscosity, "dt": dt}
    with h5py.File(path, "w") as f:
        f.attrs.update(
            problem="toy",
            n=n,
            resolution=resolution,
            seed=seed,
            precision="float32",
            format_version=version,
            params=json.dumps(params, sort_keys=True),
            grid="periodic",
            **params,
        )
        f["done"] = done
        f["inputs"] = inputs
        f["inputs"].attrs.update(axes="sample, channel, x, y", fields=["a", "b"], units=["m", "s"])
        f["outputs"] = outputs
        f["outputs"].attrs.update(axes="sample, time, channel, x, y", fields=["u"], units=["1"])
        f["times"] = np.array([0.1, 0.2, 0.3])
        f["times"].attrs["axes"] = "time"
    return inputs, outputs


def test_reads_finished_samples_and_the_description(tmp_path):
    inputs, outputs = _write(tmp_path / "a.h5")
    data = read_dataset(tmp_path / "a.h5")
    np.testing.assert_array_equal(data.indices, [0, 1, 3, 5])
    np.testing.assert_array_equal(data["inputs"], inputs[[0, 1, 3, 5]])
    np.testing.assert_array_equal(data["outputs"], outputs[[0, 1, 3, 5]])
    np.testing.assert_array_equal(data["times"], [0.1, 0.2, 0.3])
    assert len(data) == 4 and data.resolution == 4
    assert data.axes["outputs"] == ("sample", "time", "channel", "x", "y")
    assert data.fields["inputs"] == ("a", "b") and data.units["inputs"] == ("m", "s")
    assert data.channel_axis("outputs") == 2 and data.channel_axis("inputs") == 1
    assert data.params == {"viscosity": 1e-3, "dt": 0.01} and data.attrs["viscosity"] == 1e-3
    only = read_dataset(tmp_path / "a.h5", ["outputs"], samples=[1, 2, 3])
    assert sorted(only.arrays) == ["outputs"]
    np.testing.assert_array_equal(only.indices, [1, 3])  # sample 2 is unfinished
    np.testing.assert_array_equal(only["outputs"], outputs[[1, 3]])


def test_bad_files_and_arguments(tmp_path):
    _write(tmp_path / "a.h5")
    with pytest.raises(ValueError, match="2 unfinished samples of 6"):
        read_dataset(tmp_path / "a.h5", allow_unfinished=False)
    with pytest.raises(ValueError, match="`keys`"):
        read_dataset(tmp_path / "a.h5", ["labels"])
    with pytest.raises(ValueError, match="`samples`"):
        read_dataset(tmp_path / "a.h5", samples=[6])
    _write(tmp_path / "old.h5", version=1)
    with pytest.raises(ValueError, match="file format 1"):
        read_dataset(tmp_path / "old.h5")
    (tmp_path / "t.h5").write_text("text")
    with pytest.raises(ValueError, match="not an HDF5 file"):
        read_dataset(tmp_path / "t.h5")
    with pytest.raises(ValueError, match="not a file"):
        read_dataset(tmp_path)
    with h5py.File(tmp_path / "plain.h5", "w") as f:
        f["x"] = np.zeros(3)
    with pytest.raises(ValueError, match="not written by the data generator"):
        read_dataset(tmp_path / "plain.h5")


def test_split_by_sample_index(tmp_path):
    _write(tmp_path / "a.h5")
    data = read_dataset(tmp_path / "a.h5")
    train, test = train_test_split(data, 3)
    np.testing.assert_array_equal(train.indices, [0, 1])
    np.testing.assert_array_equal(test.indices, [3, 5])
    np.testing.assert_array_equal(test["inputs"], data["inputs"][2:])
    _, test = train_test_split(data, 3, 2)
    np.testing.assert_array_equal(test.indices, [3])  # indices 3, 4; 4 is unfinished
    # The split does not move when an unfinished sample finishes.
    done = DONE.copy()
    done[2] = True
    _write(tmp_path / "b.h5", done=done)
    train_b, test_b = train_test_split(read_dataset(tmp_path / "b.h5"), 3)
    np.testing.assert_array_equal(train_b.indices, [0, 1, 2])
    np.testing.assert_array_equal(test_b.indices, [3, 5])
    with pytest.raises(ValueError, match="empty test part"):
        train_test_split(data, 6)
    with pytest.raises((ValueError, TypeError), match="n_train"):  # TypeError: runtime hints
        train_test_split(data, 2.5)


def test_batches_visit_every_sample_once_per_epoch():
    n = 10
    data = {"id": np.arange(n), "x": np.arange(n * 3.0).reshape(n, 3)}
    batches = Batches(data, 4, seed=7)
    assert len(batches) == 3
    seen = []
    for epoch in range(3):
        ids = np.concatenate([b["id"] for b in batches.epoch(epoch)])
        assert sorted(ids) == list(range(n))  # a permutation of the samples
        np.testing.assert_array_equal(ids, np.random.default_rng((7, epoch)).permutation(n))
        seen.append(ids)
    assert not np.array_equal(seen[0], seen[1])
    stream = iter(batches)
    for step in range(7):  # the endless stream and `at(step)` agree, across epochs
        batch = next(stream)
        np.testing.assert_array_equal(batch["id"], batches.at(step)["id"])
        np.testing.assert_array_equal(batch["x"], data["x"][batch["id"]])
    assert [len(b["id"]) for b in batches.epoch(0)] == [4, 4, 2]
    dropped = Batches(data, 4, seed=7, drop_last=True)
    assert [len(b["id"]) for b in dropped.epoch(0)] == [4, 4]
    ordered = Batches(data, 3, shuffle=False, as_jax=True)
    first = ordered.at(0)
    assert isinstance(first["x"], jax.Array)
    np.testing.assert_array_equal(np.asarray(first["id"]), [0, 1, 2])
    other_seed = np.concatenate([b["id"] for b in Batches(data, 4, seed=8).epoch(0)])
    assert not np.array_equal(other_seed, seen[0])


def test_batches_bad_arguments(tmp_path):
    data = {"x": np.zeros((5, 2)), "y": np.zeros((4, 2))}
    with pytest.raises(ValueError, match="leading sample axis"):
        Batches(data, 2)
    with pytest.raises(ValueError, match="`batch_size`"):
        Batches({"x": np.zeros(5)}, 0)
    with pytest.raises(ValueError, match="drop_last"):
        Batches({"x": np.zeros(5)}, 6, drop_last=True)
    with pytest.raises(ValueError, match="`step`"):
        Batches({"x": np.zeros(5)}, 2).at(-1)
    _write(tmp_path / "a.h5")
    batches = Batches(read_dataset(tmp_path / "a.h5"), 2, keys=("inputs",))
    assert sorted(batches.at(0)) == ["inputs"]


def test_normalizer_statistics_inverse_and_save(tmp_path):
    rng = np.random.default_rng(0)
    scale = np.array([1.0, 10.0, 1e-3])[None, :, None, None]
    shift = np.array([5.0, -2.0, 0.0])[None, :, None, None]
    x = rng.normal(size=(20, 3, 6, 5)) * scale + shift
    norm = Normalizer.fit(x)
    assert norm.mean.shape == (3, 1, 1)
    for c in range(3):  # statistics against numpy, channel by channel
        np.testing.assert_allclose(norm.mean[c, 0, 0], x[:, c].mean(), rtol=1e-12)
        np.testing.assert_allclose(norm.std[c, 0, 0], x[:, c].std() + 1e-8, rtol=1e-12)
    z = np.asarray(norm(x))
    np.testing.assert_allclose(z.mean(axis=(0, 2, 3)), 0, atol=1e-12)
    x_std = x.std(axis=(0, 2, 3))
    np.testing.assert_allclose(z.std(axis=(0, 2, 3)), x_std / (x_std + 1e-8), rtol=1e-10)
    np.testing.assert_allclose(np.asarray(norm.inverse(norm.encode(x))), x, rtol=1e-12)
    # One sample (channels, *grid) broadcasts the same way as a batch.
    np.testing.assert_allclose(np.asarray(norm(x[3])), z[3], rtol=1e-12)
    # A trajectory layout (sample, time, channel, x).
    traj = rng.normal(size=(4, 5, 2, 7))
    tnorm = Normalizer.fit(traj, channel_axis=2)
    assert tnorm.mean.shape == (2, 1)
    np.testing.assert_allclose(tnorm.mean[:, 0], traj.mean(axis=(0, 1, 3)), rtol=1e-12)
    # Saved and restored: on its own, and as part of a serialised run pytree.
    restored = Normalizer.load(norm.save(tmp_path / "norm.npz"))
    np.testing.assert_array_equal(np.asarray(restored.mean), np.asarray(norm.mean))
    np.testing.assert_array_equal(np.asarray(restored.std), np.asarray(norm.std))
    eqx.tree_serialise_leaves(tmp_path / "run.eqx", {"norm": norm})
    like = {"norm": Normalizer.fit(np.zeros((2, 3, 6, 5)) + 1.0)}
    back = eqx.tree_deserialise_leaves(tmp_path / "run.eqx", like)["norm"]
    np.testing.assert_array_equal(np.asarray(back.std), np.asarray(norm.std))


def test_normalizer_bad_input():
    with pytest.raises(ValueError, match="`x` must be finite"):
        Normalizer.fit(np.array([[1.0, np.nan]]))
    with pytest.raises(ValueError, match="`channel_axis`"):
        Normalizer.fit(np.zeros((2, 3)), channel_axis=2)
    with pytest.raises(ValueError, match="constant"):
        Normalizer.fit(np.zeros((2, 3)), eps=0.0)
    with pytest.raises((ValueError, TypeError)):  # TypeError: runtime shape hints
        Normalizer(jnp.zeros((2, 1)), jnp.ones((3, 1)))


def test_multi_resolution_test_sets(tmp_path):
    _write(tmp_path / "r8.h5", resolution=8)
    _write(tmp_path / "r4.h5", resolution=4)
    sets = read_resolutions([tmp_path / "r8.h5", read_dataset(tmp_path / "r4.h5")])
    assert list(sets) == [4, 8]
    assert sets[8]["inputs"].shape == (4, 2, 8, 8) and sets[4]["inputs"].shape == (4, 2, 4, 4)
    _write(tmp_path / "other.h5", resolution=16, viscosity=1e-4)
    with pytest.raises(ValueError, match="params"):
        read_resolutions([tmp_path / "r4.h5", tmp_path / "other.h5"])
    # a finer grid with a smaller time step is the same problem
    _write(tmp_path / "r16.h5", resolution=16, dt=0.005)
    assert list(read_resolutions([tmp_path / "r4.h5", tmp_path / "r16.h5"])) == [4, 16]
    with pytest.raises(ValueError, match="given twice"):
        read_resolutions([tmp_path / "r4.h5", tmp_path / "r4.h5"])


def test_reads_what_the_generator_writes(tmp_path):
    from solvers import darcy, generate

    path = generate.generate("darcy", 4, 9, tmp_path / "d.h5", seed=2, progress=False)
    with h5py.File(path, "r+") as f:  # as if interrupted after samples 0, 1, 3
        f["done"][2] = False
    data = read_dataset(path)
    ref = darcy.make_dataset(4, 9, seed=2)
    np.testing.assert_array_equal(data.indices, [0, 1, 3])
    np.testing.assert_array_equal(data["inputs"][:, 0], ref["inputs"][[0, 1, 3]].astype(np.float32))
    np.testing.assert_array_equal(
        data["outputs"][:, 0], ref["outputs"][[0, 1, 3]].astype(np.float32)
    )
    assert data.fields["inputs"] == ("permeability",) and data.attrs["a_high"] == 12.0
    assert data.axes["outputs"] == ("sample", "channel", "x", "y")
