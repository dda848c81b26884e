"""Progress display of `fit`: a tqdm bar on a terminal, plain lines in a log file.

A tqdm bar redraws itself with carriage returns, which a terminal overwrites in
place but a log file (a Slurm job's output, `nohup`, CI) keeps in full: one
redraw per update, hundreds of kilobytes per run. When standard error is not a
terminal, `progress_bar` returns a `LineProgress` instead, which writes one
line every `interval` seconds (and one at the end):

    train: step 1200/5000 (24%), 41.3 steps/s, eta 1m32s, loss=0.0123

Both forms measure their rate and time left from the first finished step on,
so the first step's compilation does not turn into an estimate of hours. While
a `batch_fn` waits for data before the first step (an online study filling its
buffer), it says so through [`show_status`][sciml.training._progress.show_status]
on the display of the running `fit`:

    train: step 0/5000 (0%), waiting for simulations to fill the buffer (40 of 160 samples)
"""

from __future__ import annotations

import sys
import time
from typing import Any

from tqdm import tqdm


LOG_INTERVAL = 30.0  # seconds between the lines of a LineProgress

_ACTIVE: list[Any] = []  # the displays of the running `fit` calls, innermost last


def show_status(text: str) -> None:
    """Shows `text` (what the loop waits for) on the running `fit`'s progress
    display until its next step finishes; does nothing when none is shown."""
    if _ACTIVE:
        _ACTIVE[-1].set_status(text)


def note(text: str) -> None:
    """Prints `text` on standard error as a line of its own: above the bar of
    the running `fit` when one is drawn on a terminal (through tqdm, which
    draws the bar again below it), else plainly."""
    bar = _ACTIVE[-1] if _ACTIVE else None
    if isinstance(bar, _Bar) and not bar.disable:
        bar.write(text, file=sys.stderr)
    else:
        print(text, file=sys.stderr, flush=True)


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
        self.status: str | None = None
        self._reference: tuple[float, int] | None = None  # (time, step) after the first step
        self._last_line = time.perf_counter()
        self._last_written: str | None = None
        self._closed = False
        _ACTIVE.append(self)

    def update(self, n: int = 1) -> None:
        self.n += n
        self.status = None
        now = time.perf_counter()
        if self._reference is None:  # the first step (compilation) ends: lines count from here
            self._reference = (now, self.n)
            self._last_line = now
            return
        if now - self._last_line >= self.interval and self.n < self.total:
            self._write(now)  # the last step's line is `close`'s, with the last loss

    def set_postfix(self, ordered_dict: dict[str, Any] | None = None, **values: Any) -> None:
        """The `name=value` pairs at the end of each line, in the order given."""
        self.postfix = {**(ordered_dict or {}), **values}

    def set_status(self, text: str) -> None:
        """Shows `text` instead of the rate until the next step finishes: a
        line at once, then one every `interval` seconds while it lasts."""
        now = time.perf_counter()
        if self.status is None or now - self._last_line >= self.interval:
            self.status = text
            self._write(now)
        self.status = text

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            if self in _ACTIVE:
                _ACTIVE.remove(self)
            line = self.line(time.perf_counter())
            if line != self._last_written:  # nothing new since the last line: not twice
                self._print(line)

    def line(self, now: float) -> str:
        """The progress line at time `now` (`time.perf_counter()`)."""
        percent = 100.0 * self.n / self.total if self.total else 100.0
        parts = [f"{self.desc}: step {self.n}/{self.total} ({percent:.0f}%)"]
        if self.status is not None:
            return ", ".join([*parts, self.status])
        if self._reference is not None and self.n > self._reference[1]:
            rate = (self.n - self._reference[1]) / max(now - self._reference[0], 1e-9)
            parts.append(f"{rate:.3g} steps/s")
            if self.n < self.total:
                parts.append(f"eta {_duration((self.total - self.n) / rate)}")
        parts += [f"{name}={value}" for name, value in self.postfix.items()]
        return ", ".join(parts)

    def _write(self, now: float) -> None:
        self._last_line = now
        self._print(self.line(now))

    def _print(self, line: str) -> None:
        self._last_written = line
        print(line, file=self.file or sys.stderr, flush=True)


class _Bar(tqdm):
    """A tqdm bar whose rate counts from the first finished step (as
    `LineProgress`'s), and which shows `set_status` text until the next step."""

    def __init__(self, *args: Any, **kwargs: Any):
        self._reference: tuple[float, int] | None = None  # (time, step) after the first step
        self._status, self._status_shown = False, 0.0
        super().__init__(*args, **kwargs)
        _ACTIVE.append(self)

    def update(self, n: int = 1) -> bool | None:
        if self.disable:
            return super().update(n)
        if self._reference is None:
            self._reference = (self._time(), self.n + n)
        if self._status:
            self._status = False
            self.set_postfix_str("", refresh=False)
        return super().update(n)

    def set_status(self, text: str) -> None:
        if self.disable:
            return
        changed = not self._status or text != self.postfix
        self._status = True
        now = self._time()
        if changed or now - self._status_shown >= 0.5:  # a waiting loop calls often
            self._status_shown = now
            self.set_postfix_str(text)

    @property
    def format_dict(self) -> dict[str, Any]:
        values = super().format_dict
        rate = None
        if self._reference is not None and self.n > self._reference[1]:
            elapsed = max(self._time() - self._reference[0], 1e-9)
            rate = (self.n - self._reference[1]) / elapsed
        values["rate"] = rate
        values["initial"] = self.n if rate is None else values["initial"]  # no average rate yet
        return values

    def close(self) -> None:
        if self in _ACTIVE:
            _ACTIVE.remove(self)
        super().close()


def progress_bar(total: int, *, initial: int, desc: str, disable: bool) -> Any:
    """A tqdm bar when standard error is a terminal, else a [`LineProgress`][sciml.training.LineProgress]."""
    stream = sys.stderr
    terminal = hasattr(stream, "isatty") and stream.isatty()
    notebook = "ipykernel" in sys.modules  # a notebook redraws a tqdm bar in place
    if not disable and not terminal and not notebook:
        return LineProgress(total, initial=min(initial, total), desc=desc)
    return _Bar(
        total=total,
        initial=min(initial, total),
        desc=desc,
        disable=disable,
        dynamic_ncols=True,
        leave=True,
    )
