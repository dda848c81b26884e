"""The statuses that cross a process boundary in an online study, as
standard-library enumerations both sides share (no JAX: the solver process
imports them too). Each member is also its string (`RunState.DONE == "done"`),
so the run table in a checkpoint, the close message on the wire and the
events in `events.jsonl` keep their plain-text form, and files written before
these enumerations existed read back unchanged.
"""

from __future__ import annotations

import enum


class _Text(str, enum.Enum):
    """A string enumeration that prints and formats as its value (as
    `enum.StrEnum` does from Python 3.11)."""

    __str__ = str.__str__
    __format__ = str.__format__


class RunState(_Text):
    """A run's state in the `RunTable` of `sciml.online` (saved with each
    checkpoint)."""

    PENDING = "pending"
    RUNNING = "running"
    DONE = "done"
    FAILED = "failed"


class CloseStatus(_Text):
    """How a solver run ended, as its close message says: `"ok"`, or
    `"error: <type>: <message>"` when the solver raised."""

    OK = "ok"
    ERROR = "error"

    @classmethod
    def error(cls, detail: str) -> str:
        """The status text of a run that failed with `detail`."""
        return f"{cls.ERROR}: {detail}"

    @classmethod
    def of(cls, status: str) -> CloseStatus:
        """`OK` for the text `"ok"`, `ERROR` for any other status text."""
        return cls.OK if status == cls.OK else cls.ERROR


class JobEnd(_Text):
    """How a solver job ended when it has no exit code of its own: the trainer
    cancelled it after it sent nothing for the study's timeout."""

    TIMEOUT = "timeout"
