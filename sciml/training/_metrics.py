"""Metrics as JSON lines."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import numpy as np


def to_python(value: Any) -> Any:
    """Converts numpy / jax scalars to plain Python numbers for JSON."""
    if isinstance(value, dict):
        return {k: to_python(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [to_python(v) for v in value]
    if hasattr(value, "shape") and np.ndim(value) == 0:
        value = np.asarray(value).item()
    if isinstance(value, float) and not math.isfinite(value):
        return repr(value)  # JSON has no NaN / inf
    return value


class MetricsWriter:
    """Appends one JSON object per line to `path` (`metrics.jsonl`).

    `main` says whether this process writes (see
    [`is_main_process`][sciml.distributed.is_main_process]): a writer of
    another process of a run writes, truncates and reads nothing.
    """

    def __init__(self, path: str | Path, *, main: bool = True):
        self.path, self.main = Path(path), bool(main)
        if self.main:
            self.path.parent.mkdir(parents=True, exist_ok=True)

    def write(self, record: dict[str, Any]) -> None:
        if self.main:
            with self.path.open("a") as f:
                f.write(json.dumps(to_python(record), sort_keys=True) + "\n")

    def truncate_after(self, step: int) -> list[dict[str, Any]]:
        """Drops the lines logged after `step` (they are recomputed on resume).

        **Returns:** the records kept.
        """
        if not self.main or not self.path.exists():
            return []
        kept = [
            line
            for line in self.path.read_text().splitlines()
            if line.strip() and json.loads(line).get("step", 0) <= step
        ]
        self.path.write_text("".join(line + "\n" for line in kept))
        return [json.loads(line) for line in kept]


def read_metrics(path: str | Path) -> list[dict[str, Any]]:
    """Reads a `metrics.jsonl` file into a list of dicts."""
    path = Path(path)
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
