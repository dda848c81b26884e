"""A long computation run chunk by chunk: checkpoints, progress, resume, interrupts.

`fit` drives an optimiser step by step; a time integration (`sciml.insr.integrate`)
advances a state by compiled chunks of steps instead. `ChunkedRun.run` is the
loop both need around such chunks: after every chunk it shows a progress line
and writes a checkpoint with the house [`Checkpointer`][sciml.training.Checkpointer];
a folder that already holds checkpoints of the same run is resumed from the
latest one.

Ctrl-C and SIGTERM never lose a finished step. A chunk is one compiled call
that Python cannot stop part-way, and an exception raised when it returns
would drop its steps; so during the run both signals are only recorded (with a
note on standard error): the chunk in progress finishes, is checkpointed, and
then `KeyboardInterrupt` is raised. A second signal raises at once, giving up
the chunk in progress (the checkpoint of the previous one stays); a checkpoint
write is never cut short, a signal during it takes effect when it is complete.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any

import jax

from .._checks import check_positive_int
from .._monitor import AbstractMonitor, Advance
from ._checkpoint import Checkpointer
from ._interrupts import deferred_interrupts
from ._progress import progress_bar


class ChunkedRun(AbstractMonitor):
    """Checkpoints, progress and resume around `advance(state, step)`.

    **Arguments:**

    - `directory`: the checkpoint folder (created when needed); `None` shows
      progress only and keeps nothing.
    - `keep`: how many of the newest checkpoints to keep.
    - `progress`: show progress (a tqdm bar on a terminal, one line every 30 s
      in a log file; see [`progress_bar`][sciml.training.progress_bar]).
    - `description`: the progress line's label.
    """

    def __init__(
        self,
        directory: str | Path | None,
        *,
        keep: int = 2,
        progress: bool = True,
        description: str = "integrate",
    ):
        self.directory = None if directory is None else Path(directory)
        self.keep = check_positive_int("keep", keep)
        self.progress = bool(progress)
        self.description = str(description)

    def run(
        self,
        state: Any,
        key: jax.Array,
        advance: Advance,
        *,
        total: int,
        fingerprint: dict | None = None,
    ) -> tuple[Any, int]:
        """Calls `advance(state, step) -> (state, step, info)` until `step == total`.

        `state` is a pytree of arrays (the structure a checkpoint is restored
        into); `key` is saved beside it; `info` (names to numbers) is shown on
        the progress line. A checkpoint is written after every chunk, at the
        end and on interrupt. `fingerprint` (JSON data) names the run: a folder
        holding checkpoints of another run is refused with
        `CheckpointMismatchError`.

        **Returns:** `(state, start)`: the final state and the step this call
        resumed from (0 for a fresh run).
        """
        checkpointer = None
        start = 0
        if self.directory is not None:
            checkpointer = Checkpointer(
                self.directory, keep=self.keep, fingerprint=fingerprint, remove_unfinished=True
            )
            if checkpointer.latest_step() is not None:
                state, _, key, start = checkpointer.restore(state, ())
                print(f"{self.description}: resuming from step {start} of {total}", file=sys.stderr)

        def save(current: tuple[Any, int]) -> None:
            if checkpointer is not None and checkpointer.latest_step() != current[1]:
                with interrupts.writing():
                    checkpointer.save(current[1], current[0], (), key)

        bar = progress_bar(total, initial=start, desc=self.description, disable=not self.progress)
        # state and step are one tuple, replaced by one assignment, so an
        # interrupt never sees a state and a step that disagree
        current = (state, start)
        with deferred_interrupts(self.description, "the chunk in progress") as interrupts:
            try:
                while current[1] < total and not interrupts.received:
                    began = time.perf_counter()
                    state, step, info = advance(*current)
                    jax.block_until_ready(state)
                    done = step - current[1]
                    current = (state, step)
                    bar.set_postfix(
                        **_shown(info),
                        s_per_step=f"{(time.perf_counter() - began) / max(done, 1):.3g}",
                    )
                    bar.update(done)
                    save(current)
                save(current)
                interrupts.check()
            except KeyboardInterrupt:
                if not interrupts.hard:
                    save(current)
                raise
            finally:
                bar.close()
                if checkpointer is not None:
                    checkpointer.close()
        return current[0], start


def _shown(info: dict[str, Any]) -> dict[str, str]:
    return {name: f"{float(value):.4g}" for name, value in info.items()}
