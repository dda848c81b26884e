"""The solvers produce the data they produced before the stepper modules.

`data/*.npz` and `data/navier_stokes_generate.h5` were written by
`data/make_reference.py` with the hand-written time loops that the steppers and
`solvers.stepping` replaced, in float32. Today's `make_dataset` and
`solvers.generate` must give the same arrays to float32 round-off.

The HDF5 reference is in file format 1 (no channel axis, fewer attributes):
today's file (format 2) must hold the same values once the channel axis each
dataset names in its `axes` attribute is removed, and every attribute of the
old file with the same value except `format_version`, and the same generator
parameters plus those added since, at their defaults.
"""

import importlib
import importlib.util
import json
from pathlib import Path

import h5py
import numpy as np
import pytest

from solvers import generate


DATA = Path(__file__).parent / "data"
_spec = importlib.util.spec_from_file_location("make_reference", DATA / "make_reference.py")
reference = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(reference)


@pytest.mark.parametrize("name", sorted(reference.CASES))
def test_make_dataset_matches_reference(name, float32):
    module, n, resolution, kwargs = reference.CASES[name]
    data = importlib.import_module(f"solvers.{module}").make_dataset(n, resolution, **kwargs)
    expected = np.load(DATA / f"{name}.npz")
    assert sorted(data) == sorted(expected.files)
    for key in expected.files:
        assert data[key].dtype == expected[key].dtype and data[key].shape == expected[key].shape
        scale = max(np.abs(expected[key]).max(), 1e-30)
        # float32 round-off; the NS case runs 10⁴ steps.
        np.testing.assert_allclose(data[key], expected[key], rtol=0, atol=1e-5 * scale)


def test_generate_matches_reference(tmp_path):
    g = reference.GENERATE
    out = generate.generate(
        "navier_stokes",
        g["n"],
        g["resolution"],
        tmp_path / "ns.h5",
        seed=g["seed"],
        params=g["params"],
        chunk=g["chunk"],
        progress=False,
    )
    with h5py.File(out, "r") as new, h5py.File(DATA / "navier_stokes_generate.h5", "r") as old:
        assert sorted(new) == sorted(old)
        assert old.attrs["format_version"] == 1 and new.attrs["format_version"] == 2
        old_attrs = {k: old.attrs[k] for k in old.attrs if k not in ("format_version", "params")}
        assert {k: new.attrs[k] for k in old_attrs} == old_attrs
        # keywords added to make_dataset since then appear at their defaults
        old_params, new_params = json.loads(old.attrs["params"]), json.loads(new.attrs["params"])
        added = {k: v for k, v in new_params.items() if k not in old_params}
        assert {k: new_params[k] for k in old_params} == old_params
        assert added == {"t_start": 0.0}
        for key in old:
            a, b = new[key][...], old[key][...]
            axes = [name.strip() for name in str(new[key].attrs.get("axes", "")).split(",")]
            if "channel" in axes:
                assert a.shape[axes.index("channel")] == 1
                a = np.squeeze(a, axes.index("channel"))
            assert a.dtype == b.dtype and a.shape == b.shape
            if a.dtype == bool:
                np.testing.assert_array_equal(a, b)
            else:
                np.testing.assert_allclose(a, b, rtol=0, atol=1e-5 * np.abs(b).max())
