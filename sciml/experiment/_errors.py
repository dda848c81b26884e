"""The one error the runner reports as a single `error: ...` line, and the
one-line descriptions of what it wraps: an exception raised by a config's or
task's own code, and a run file that is not readable JSON."""

from __future__ import annotations

import json
import traceback
from pathlib import Path
from typing import Any


class ConfigError(ValueError):
    """A config file, config module, task or override that cannot be used.

    Raised before any work starts; the command line prints it as one line
    (`error: ...`) and exits with status 2.
    """


def _same_file(a: str | None, b: str | Path | None) -> bool:
    if not a or not b:
        return False
    try:
        return Path(a).resolve() == Path(b).resolve()
    except OSError:
        return False


def describe_raised(error: BaseException, file: str | Path | None) -> str:
    """`error` in one line: its type, the line of `file` it was raised from (the
    innermost frame in that file; another file is named) and its message, e.g.
    `SyntaxError at line 3: expected ':'`."""
    if isinstance(error, SyntaxError):
        where = f" at line {error.lineno}" if error.lineno else ""
        if error.filename and not _same_file(error.filename, file):
            where = f" in {error.filename}{where}"
        return f"SyntaxError{where}: {error.msg}"
    frames = [(f.f_code.co_filename, line) for f, line in traceback.walk_tb(error.__traceback__)]
    mine = [line for name, line in frames if _same_file(name, file)]
    if mine:
        where = f" at line {mine[-1]}"
    elif frames:
        where = f" in {frames[-1][0]} at line {frames[-1][1]}"
    else:
        where = ""
    text = " ".join(str(error).split())
    return f"{type(error).__name__}{where}" + (f": {text}" if text else "")


def read_json(path: Path, fix: str, expected: type = dict) -> Any:
    """The JSON data of a run file; a `ConfigError` naming `path`, the place of
    the first error and `fix` when it cannot be read or is not an `expected`."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as error:
        problem = f"is not valid JSON (line {error.lineno}, column {error.colno}: {error.msg})"
    except (OSError, UnicodeDecodeError) as error:
        problem = f"cannot be read ({type(error).__name__}: {error})"
    else:
        if isinstance(data, expected):
            return data
        problem = f"holds a JSON {type(data).__name__}, not an object"
    raise ConfigError(f"{path} {problem}; {fix}")
