"""Every name a `sciml` subpackage exports is documented on its API page.

A name counts as documented when its page has a `::: sciml.<sub>.<name>` block,
or when it is a re-export of another subpackage's name documented on that
subpackage's page (`sciml.pararnn.Diagonal` is `sciml.recurrence.Diagonal`).
This reads the Markdown sources only; the site build (`make docs`) renders them.
"""

import importlib
import pkgutil
import re
import types
from pathlib import Path

import pytest

import sciml


ROOT = Path(__file__).resolve().parents[2]
API = ROOT / "docs" / "api"
_CONSTANT_TYPES = (tuple, list, dict, frozenset, str, int, float)


def subpackages() -> list[str]:
    return sorted(
        info.name for info in pkgutil.iter_modules(sciml.__path__) if not info.name.startswith("_")
    )


def exported(module: types.ModuleType) -> dict[str, object]:
    """`__all__`, or else the public names defined in `sciml` (and public constants)."""
    if hasattr(module, "__all__"):
        return {name: getattr(module, name) for name in module.__all__}
    names = {}
    for name, value in vars(module).items():
        if name.startswith("_") or isinstance(value, types.ModuleType):
            continue
        home = getattr(value, "__module__", None)
        if (isinstance(home, str) and home.startswith("sciml")) or (
            home is None and isinstance(value, _CONSTANT_TYPES)
        ):
            names[name] = value
    return names


def documented(sub: str) -> set[str]:
    page = (API / f"{sub}.md").read_text(encoding="utf-8")
    return set(re.findall(rf"^::: sciml\.{sub}\.([A-Za-z_]\w*)", page, re.MULTILINE))


def test_every_subpackage_has_an_api_page():
    missing = [sub for sub in subpackages() if not (API / f"{sub}.md").is_file()]
    assert not missing, f"no docs/api/<name>.md page for: {missing}"


@pytest.mark.parametrize("sub", subpackages())
def test_every_export_is_documented(sub):
    if not (API / f"{sub}.md").is_file():
        pytest.skip(f"no page docs/api/{sub}.md (reported by the test above)")
    module = importlib.import_module(f"sciml.{sub}")
    on_page = documented(sub)
    elsewhere = {}
    for other in subpackages():
        if other != sub and (API / f"{other}.md").is_file():
            other_module = importlib.import_module(f"sciml.{other}")
            for name in documented(other):
                if hasattr(other_module, name):
                    elsewhere.setdefault(name, []).append(getattr(other_module, name))
    undocumented = sorted(
        name
        for name, value in exported(module).items()
        if name not in on_page and not any(value is v for v in elsewhere.get(name, ()))
    )
    assert not undocumented, (
        f"sciml.{sub} exports names that docs/api/{sub}.md does not document: {undocumented}; "
        f"add a `::: sciml.{sub}.<name>` block for each"
    )


def test_pages_document_only_real_names():
    for sub in subpackages():
        if not (API / f"{sub}.md").is_file():
            continue
        module = importlib.import_module(f"sciml.{sub}")
        unknown = sorted(name for name in documented(sub) if not hasattr(module, name))
        assert not unknown, f"docs/api/{sub}.md documents names sciml.{sub} lacks: {unknown}"
