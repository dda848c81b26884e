"""The interface of what runs between the compiled chunks of a long computation.

A routine that advances a state chunk by chunk (`sciml.insr.integrate`) hands
its loop to a monitor, which may show progress, checkpoint and resume;
`sciml.training.ChunkedRun` is the house one. The base lives below both the
models and the training floor, so that a routine declares what it needs
without importing the trainer. Standard library only.
"""

from __future__ import annotations

import abc
from collections.abc import Callable
from typing import Any


Advance = Callable[[Any, int], tuple[Any, int, dict[str, Any]]]


class AbstractMonitor(abc.ABC):
    """Base of the monitors: `run` drives `advance` from the start (or a resumed
    step) to `total`."""

    @abc.abstractmethod
    def run(
        self,
        state: Any,
        key: Any,
        advance: Advance,
        *,
        total: int,
        fingerprint: dict | None = None,
    ) -> tuple[Any, int]:
        """Calls `advance(state, step) -> (state, step, info)` until `step == total`.

        **Returns:** `(state, start)`: the final state and the step this call
        resumed from (0 for a fresh run).
        """
