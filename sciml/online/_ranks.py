"""A study trained by several trainer ranks (processes): what they share.

Each rank runs a [`SampleStream`][sciml.online.SampleStream] of its own (its
share of the runs, its receiver, buffer and solver jobs); this module holds
what crosses ranks, through the [`ProcessGroup`][sciml.training.ProcessGroup]:

- the validation runs, solved once by rank 0 (cached to HDF5) and read back by
  the others;
- one view of every rank's counters for `metrics.jsonl`, the progress bar and
  the summary: counts summed, buffer fill, reuse and the wait fraction
  averaged, lists of runs concatenated (they name global run ids).

Every function here that takes a `group` is *collective*: every rank calls it
at the same point.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from ..training import ProcessGroup
from ._study import Study, validation_runs


#: Values averaged over ranks (rates of a buffer, fractions of a rank's time);
#: every other number is summed.
AVERAGED = ("fill", "reuse", "wait_fraction")


def local_batch_size(batch_size: int, ranks: int) -> int:
    """Samples each of `ranks` ranks draws from its own buffer per step."""
    if batch_size % ranks:
        raise ValueError(
            f"`batch_size` ({batch_size}) must be a multiple of the number of trainer "
            f"ranks ({ranks}): each rank draws batch_size / {ranks} samples of every step."
        )
    return batch_size // ranks


def shared_validation(
    study: Study, path: Path, group: ProcessGroup
) -> tuple[dict[str, np.ndarray], list[dict[str, Any]]]:
    """[`validation_runs`][sciml.online.validation_runs] computed once: rank 0
    solves the runs into the cache `path`, the others read it (*collective*)."""

    def solve():  # on the other ranks the cache is complete: a read
        return validation_runs(study, path)

    return group.on_main(solve, solve)


def _merge(values: list[dict[str, Any]]) -> dict[str, Any]:
    """One dict of every rank's (see the module docstring); keys in rank 0's
    order, then those only other ranks have."""
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
    """Every rank's `SampleStream.monitor()` values as one (*collective*)."""
    return values if group.single else _merge(group.gather(values))


def merged_summary(summary: dict[str, Any], group: ProcessGroup) -> dict[str, Any]:
    """Every rank's `SampleStream.summary()` as one (*collective*); with several
    ranks, `ranks` and each rank's `wait_fraction_by_rank` are added."""
    if group.single:
        return summary
    summaries = group.gather(summary)
    merged = _merge(summaries)
    merged["wait_fraction_by_rank"] = [s["wait_fraction"] for s in summaries]
    merged["ranks"] = group.count
    return merged
