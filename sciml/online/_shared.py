"""A study trained by several trainer processes: what they share.

Each process runs a [`SampleStream`][sciml.online.SampleStream] of its own (its
share of the runs, its receiver, buffer and solver jobs); this module holds
what crosses processes, through the [`ProcessGroup`][sciml.distributed.ProcessGroup]:

- the validation runs, solved once by process 0 (cached to HDF5) and read back
  by the others;
- one view of every process's counters for `metrics.jsonl`, the progress bar
  and the summary: counts summed, buffer fill, reuse and the wait fraction
  averaged, lists of runs concatenated (they name global run ids).

Every function here that takes a `group` is *collective*: every process calls
it at the same point.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from .._deprecated import rank_folder
from ..distributed import ProcessGroup
from ._study import Study, validation_runs


#: Values averaged over processes (rates of a buffer, fractions of a process's
#: time); every other number is summed.
AVERAGED = ("fill", "reuse", "wait_fraction")


def process_folder(online: Path, index: int) -> Path:
    """The folder of trainer process `index` under a run's `online/` folder:
    `process-<index>`, or `rank-<index>` where a run written before the
    rename has it (so that run resumes where it was)."""
    return rank_folder(online, index) or Path(online) / f"process-{index}"


def shared_validation(
    study: Study, path: Path, group: ProcessGroup
) -> tuple[dict[str, np.ndarray], list[dict[str, Any]]]:
    """[`validation_runs`][sciml.online.validation_runs] computed once: process
    0 solves the runs into the cache `path`, the others read it (*collective*)."""

    def solve():  # on the other processes the cache is complete: a read
        return validation_runs(study, path)

    return group.on_main(solve, solve)


def _merge(values: list[dict[str, Any]]) -> dict[str, Any]:
    """One dict of every process's (see the module docstring); keys in process
    0's order, then those only other processes have."""
    keys = list(dict.fromkeys(k for v in values for k in v))
    merged: dict[str, Any] = {}
    for key in keys:
        items = [v[key] for v in values if key in v]
        if isinstance(items[0], dict):
            merged[key] = _merge(items)
        elif isinstance(items[0], list):
            merged[key] = sorted((x for item in items for x in item), key=lambda x: x.get("run", 0))
        elif key in AVERAGED:
            merged[key] = sum(items) / len(values)
        else:
            merged[key] = sum(items)
    return merged


def merged_monitor(values: dict[str, Any], group: ProcessGroup) -> dict[str, Any]:
    """Every process's `SampleStream.monitor()` values as one (*collective*)."""
    return values if group.single else _merge(group.gather(values))


def merged_summary(summary: dict[str, Any], group: ProcessGroup) -> dict[str, Any]:
    """Every process's `SampleStream.summary()` as one (*collective*); with
    several processes, `processes` and each process's
    `wait_fraction_by_process` are added."""
    if group.single:
        return summary
    summaries = group.gather(summary)
    merged = _merge(summaries)
    merged["wait_fraction_by_process"] = [s["wait_fraction"] for s in summaries]
    merged["processes"] = group.count
    return merged
