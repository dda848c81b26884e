"""The shipped weights are package data: the wheel carries them (no entry in
pyproject.toml is needed: hatchling packs every file under `sciml/`)."""

from pathlib import Path

import pytest

from sciml.dcdm._pretrained import NAMES


ROOT = Path(__file__).parents[2]


def test_wheel_carries_the_weights_and_their_record():
    builder_module = pytest.importorskip("hatchling.builders.wheel")
    builder = builder_module.WheelBuilder(str(ROOT))
    files = {Path(f.distribution_path).as_posix() for f in builder.recurse_included_files()}
    for name in NAMES:
        assert {f"sciml/dcdm/weights/{name}.eqx", f"sciml/dcdm/weights/{name}.json"} <= files
        # a few hundred KB at most
        assert (ROOT / f"sciml/dcdm/weights/{name}.eqx").stat().st_size < 300_000
