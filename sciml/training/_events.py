"""TensorBoard event files of a run, written with tensorboardX (no TensorFlow).

`fit` writes every record of `metrics.jsonl` into the event file of its
`workdir` as scalars (`train/loss`, `train/steps_per_s`, `eval/rel_l2`, the
online counters, ...), at the same steps; the runner adds the run's config as
hyperparameters (TensorBoard's HParams tab), the summary's numbers
(`summary/<key>`) and the figures under `plots/` as images. So

    tensorboard --logdir runs/

compares every run on this machine. One file per run directory and process
lifetime, written by the main process alone (see
[`is_main_process`][sciml.distributed.is_main_process]); the runner holds
the run directory's writer open around its task
([`run_events`][sciml.training._events.run_events]) so that `fit` and the
runner share it. A resumed run drops what was logged after its checkpoint,
as `metrics.jsonl` does: its new file starts with TensorBoard's purge marker
(a `SessionLog.START` at the first step it logs again), and TensorBoard
hides the older file's points from that step on.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import struct
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import numpy as np


#: Seconds between background writes of an open event file (TensorBoard
#: shows a run while it trains); `close` and `flush` write at once.
FLUSH_SECONDS = 10


class EventWriter:
    """The TensorBoard event file of one directory, created on the first write.

    **Arguments:** `directory`, where the file goes; `main`, whether this
    process writes (a writer of another process of a run writes nothing);
    `hparams`, a flat `{name: bool | int | float | str}` written as the run's
    hyperparameters when the file is created.
    """

    def __init__(
        self, directory: str | Path, *, main: bool = True, hparams: Mapping[str, Any] | None = None
    ):
        self.directory, self.main = Path(directory), bool(main)
        self.hparams = dict(hparams or {})
        self.purge_step: int | None = None
        self._writer = None

    def _file(self):
        if self._writer is None:
            from tensorboardX import SummaryWriter
            from tensorboardX.summary import hparams

            self._writer = SummaryWriter(
                str(self.directory),
                purge_step=self.purge_step,
                flush_secs=FLUSH_SECONDS,
                # the file is named by the second it was opened in: two writers
                # of one second (a run resumed at once) must not share a name
                filename_suffix=f".{os.getpid()}.{next(_FILES)}",
            )
            if self.hparams:
                _, session_start, _ = hparams(self.hparams, {})
                self._writer.file_writer.add_summary(session_start)
        return self._writer

    def resume_after(self, step: int) -> None:
        """Drops, for TensorBoard, what an earlier file logged after `step`:
        a resumed run logs those steps again."""
        self.purge_step = step + 1
        if self._writer is not None and self.main:
            from tensorboardX.proto.event_pb2 import Event, SessionLog

            start = SessionLog(status=SessionLog.START)
            self._writer.file_writer.add_event(Event(step=step + 1, session_log=start))

    def scalars(self, prefix: str, step: int, record: Mapping[str, Any]) -> None:
        """The numbers of `record` (a `metrics.jsonl` line) as `prefix/<name>`
        at `step`; `step`, `split` and values that are not numbers are left out."""
        if not self.main:
            return
        writer = self._file()
        for name, value in record.items():
            if name not in ("step", "split") and _is_number(value):
                writer.add_scalar(f"{prefix}/{name}", float(value), int(step))

    def images(self, step: int, paths: Mapping[str, Path]) -> None:
        """PNG files as images, `{tag: path}`, at `step` (stored as they are,
        not decoded and encoded again)."""
        if not self.main or not paths:
            return
        from tensorboardX.proto.summary_pb2 import Summary

        writer = self._file()
        for tag, path in paths.items():
            data = Path(path).read_bytes()
            width, height = struct.unpack(">II", data[16:24])  # the PNG header's IHDR
            image = Summary.Image(
                height=height, width=width, colorspace=4, encoded_image_string=data
            )
            writer.file_writer.add_summary(
                Summary(value=[Summary.Value(tag=tag, image=image)]), int(step)
            )

    def flush(self) -> None:
        if self._writer is not None:
            self._writer.flush()

    def close(self) -> None:
        if self._writer is not None:
            self._writer.close()
            self._writer = None


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float | np.number) and not isinstance(value, bool | np.bool_)


_FILES = itertools.count()
_HELD: dict[Path, EventWriter] = {}  # run directories whose writer the runner holds open


def event_writer(directory: str | Path, *, main: bool = True) -> tuple[EventWriter, bool]:
    """The writer of `directory`: the one the runner holds open for it, else a
    new one. **Returns:** the writer, and whether the caller owns it (and so
    closes it)."""
    held = _HELD.get(Path(directory).resolve())
    if held is not None:
        return held, False
    return EventWriter(directory, main=main), True


@contextlib.contextmanager
def run_events(
    directory: str | Path, *, main: bool = True, hparams: Mapping[str, Any] | None = None
) -> Iterator[EventWriter]:
    """Holds one writer open for `directory` while the block runs: a `fit`
    inside whose `workdir` it is writes into the same file. Closed on exit."""
    key = Path(directory).resolve()
    writer = EventWriter(directory, main=main, hparams=hparams)
    _HELD[key] = writer
    try:
        yield writer
    finally:
        del _HELD[key]
        writer.close()


def flat_hparams(tree: Mapping[str, Any], prefix: str = "") -> dict[str, bool | int | float | str]:
    """A nested config as TensorBoard hyperparameters: dotted names, numbers,
    flags and strings as they are, anything else (lists, None) as its text."""
    out: dict[str, bool | int | float | str] = {}
    for key, value in tree.items():
        name = f"{prefix}{key}"
        if isinstance(value, Mapping):
            out.update(flat_hparams(value, name + "."))
        elif isinstance(value, bool | int | float | str):
            out[name] = value
        else:
            out[name] = str(value)
    return out
