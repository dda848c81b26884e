"""Loading a config: `get_config(variant)` of a Python file or of an importable module.

A config spec is `FILE[:variant]` (a path to a `.py` file anywhere on disk) or
`MODULE[:variant]` (a dotted module name such as `experiments.configs.quickstart`).
The loaded `ConfigDict` remembers where it came from (a
[`ConfigSource`][sciml.experiment.ConfigSource]: file or module, variant and the
overrides applied to it), and the runner saves that next to the run, so a
resumed run calls `get_config` again instead of reading back frozen values:
fields linked by `ml_collections.FieldReference` (a schedule's `decay_steps`
tied to `train.steps`) follow a new override.
"""

from __future__ import annotations

import dataclasses
import importlib
import importlib.util
import inspect
import json
import re
from pathlib import Path
from typing import Any, Literal

import ml_collections

from ._errors import ConfigError, describe_raised
from ._imports import import_dotted
from ._overrides import apply_overrides
from ._validate import did_you_mean


_DOTTED = re.compile(r"^[A-Za-z_]\w*(\.[A-Za-z_]\w*)*$")
_SOURCE_ATTRIBUTE = "_sciml_config_source"


@dataclasses.dataclass(frozen=True)
class ConfigSource:
    """Where a config came from, so that it can be rebuilt.

    **Arguments:**

    - `kind`: `"file"` (a Python file) or `"module"` (an importable module).
    - `ref`: the file's absolute path, or the dotted module name (in
      `source.json`, a file inside the checkout is written relative to it).
    - `variant`: the argument passed to `get_config` (`None` for the default).
    - `overrides`: the `(key, value)` overrides applied after `get_config`, in
      order, values as given on the command line.
    """

    kind: Literal["file", "module"]
    ref: str
    variant: str | None = None
    overrides: tuple[tuple[str, str], ...] = ()

    def __post_init__(self):
        if self.kind not in ("file", "module"):
            raise ValueError(f"ConfigSource.kind must be 'file' or 'module', got {self.kind!r}.")

    @property
    def spec(self) -> str:
        """The `--config` argument that loads this source (without the overrides)."""
        return self.ref + (f":{self.variant}" if self.variant else "")

    @property
    def directory(self) -> Path:
        """The folder relative task paths are resolved against: the config file's own."""
        if self.kind == "file":
            return Path(self.ref).parent
        spec = importlib.util.find_spec(self.ref)
        if spec is None or spec.origin is None:
            return Path.cwd()
        return Path(spec.origin).parent

    def with_overrides(self, overrides: list[tuple[str, str]]) -> ConfigSource:
        """This source with `overrides` appended to its own."""
        extra = tuple((str(k), str(v)) for k, v in overrides)
        return dataclasses.replace(self, overrides=self.overrides + extra)

    def to_json(self, root: Path | None = None) -> dict[str, Any]:
        """The source as JSON data (`source.json`); a file inside `root` (the
        checkout the run was started from) by its path relative to it, so a
        run folder moved with its checkout still resumes."""
        ref = self.ref
        if self.kind == "file" and root is not None and Path(ref).is_relative_to(root.absolute()):
            ref = Path(ref).relative_to(root.absolute()).as_posix()
        return {
            "kind": self.kind,
            "ref": ref,
            "variant": self.variant,
            "overrides": [list(pair) for pair in self.overrides],
        }

    @classmethod
    def from_json(cls, data: dict[str, Any], run_dir: Path | None = None) -> ConfigSource:
        """The source `to_json` wrote; a relative file path is found from the
        working directory, else from a folder holding `run_dir` (a run
        directory inside the checkout)."""
        ref = data["ref"]
        if data["kind"] == "file" and not Path(ref).is_absolute():
            roots = [Path.cwd(), *(Path(run_dir).absolute().parents if run_dir else ())]
            found = [root / ref for root in roots if (root / ref).is_file()]
            ref = str((found or [Path.cwd() / ref])[0])
        return cls(
            kind=data["kind"],
            ref=ref,
            variant=data.get("variant"),
            overrides=tuple((str(k), str(v)) for k, v in data.get("overrides", ())),
        )


def source_of(config: ml_collections.ConfigDict) -> ConfigSource | None:
    """The [`ConfigSource`][sciml.experiment.ConfigSource] of a loaded config, or None."""
    return vars(config).get(_SOURCE_ATTRIBUTE)


def attach_source(config: ml_collections.ConfigDict, source: ConfigSource | None) -> None:
    """Records `source` on `config` (not as a config key: it is not a setting)."""
    object.__setattr__(config, _SOURCE_ATTRIBUTE, source)


def _is_file_spec(path: str) -> bool:
    return path.endswith(".py") or "/" in path or "\\" in path or not _DOTTED.match(path)


