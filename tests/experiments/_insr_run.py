"""Runs an INSR config's tiny variant end to end (shared by the INSR experiment tests)."""

import json

import numpy as np

from experiments import run


def run_tiny(config_path: str, workdir):
    """`(config, summary, summary.json as read back)` of the `tiny` variant run
    in `workdir`; the errors, floor, grid baselines and timing checked finite
    and non-negative on disk."""
    config = run.load_config(config_path + ":tiny")
    summary = run.main_from_config(config, workdir)
    on_disk = json.loads((workdir / "summary.json").read_text())
    for key in ("error", "floor", "grid_first_order", "grid_second_order", "seconds_per_step"):
        assert np.isfinite(on_disk[key]) and on_disk[key] >= 0
    return config, summary, on_disk
