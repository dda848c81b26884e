"""Checkpoints of the training state with orbax-checkpoint.

A checkpoint holds the model's arrays, the optimiser state, the PRNG key and
the step, stored as plain lists of arrays plus a JSON metadata item (never
pickled objects), so it loads in any later version of the code that builds the
same model. Writes are atomic: orbax writes to a temporary folder and renames it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import orbax.checkpoint as ocp


class CheckpointMismatchError(ValueError):
    """The checkpoint folder holds checkpoints of a different run or model."""


def _is_typed_key(key: jax.Array) -> bool:
    return jnp.issubdtype(key.dtype, jax.dtypes.prng_key)


def _leaves(tree: Any) -> list[jax.Array]:
    return jax.tree_util.tree_leaves(eqx.filter(tree, eqx.is_array))


def _abstract(leaves: list[jax.Array]) -> list[jax.ShapeDtypeStruct]:
    return [jax.ShapeDtypeStruct(np.shape(x), x.dtype) for x in leaves]


class Checkpointer:
    """Saves and restores `(model, opt_state, key, step)` in `directory`.

    **Arguments:**

    - `directory`: the checkpoint folder (created if missing).
    - `keep`: how many of the newest checkpoints to keep.
    - `fingerprint`: a small JSON-able dict naming the run (e.g. experiment name
      and task). Restoring from a folder written with a different fingerprint
      raises `CheckpointMismatchError` instead of loading foreign weights.
    """

    def __init__(self, directory: str | Path, *, keep: int = 3, fingerprint: dict | None = None):
        if keep < 1:
            raise ValueError(f"keep must be >= 1, got {keep}.")
        self.directory = Path(directory).absolute()
        self.fingerprint = dict(fingerprint or {})
        options = ocp.CheckpointManagerOptions(
            max_to_keep=keep, create=True, enable_async_checkpointing=False
        )
        self._manager = ocp.CheckpointManager(
            self.directory,
            options=options,
            item_handlers={
                "state": ocp.StandardCheckpointHandler(),
                "meta": ocp.JsonCheckpointHandler(),
            },
        )

    def latest_step(self) -> int | None:
        """The step of the newest complete checkpoint, or None."""
        return self._manager.latest_step()

    def all_steps(self) -> list[int]:
        return list(self._manager.all_steps())

    def save(self, step: int, model: Any, opt_state: Any, key: jax.Array) -> None:
        """Writes a checkpoint for `step` (replacing none: steps are unique)."""
        typed = _is_typed_key(key)
        state = {
            "model": _leaves(model),
            "opt_state": _leaves(opt_state),
            "key": jax.random.key_data(key) if typed else key,
        }
        meta = {"step": int(step), "typed_key": bool(typed), "fingerprint": self.fingerprint}
        self._manager.save(
            int(step),
            args=ocp.args.Composite(
                state=ocp.args.StandardSave(state), meta=ocp.args.JsonSave(meta)
            ),
            force=True,
        )
        self._manager.wait_until_finished()

    def metadata(self, step: int | None = None) -> dict:
        step = self.latest_step() if step is None else step
        restored = self._manager.restore(step, args=ocp.args.Composite(meta=ocp.args.JsonRestore()))
        return dict(restored["meta"])

    def restore(
        self, model_like: Any, opt_state_like: Any, step: int | None = None
    ) -> tuple[Any, Any, jax.Array, int]:
        """Loads a checkpoint into the structure of `model_like` / `opt_state_like`.

        **Returns:** `(model, opt_state, key, step)` of checkpoint `step` (the
        latest one when None).
        """
        step = self.latest_step() if step is None else step
        if step is None:
            raise FileNotFoundError(f"No checkpoint in {self.directory}.")
        meta = self.metadata(step)
        if meta.get("fingerprint", {}) != self.fingerprint:
            raise CheckpointMismatchError(
                f"{self.directory} holds checkpoints of {meta.get('fingerprint')}, "
                f"not of {self.fingerprint}; use another run directory."
            )
        model_leaves, model_def = jax.tree_util.tree_flatten(eqx.filter(model_like, eqx.is_array))
        opt_leaves, opt_def = jax.tree_util.tree_flatten(eqx.filter(opt_state_like, eqx.is_array))
        saved = self._manager.item_metadata(step)["state"]
        for name, like in (("model", model_leaves), ("opt_state", opt_leaves)):
            shapes = [tuple(m.shape) for m in saved[name]]
            if shapes != [tuple(np.shape(x)) for x in like]:
                raise CheckpointMismatchError(
                    f"The {name} in checkpoint {step} of {self.directory} has array shapes "
                    f"{shapes[:4]}... which do not match the model being trained; "
                    "use another run directory."
                )
        key_shape = tuple(saved["key"].shape)
        target = {
            "model": _abstract(model_leaves),
            "opt_state": _abstract(opt_leaves),
            "key": jax.ShapeDtypeStruct(key_shape, jnp.uint32),
        }
        restored = self._manager.restore(
            step, args=ocp.args.Composite(state=ocp.args.StandardRestore(target))
        )["state"]
        model = eqx.combine(jax.tree_util.tree_unflatten(model_def, restored["model"]), model_like)
        opt_state = eqx.combine(
            jax.tree_util.tree_unflatten(opt_def, restored["opt_state"]), opt_state_like
        )
        key = restored["key"]
        if meta.get("typed_key", True):
            key = jax.random.wrap_key_data(key)
        return model, opt_state, key, int(step)

    def close(self) -> None:
        self._manager.close()
