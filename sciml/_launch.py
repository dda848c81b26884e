"""The runner's command before its imports: `sciml-run` starts here.

Importing the runner (JAX, XLA, orbax, ...) takes seconds; a Ctrl-C in them
would print Python's traceback of whatever module was loading. Until the
runner is imported, SIGINT and SIGTERM end the process with one line and
exit status 130 (nothing has been written yet); then the runner's own
handling takes over. Standard library only, so that this module loads at
once.

`python -m sciml._launch` is the command `--processes N` starts each process
with (under the name of the command the user typed, which they repeat in the
resume line).
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading
from collections.abc import Iterator


def _stop(signum, frame) -> None:
    if os.environ.get("SCIML_PROCESS_ID", "0") == "0":  # one line for a run of several processes
        name = signal.Signals(signum).name
        print(
            f"{name} while starting: stopped before the run began; nothing was written.",
            file=sys.stderr,
        )
    sys.stderr.flush()
    os._exit(130)


@contextlib.contextmanager
def exit_on_signals() -> Iterator[None]:
    """Inside the block SIGINT and SIGTERM print one line and exit with
    status 130; the previous handlers are put back on exit (off the main
    thread nothing changes)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    signals = (signal.SIGINT, signal.SIGTERM)
    previous = {sig: signal.signal(sig, _stop) for sig in signals}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def sciml_run(prog: str | None = "sciml-run") -> None:
    """The console script `sciml-run`: `sciml.experiment.cli` under `prog`
    (None: the name `--processes N` gave this process), a Ctrl-C during its
    imports ending in one line."""
    with exit_on_signals():
        from sciml.experiment import cli
        from sciml.experiment._cli import ENV_PROG
    cli(prog=prog or os.environ.get(ENV_PROG, "python -m sciml.experiment"))


if __name__ == "__main__":
    sciml_run(None)
