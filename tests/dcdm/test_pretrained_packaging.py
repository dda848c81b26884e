"""The shipped weights are package data: the wheel carries them (no entry in
pyproject.toml is needed: hatchling packs every file under `sciml/`)."""

from pathlib import Path

import pytest


ROOT = Path(__file__).parents[2]


def test_wheel_carries_the_weights_and_their_record():
    builder_module = pytest.importorskip("hatchling.builders.wheel")
    builder = builder_module.WheelBuilder(str(ROOT))
    files = {Path(f.distribution_path).as_posix() for f in builder.recurse_included_files()}
    assert {"sciml/dcdm/weights/poisson2d.eqx", "sciml/dcdm/weights/poisson2d.json"} <= files
    # a few hundred KB at most
    assert (ROOT / "sciml/dcdm/weights/poisson2d.eqx").stat().st_size < 300_000
