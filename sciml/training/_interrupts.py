"""Ctrl-C and SIGTERM inside a training loop, turned into a flag.

Python raises `KeyboardInterrupt` wherever the main thread happens to be, and
one raised inside a checkpoint write leaves a half-written folder that the next
save trips over. So while a loop runs, SIGINT and SIGTERM are only recorded
(with a note on standard error) and the loop stops where it can: after the
step in progress, with one checkpoint. Work that can be dropped and redone
(waiting for a batch) is given up at once, and a second signal stops at once
too, keeping the last checkpoint; but a checkpoint write is never cut: a
signal during it takes effect when it is complete.
"""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Iterator

from ..distributed import is_main_process
from ._progress import note


class Interrupts:
    """The signals received while a loop runs (see the module docstring).

    `received` lists their names; `hard` is set when a second signal stopped
    the loop at once: the state in progress is given up, not checkpointed.
    """

    def __init__(self, description: str, what: str):
        self.description, self.what = description, what
        self.received: list[str] = []
        self.hard = False
        self._abandonable = self._writing = False

    def check(self) -> None:
        """Raises `KeyboardInterrupt` if a signal was received."""
        if self.received:
            raise KeyboardInterrupt(f"signal {self.received[0]}")

    @contextlib.contextmanager
    def abandonable(self) -> Iterator[None]:
        """Work inside may be given up on the first signal (nothing is lost)."""
        self._abandonable = True
        try:
            yield
        finally:
            self._abandonable = False

    @contextlib.contextmanager
    def writing(self) -> Iterator[None]:
        """A checkpoint write: never cut; a second signal that came during it
        raises `KeyboardInterrupt` once it is complete."""
        self._writing = True
        try:
            yield
        finally:
            self._writing = False
        if len(self.received) > 1:
            self.hard = True
            raise KeyboardInterrupt(f"signal {self.received[-1]}")

    def _handle(self, signum, frame) -> None:
        name = signal.Signals(signum).name
        self.received.append(name)
        if self._writing:
            self._note(
                f"{name} received while a checkpoint is written; stopping once it is complete"
            )
            return
        if len(self.received) > 1:
            self.hard = True
            raise KeyboardInterrupt(f"signal {name}")
        self._note(
            f"{name} received; checkpointing when {self.what} has finished "
            "(send it again to stop at once)"
        )
        if self._abandonable:
            raise KeyboardInterrupt(f"signal {name}")

    def _note(self, text: str) -> None:
        if is_main_process():  # once for a run of several processes
            note(f"{self.description}: {text}")


@contextlib.contextmanager
def deferred_interrupts(description: str, what: str) -> Iterator[Interrupts]:
    """Inside the block SIGINT and SIGTERM go to the yielded `Interrupts`;
    `what` names the work the first signal waits for ("the step in
    progress"). Previous handlers are restored on exit; off the main thread
    nothing is changed."""
    interrupts = Interrupts(description, what)
    if threading.current_thread() is not threading.main_thread():
        yield interrupts
        return
    previous = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)}
    for sig in previous:
        signal.signal(sig, interrupts._handle)
    try:
        yield interrupts
    finally:
        for sig, old in previous.items():
            signal.signal(sig, signal.SIG_DFL if old is None else old)
