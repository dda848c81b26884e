"""A checkpoint written on one number of devices restores on another (orbax
otherwise reads the saved sharding and refuses: "Topology mismatch")."""

import subprocess
import sys
from pathlib import Path

import pytest


SCRIPT = Path(__file__).with_name("_device_count_script.py")


def _run(devices, mode, directory):
    done = subprocess.run(
        [sys.executable, str(SCRIPT), str(devices), mode, str(directory)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert f"ok {mode} {devices}" in done.stdout


@pytest.mark.parametrize(("saved_on", "restored_on"), [(4, 1), (1, 4)])
def test_checkpoint_restores_on_another_device_count(saved_on, restored_on, tmp_path):
    _run(saved_on, "save", tmp_path / "ckpt")
    _run(restored_on, "restore", tmp_path / "ckpt")
