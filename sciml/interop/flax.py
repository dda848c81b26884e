"""A generic Equinox ↔ Flax NNX adapter.

`to_nnx(module)` wraps any Equinox module as a Flax NNX module: its floating
point (and complex) arrays become `nnx.Param`s, its other arrays (integer
buffers, say) non-trainable `EquinoxBuffer` variables, and everything else
(structure, hyperparameters, activation functions) stays static. Calling the
wrapper rebuilds the Equinox module from the current variable values and calls
it, so outputs and gradients are exactly those of the Equinox module, and
`nnx.Optimizer`, `nnx.jit`, `nnx.grad`, `nnx.split`/`nnx.merge` work on it.
`from_nnx(wrapper)` gives the Equinox module back with the current values.

One adapter serves every module: there are no per-layer Flax copies.
"""

from __future__ import annotations

from typing import Any

import equinox as eqx
import jax
from flax import nnx


__all__ = ["EquinoxBuffer", "EquinoxModule", "from_nnx", "to_nnx"]


class EquinoxBuffer(nnx.Variable):
    """A non-trainable array of a wrapped Equinox module (not an `nnx.Param`)."""


def _path_name(path: tuple) -> str:
    """`(GetAttrKey('layers'), SequenceKey(0), GetAttrKey('weight'))` -> `layers.0.weight`."""
    parts = []
    for entry in path:
        for attr in ("name", "key", "idx"):
            if hasattr(entry, attr):
                parts.append(str(getattr(entry, attr)))
                break
        else:
            parts.append(str(entry))
    return ".".join(parts) or "value"


class EquinoxModule(nnx.Module):
    """Flax NNX module wrapping an Equinox module. Build it with `to_nnx`.

    Variables are named after their path in the Equinox module
    (`layers.0.weight`), in `self.variables`.
    """

    def __init__(self, module: Any):
        if not isinstance(module, eqx.Module):
            raise TypeError(f"to_nnx expects an equinox.Module, got {type(module).__name__}.")
        arrays, static = eqx.partition(module, eqx.is_array)
        paths_and_leaves, treedef = jax.tree_util.tree_flatten_with_path(arrays)
        names = [_path_name(path) for path, _ in paths_and_leaves]
        if len(set(names)) != len(names):  # pragma: no cover - paths are unique in practice
            names = [f"{i}:{n}" for i, n in enumerate(names)]
        variables = {}
        for name, (_, leaf) in zip(names, paths_and_leaves):
            kind = nnx.Param if eqx.is_inexact_array(leaf) else EquinoxBuffer
            variables[name] = kind(leaf)
        self.variables = nnx.Dict(variables)
        self._names = nnx.static(tuple(names))
        self._treedef = nnx.static(treedef)
        self._static = nnx.static(static)

    def to_equinox(self) -> Any:
        """The Equinox module with the current variable values."""
        leaves = [self.variables[name][...] for name in self._names]
        arrays = jax.tree_util.tree_unflatten(self._treedef, leaves)
        return eqx.combine(arrays, self._static)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.to_equinox()(*args, **kwargs)

    def __getattr__(self, name: str) -> Any:
        # Methods other than __call__ (e.g. `step`, `init_state` of a sequence
        # layer) are forwarded to the rebuilt Equinox module.
        if name.startswith("_") or name in ("variables",):
            raise AttributeError(name)
        return getattr(self.to_equinox(), name)


def to_nnx(module: Any) -> EquinoxModule:
    """Wraps an Equinox module as a Flax NNX module (see the module docstring).

    **Arguments:** `module`, any `equinox.Module`.

    **Returns:** an [`EquinoxModule`][sciml.interop.flax.EquinoxModule] whose
    `nnx.Param`s are the module's floating-point arrays.
    """
    return EquinoxModule(module)


def from_nnx(nnx_module: nnx.Module) -> Any:
    """The Equinox module inside `nnx_module`, with its current parameter values."""
    if not isinstance(nnx_module, EquinoxModule):
        raise TypeError(
            "from_nnx expects a module made by sciml.interop.flax.to_nnx, "
            f"got {type(nnx_module).__name__}."
        )
    return nnx_module.to_equinox()
