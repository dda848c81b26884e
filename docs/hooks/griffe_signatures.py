"""Griffe extension: the API pages show the signature of every Equinox module.

An `equinox.Module` gets its `__init__` from its fields when the class is
created, as a dataclass does, but without the `@dataclass` decorator that
griffe's static analysis recognises; so a settings module such as
`sciml.pararnn.Newton` showed no signature, and its defaults (`max_steps`, the
tolerances) were nowhere on its page. For each class of the package without an
`__init__` of its own in the source, this extension imports the class, and
where Python generated its `__init__` (from the fields; a `NamedTuple`'s
`__new__` likewise), writes that `__init__` into the docs: parameters, kinds and defaults as Python sees them
(`inspect.signature`), annotations from the class's own field declarations.
"""

from __future__ import annotations

import importlib
import inspect
from typing import Any

import griffe


_KINDS = {
    inspect.Parameter.POSITIONAL_ONLY: griffe.ParameterKind.positional_only,
    inspect.Parameter.POSITIONAL_OR_KEYWORD: griffe.ParameterKind.positional_or_keyword,
    inspect.Parameter.VAR_POSITIONAL: griffe.ParameterKind.var_positional,
    inspect.Parameter.KEYWORD_ONLY: griffe.ParameterKind.keyword_only,
    inspect.Parameter.VAR_KEYWORD: griffe.ParameterKind.var_keyword,
}


def _generated_init(cls: griffe.Class) -> inspect.Signature | None:
    """The signature of the class's `__init__` when Python generated it, else None
    (and None for an abstract base, which is never built)."""
    if cls.name.startswith("Abstract"):
        return None
    try:
        runtime = getattr(importlib.import_module(cls.module.path), cls.name)
    except Exception:
        return None
    if isinstance(runtime, type) and issubclass(runtime, tuple) and hasattr(runtime, "_fields"):
        signature = inspect.signature(runtime)  # a NamedTuple's generated `__new__`
        self = inspect.Parameter("self", inspect.Parameter.POSITIONAL_OR_KEYWORD)
        return signature.replace(parameters=[self, *signature.parameters.values()])
    init = getattr(runtime, "__init__", None)
    code = getattr(inspect.unwrap(init), "__code__", None) if init is not None else None
    if code is None or code.co_filename != "<string>":  # written in a source file
        return None
    return inspect.signature(init)


def _annotation(cls: griffe.Class, name: str) -> Any:
    try:
        member = cls.all_members.get(name)
    except Exception:
        return None
    return getattr(member, "annotation", None) if member is not None else None


def _add_init(cls: griffe.Class) -> None:
    if "__init__" in cls.members:
        return
    signature = _generated_init(cls)
    if signature is None:
        return
    parameters = [
        griffe.Parameter(
            p.name,
            annotation=None if p.name == "self" else _annotation(cls, p.name),
            kind=_KINDS[p.kind],
            default=None if p.default is inspect.Parameter.empty else repr(p.default),
        )
        for p in signature.parameters.values()
    ]
    init = griffe.Function(
        "__init__",
        lineno=0,
        endlineno=0,
        parent=cls,
        parameters=griffe.Parameters(*parameters),
        returns="None",
    )
    cls.set_member("__init__", init)


def _visit(obj: griffe.Object, seen: set[str]) -> None:
    if obj.path in seen:
        return
    seen.add(obj.path)
    if isinstance(obj, griffe.Class):
        _add_init(obj)
    for member in obj.members.values():
        if not member.is_alias and (member.is_module or member.is_class):
            _visit(member, seen)


class GeneratedInit(griffe.Extension):
    """Writes the generated `__init__` of Equinox modules into the docs."""

    def on_package(self, *, pkg: griffe.Module, **kwargs: Any) -> None:
        _visit(pkg, set())
