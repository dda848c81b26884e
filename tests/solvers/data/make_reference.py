"""Writes the reference outputs that `test_reference_data.py` compares against.

They were generated with the solvers as they were before the stepper modules
(hand-written time loops per solver), in float32 (64-bit types off) with each
`make_dataset`'s default physical settings, so the test pins the data the
refactored solvers produce to the data of the old ones. Re-running this script
overwrites them with the current code's output; do that only on purpose.

usage (from the repository root): PYTHONPATH=. python tests/solvers/data/make_reference.py
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import jax
import numpy as np


HERE = Path(__file__).parent

#: `make_dataset` calls: name -> (module, n, resolution, keyword arguments).
CASES = {
    "navier_stokes": ("navier_stokes", 2, 32, {"seed": 0}),
    "burgers": ("burgers", 2, 64, {"seed": 0}),
    "heat": ("heat", 2, 16, {"seed": 0, "record_every": 10}),
}

#: `python -m solvers.generate navier_stokes` arguments of the HDF5 reference.
GENERATE = {
    "n": 3,
    "resolution": 16,
    "seed": 2,
    "chunk": 2,
    "params": {"t_final": 1.0, "record_every": 0.5, "dt": 1e-3},
}


def main() -> None:
    import importlib

    from solvers import generate

    jax.config.update("jax_enable_x64", False)
    for name, (module, n, resolution, kwargs) in CASES.items():
        data = importlib.import_module(f"solvers.{module}").make_dataset(n, resolution, **kwargs)
        np.savez(HERE / f"{name}.npz", **{k: np.asarray(v) for k, v in data.items()})
    with tempfile.TemporaryDirectory() as tmp:
        path = generate.generate(
            "navier_stokes",
            GENERATE["n"],
            GENERATE["resolution"],
            Path(tmp) / "ns.h5",
            seed=GENERATE["seed"],
            params=GENERATE["params"],
            chunk=GENERATE["chunk"],
            progress=False,
        )
        (HERE / "navier_stokes_generate.h5").write_bytes(path.read_bytes())


if __name__ == "__main__":
    main()