def _load_module(kind: str, ref: str, display: str):
    """The config's module; an exception its code raises is a one-line
    `ConfigError` naming the file and the line."""
    if kind == "file":
        file = Path(ref)
        if not file.is_file():
            siblings = sorted(file.parent.glob("*.py")) if file.parent.is_dir() else []
            hint = did_you_mean(display, [str(Path(display).with_name(p.name)) for p in siblings])
            raise ConfigError(f"--config: file {display!r} does not exist{hint}.")
        module_spec = importlib.util.spec_from_file_location(f"_sciml_config_{file.stem}", file)
        module = importlib.util.module_from_spec(module_spec)
        try:
            module_spec.loader.exec_module(module)
        except Exception as error:  # noqa: BLE001 - the config's own code: one line
            raise ConfigError(f"--config: {display}: {describe_raised(error, file)}") from None
        return module
    return import_dotted(
        ref,
        f"--config: no config module {ref!r} (and no file of that name); give a "
        "path to a .py file or an importable dotted module name.",
        "--config",
    )


def _takes_variant(get_config) -> str:
    """`"no"`, `"optional"` or `"required"`: whether `get_config` takes a
    positional argument (the variant), and whether it has a default."""
    try:
        parameters = inspect.signature(get_config).parameters.values()
    except (TypeError, ValueError):
        return "optional"
    positional = [
        p
        for p in parameters
        if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD, p.VAR_POSITIONAL)
    ]
    if not positional:
        return "no"
    first = positional[0]
    required = first.kind != first.VAR_POSITIONAL and first.default is first.empty
    return "required" if required else "optional"


def _call_get_config(module, display: str, variant: str | None) -> ml_collections.ConfigDict:
    """`get_config(variant)` (`get_config()` for one that takes no argument and
    no variant given); every way it fails is a one-line `ConfigError`."""
    get_config = getattr(module, "get_config", None)
    if not callable(get_config):
        raise ConfigError(f"--config: {display!r} defines no get_config() function.")
    takes = _takes_variant(get_config)
    if takes == "no" and variant is not None:
        raise ConfigError(
            f"--config: {display}: get_config() takes no variant, got {variant!r}; "
            f"drop ':{variant}' (or give get_config a `variant` argument)."
        )
    if takes == "required" and variant is None:
        raise ConfigError(
            f"--config: {display}: get_config needs a variant (its argument has no default); "
            f"give --config {display}:<variant>."
        )
    file = getattr(module, "__file__", None)
    try:
        config = get_config() if takes == "no" else get_config(variant)
    except ConfigError:
        raise
    except (KeyError, ValueError) as error:
        if variant is not None:
            raise ConfigError(
                f"--config: {display!r} has no variant {variant!r}: {error}"
            ) from None
        raised = describe_raised(error, file)
        raise ConfigError(
            f"--config: {display}: get_config(None) raised {raised}; if it needs a variant, "
            f"give --config {display}:<variant>."
        ) from None
    except Exception as error:  # noqa: BLE001 - the config's own code: one line
        raised = describe_raised(error, file)
        raise ConfigError(f"--config: {display}: get_config raised {raised}") from None
    if not isinstance(config, ml_collections.ConfigDict):
        raise ConfigError(f"--config: get_config() of {display!r} must return a ConfigDict.")
    return config


def load_source(source: ConfigSource, *, display: str | None = None) -> ml_collections.ConfigDict:
    """Calls `get_config(source.variant)` and applies `source.overrides`.

    **Returns:** the locked `ConfigDict`, with `source` attached (see
    [`source_of`][sciml.experiment.source_of]).

    **Raises:** [`ConfigError`][sciml.experiment.ConfigError] when the file or
    module is missing, defines no `get_config`, rejects the variant, or an
    override names an unknown key or has the wrong type.
    """
    display = source.ref if display is None else display
    module = _load_module(source.kind, source.ref, display)
    config = _call_get_config(module, display, source.variant)
    config.lock()
    apply_overrides(config, list(source.overrides))
    attach_source(config, source)
    return config


def parse_spec(spec: str) -> ConfigSource:
    """`FILE[:variant]` or `MODULE[:variant]` -> a [`ConfigSource`][sciml.experiment.ConfigSource].

    A spec is a file when it ends in `.py`, contains a path separator, or is
    not a dotted name; files are recorded by absolute path.
    """
    path, _, variant = spec.partition(":")
    if _is_file_spec(path) or Path(path).is_file():
        return ConfigSource("file", str(Path(path).absolute()), variant or None)
    return ConfigSource("module", path, variant or None)


def load_config(spec: str) -> ml_collections.ConfigDict:
    """Loads `FILE[:variant]` or `MODULE[:variant]`: `get_config(variant)`, locked.

    **Returns:** an `ml_collections.ConfigDict` that remembers its
    [`ConfigSource`][sciml.experiment.ConfigSource].
    """
    source = parse_spec(spec)
    return load_source(source, display=spec.partition(":")[0])


def config_json(config: ml_collections.ConfigDict) -> dict[str, Any]:
    """The config as plain JSON data (what `config.json` holds)."""
    return json.loads(config.to_json_best_effort(sort_keys=True))
