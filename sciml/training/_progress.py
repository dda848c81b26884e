"""Progress display of `fit`: a tqdm bar on a terminal, plain lines in a log file.

A tqdm bar redraws itself with carriage returns, which a terminal overwrites in
place but a log file (a Slurm job's output, `nohup`, CI) keeps in full: one
redraw per update, hundreds of kilobytes per run. When standard error is not a
terminal, `progress_bar` returns a `LineProgress` instead, which writes one
line every `interval` seconds (and one at the end):

    train: step 1200/5000 (24%), 41.3 steps/s, eta 1m32s, loss=0.0123

Its rate and time left are measured from the first finished step on, so the
first step's compilation does not turn into an estimate of hours.
"""

from __future__ import annotations

import sys
import time
from typing import Any

from tqdm import tqdm


LOG_INTERVAL = 30.0  # seconds between the lines of a LineProgress


def _duration(seconds: float) -> str:
    seconds = int(round(seconds))
    hours, rest = divmod(seconds, 3600)
    minutes, secs = divmod(rest, 60)
    if hours:
        return f"{hours}h{minutes:02d}m"
    return f"{minutes}m{secs:02d}s" if minutes else f"{secs}s"


class LineProgress:
    """tqdm's `update` / `set_postfix` / `close`, written as one line per `interval` seconds.

    **Arguments:** `total` steps, `initial` step (a resumed run), `desc` (the
    line's label), `interval` in seconds, `file` (a text stream; default `sys.stderr`).
    """

    def __init__(
        self,
        total: int,
        *,
        initial: int = 0,
        desc: str = "train",
        interval: float = LOG_INTERVAL,
        file: Any = None,
    ):
        self.total, self.n, self.desc, self.interval = int(total), int(initial), desc, interval
        self.file = file
        self.postfix: dict[str, Any] = {}
        self._reference: tuple[float, int] | None = None  # (time, step) after the first step
        self._last_line = time.perf_counter()
        self._closed = False

    def update(self, n: int = 1) -> None:
        self.n += n
        now = time.perf_counter()
        if self._reference is None:  # the first step (compilation) ends: lines count from here
            self._reference = (now, self.n)
            self._last_line = now
            return
        if now - self._last_line >= self.interval:
            self._write(now)

    def set_postfix(self, **values: Any) -> None:
        self.postfix = values

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            self._write(time.perf_counter())

    def line(self, now: float) -> str:
        """The progress line at time `now` (`time.perf_counter()`)."""
        percent = 100.0 * self.n / self.total if self.total else 100.0
        parts = [f"{self.desc}: step {self.n}/{self.total} ({percent:.0f}%)"]
        if self._reference is not None and self.n > self._reference[1]:
            rate = (self.n - self._reference[1]) / max(now - self._reference[0], 1e-9)
            parts.append(f"{rate:.3g} steps/s")
            if self.n < self.total:
                parts.append(f"eta {_duration((self.total - self.n) / rate)}")
        parts += [f"{name}={value}" for name, value in self.postfix.items()]
        return ", ".join(parts)

    def _write(self, now: float) -> None:
        self._last_line = now
        print(self.line(now), file=self.file or sys.stderr, flush=True)


def progress_bar(total: int, *, initial: int, desc: str, disable: bool) -> Any:
    """A tqdm bar when standard error is a terminal, else a [`LineProgress`][sciml.training.LineProgress]."""
    stream = sys.stderr
    terminal = hasattr(stream, "isatty") and stream.isatty()
    notebook = "ipykernel" in sys.modules  # a notebook redraws a tqdm bar in place
    if not disable and not terminal and not notebook:
        return LineProgress(total, initial=min(initial, total), desc=desc)
    return tqdm(
        total=total,
        initial=min(initial, total),
        desc=desc,
        disable=disable,
        dynamic_ncols=True,
        leave=True,
    )
