"""The config catalogue: `sciml-run --list` (and `--help`), one line per config.

A config file declares its line as a module constant beside `get_config`,

    ABOUT = About("an MLP learns the 1-D heat operator", minutes=1, tiny_minutes=0.2)

and `sciml-run --list` prints, for every config of the checkout, what it
runs, the CPU minutes of its default and `:tiny` variants, and whether it is
sized for a GPU. A config without `ABOUT` is listed by the first line of its
docstring.
"""

from __future__ import annotations

import dataclasses
import json
from importlib import metadata
from pathlib import Path

from ._errors import ConfigError


@dataclasses.dataclass(frozen=True)
class About:
    """A config's line in the catalogue.

    **Arguments:** `what`, what the config runs, in one line; `minutes`, the
    wall minutes of the default variant on a 2-core CPU (None when it is
    sized for a GPU and was not run on a CPU); `tiny_minutes`, the same for
    `:tiny`; `gpu`, whether the default variant is sized for a GPU.
    """

    what: str
    minutes: int | float | None
    tiny_minutes: int | float
    gpu: bool = False

    def __post_init__(self):
        if not isinstance(self.what, str) or not self.what.strip():
            raise TypeError(f"`what` must be a non-empty string, got {self.what!r}.")
        for name in ("minutes", "tiny_minutes"):
            value = getattr(self, name)
            if value is None and name == "minutes" and self.gpu:
                continue
            if isinstance(value, bool) or not isinstance(value, int | float) or value < 0:
                raise ValueError(f"`{name}` must be a number of minutes >= 0, got {value!r}.")


HEADER = [
    "minutes on a 2-core CPU, about (the default variant, then :tiny); GPU: sized for a GPU",
    f"  {'config':<42} {'default':>7} {'tiny':>4}  {'':3}  what it runs",
]


def _minutes(value: int | float | None) -> str:
    if value is None:
        return "-"
    return "<1" if value < 1 else f"{value:.0f}"


def catalogue_line(shown: str, about: About) -> str:
    """One line of the catalogue: the config as shown, its minutes, the GPU flag, what it runs."""
    gpu = "GPU" if about.gpu else ""
    times = f"{_minutes(about.minutes):>7} {_minutes(about.tiny_minutes):>4}"
    return f"  {shown:<42} {times}  {gpu:3}  {about.what}"


def about_config(path: Path) -> About | str:
    """The `ABOUT` of the config file `path`, else the first line of its
    docstring (a file that cannot be loaded: the error, in one line)."""
    from ._config import _load_module

    try:
        module = _load_module("file", str(path), str(path))
    except ConfigError as error:
        return f"(not readable: {error})"
    about = getattr(module, "ABOUT", None)
    if isinstance(about, About):
        return about
    lines = (module.__doc__ or "").strip().splitlines()
    return lines[0] if lines else "(no description)"


def catalogue(configs: list[Path], shown: list[str]) -> list[str]:
    """The catalogue's lines for `configs`, named as in `shown`."""
    lines = list(HEADER)
    for path, name in zip(configs, shown, strict=True):
        about = about_config(path)
        if isinstance(about, About):
            lines.append(catalogue_line(name, about))
        else:
            lines.append(f"  {name:<42} {'?':>7} {'?':>4}  {'':3}  {about}")
    return lines


def installed_from() -> str | None:
    """Where this copy of the package was installed from (the git URL and
    commit, or the folder; pip records it), or None."""
    try:
        text = metadata.distribution("sciml-jax").read_text("direct_url.json")
    except metadata.PackageNotFoundError:
        return None
    if not text:
        return None
    data = json.loads(text)
    url, vcs = data.get("url"), data.get("vcs_info")
    if vcs:
        commit = vcs.get("commit_id", "")[:12]
        return f"{vcs.get('vcs', 'git')}+{url}" + (f"@{commit}" if commit else "")
    return url
