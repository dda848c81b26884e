"""Checkpoints of the training state with orbax-checkpoint.

A checkpoint holds the model's arrays, the optimiser state, the PRNG key and
the step, stored as plain lists of arrays plus a JSON metadata item (never
pickled objects), so it loads in any later version of the code that builds the
same model. The metadata also holds the run's config when the trainer passes
one, so a model can be rebuilt from the run directory alone: build a model of
that config (or only its shapes, with `eqx.filter_eval_shape`) and call
[`restore_model`][sciml.training.restore_model]. Writes are atomic: orbax writes
to a temporary folder and renames it.
"""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any, NamedTuple

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import orbax.checkpoint as ocp

from ..distributed import ProcessGroup


class Extra(NamedTuple):
    """Training state saved beside the model: `arrays`, a flat dict of name to
    numpy array (any shapes), and `data`, JSON data (dicts, lists, numbers,
    strings)."""

    arrays: dict[str, np.ndarray]
    data: dict[str, Any]


class CheckpointMismatchError(ValueError):
    """The checkpoint folder holds checkpoints of a different run or model."""


def _is_typed_key(key: jax.Array) -> bool:
    return jnp.issubdtype(key.dtype, jax.dtypes.prng_key)


def _leaves(tree: Any) -> list[jax.Array]:
    return jax.tree_util.tree_leaves(eqx.filter(tree, eqx.is_array))


def _abstract(leaves: list[Any]) -> list[Any]:
    """Restore targets shaped like `leaves`, placed like them (see `_target`)."""
    return [_target(np.shape(x), x.dtype, getattr(x, "sharding", None)) for x in leaves]


def _target(shape: Any, dtype: Any, sharding: Any = None) -> Any:
    """A restore target: for an array spread over several devices, its shape
    with that sharding; otherwise a numpy array, which `_to_device` makes an
    uncommitted array on the default device, as a freshly built one is.
    Without an explicit target orbax uses the sharding saved in the
    checkpoint, which fails on a machine with other devices."""
    if sharding is not None and len(sharding.device_set) > 1:
        return jax.ShapeDtypeStruct(tuple(shape), dtype, sharding=sharding)
    return np.zeros(tuple(shape), dtype)


def _to_device(tree: Any) -> Any:
    return jax.tree.map(lambda x: jnp.asarray(x) if isinstance(x, np.ndarray) else x, tree)


def _is_array_like(x: Any) -> bool:
    return eqx.is_array(x) or isinstance(x, jax.ShapeDtypeStruct)


def checkpoint_dir(path: str | Path) -> Path:
    """`path/checkpoints` when that folder exists (a run directory), else `path`."""
    path = Path(path)
    return path / "checkpoints" if (path / "checkpoints").is_dir() else path


class Checkpointer:
    """Saves and restores `(model, opt_state, key, step)` in `directory`.

    **Arguments:**

    - `directory`: the checkpoint folder (created if missing).
    - `keep`: how many of the newest checkpoints to keep.
    - `fingerprint`: a small JSON-able dict naming the run (e.g. experiment name
      and task). Restoring from a folder written with a different fingerprint
      raises `CheckpointMismatchError` instead of loading foreign weights.
    - `run_config`: the run's config as JSON data, stored in every checkpoint's
      metadata (read back with `metadata()["config"]`).
    - `remove_unfinished`: remove the temporary folders
      (`<step>.orbax-checkpoint-tmp*`) of writes that never finished (a
      process killed while writing); only for the process that writes the
      checkpoints, as a reader could remove a write in progress. Otherwise
      they are ignored: an unfinished write is never restored.
    """

    def __init__(
        self,
        directory: str | Path,
        *,
        keep: int = 3,
        fingerprint: dict | None = None,
        run_config: dict | None = None,
        remove_unfinished: bool = False,
    ):
        if keep < 1:
            raise ValueError(f"keep must be >= 1, got {keep}.")
        self.directory = Path(directory).absolute()
        self.fingerprint = dict(fingerprint or {})
        self.run_config = run_config
        options = ocp.CheckpointManagerOptions(
            max_to_keep=keep,
            create=True,
            enable_async_checkpointing=False,
            cleanup_tmp_directories=bool(remove_unfinished),
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

    def save(
        self,
        step: int,
        model: Any,
        opt_state: Any,
        key: jax.Array,
        extra: Extra | None = None,
    ) -> None:
        """Writes a checkpoint for `step` (replacing none: steps are unique).

        `extra` is more training state to keep with the model (an online
        trainer's buffer, run table and accepted-sample log): an
        [`Extra`][sciml.training.Extra] of arrays and JSON data, read back with
        [`restore_extra`][sciml.training.Checkpointer.restore_extra].
        """
        typed = _is_typed_key(key)
        state = {
            "model": _leaves(model),
            "opt_state": _leaves(opt_state),
            "key": jax.random.key_data(key) if typed else key,
        }
        meta = {"step": int(step), "typed_key": bool(typed), "fingerprint": self.fingerprint}
        if self.run_config is not None:
            meta["config"] = self.run_config
        group = ProcessGroup.current()
        if extra is not None and not group.single:
            # Each process's own state, all of it in the one checkpoint: the
            # processes exchange their packed state and every one saves the
            # same arrays (orbax writes them once).
            blobs = group.gather_bytes(pack_arrays(extra.arrays, extra.data))
            state["extra"] = {
                f"process_{i}": np.frombuffer(b, np.uint8) for i, b in enumerate(blobs)
            }
            meta["extra_processes"] = group.count
        elif extra is not None:
            arrays = {name: np.asarray(x) for name, x in extra.arrays.items()}
            # orbax refuses empty arrays: their shape and dtype go to the metadata.
            state["extra"] = {name: x for name, x in arrays.items() if x.size}
            meta["extra"] = extra.data
            meta["extra_empty"] = {
                name: [list(x.shape), x.dtype.str] for name, x in arrays.items() if not x.size
            }
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
            "key": _target(key_shape, jnp.uint32),
        }
        if "extra" in saved:  # orbax restores an item whole
            target["extra"] = _numpy_target(saved["extra"])
        restored = self._manager.restore(
            step, args=ocp.args.Composite(state=ocp.args.StandardRestore(target))
        )["state"]
        restored = {name: _to_device(item) for name, item in restored.items() if name != "extra"}
        model = eqx.combine(jax.tree_util.tree_unflatten(model_def, restored["model"]), model_like)
        opt_state = eqx.combine(
            jax.tree_util.tree_unflatten(opt_def, restored["opt_state"]), opt_state_like
        )
        key = restored["key"]
        if meta.get("typed_key", True):
            key = jax.random.wrap_key_data(key)
        return model, opt_state, key, int(step)

    def restore_extra(self, step: int | None = None) -> Extra | None:
        """The [`Extra`][sciml.training.Extra] saved with checkpoint `step` (the
        latest when None), or None if it holds none. The arrays' shapes come
        from the checkpoint, so none need be known in advance."""
        step = self.latest_step() if step is None else step
        if step is None:
            raise FileNotFoundError(f"No checkpoint in {self.directory}.")
        meta = self.metadata(step)
        group = ProcessGroup.current()
        written_by = meta.get("extra_processes", 1 if "extra" in meta else None)
        if written_by is None:
            return None
        if written_by != group.count:
            raise CheckpointMismatchError(
                f"checkpoint {step} of {self.directory} holds the training state of "
                f"{written_by} process(es) (an online study's buffers and runs, one per "
                f"trainer process), and this run has {group.count}: resume it on "
                f"{written_by} process(es)."
            )
        if "extra_processes" in meta:
            saved = self._manager.item_metadata(step)["state"]
            target = {
                name: jax.tree.map(lambda m: _target(m.shape, m.dtype), item)
                for name, item in saved.items()
            }
            restored = self._manager.restore(
                step, args=ocp.args.Composite(state=ocp.args.StandardRestore(target))
            )["state"]
            blob = np.asarray(restored["extra"][f"process_{group.index}"]).tobytes()
            return Extra(*unpack_arrays(blob))
        arrays = {
            name: np.zeros(shape, np.dtype(dtype))
            for name, (shape, dtype) in meta.get("extra_empty", {}).items()
        }
        saved = self._manager.item_metadata(step)["state"]
        if "extra" in saved:
            # The whole state is read (orbax restores an item whole), every
            # array shaped as saved.
            target = {
                name: jax.tree.map(lambda m: _target(m.shape, m.dtype), item)
                for name, item in saved.items()
                if name != "extra"
            }
            target["extra"] = _numpy_target(saved["extra"])
            restored = self._manager.restore(
                step, args=ocp.args.Composite(state=ocp.args.StandardRestore(target))
            )["state"]
            arrays.update({name: np.asarray(x) for name, x in restored["extra"].items()})
        return Extra(arrays, meta["extra"])

    def restore_model(self, model_like: Any, step: int | None = None) -> Any:
        """Loads only the model of checkpoint `step` (the latest when None).

        `model_like` gives the structure: a model of the same config, or its
        abstract version from `eqx.filter_eval_shape` (arrays as
        `jax.ShapeDtypeStruct`s, so nothing is computed to build it). The
        optimiser state and key are read into targets built from the saved
        metadata, so no optimiser is needed. The fingerprint is not checked.
        """
        step = self.latest_step() if step is None else step
        if step is None:
            raise FileNotFoundError(f"No checkpoint in {self.directory}.")
        params, static = eqx.partition(model_like, _is_array_like)
        leaves, treedef = jax.tree_util.tree_flatten(params)
        saved = self._manager.item_metadata(step)["state"]
        shapes = [tuple(m.shape) for m in saved["model"]]
        if shapes != [tuple(np.shape(x)) for x in leaves]:
            raise CheckpointMismatchError(
                f"The model in checkpoint {step} of {self.directory} has array shapes "
                f"{shapes[:4]}... which do not match model_like; build it from the run's config."
            )
        target = {
            "model": _abstract(leaves),
            "opt_state": [_target(m.shape, m.dtype) for m in saved["opt_state"]],
            "key": _target(saved["key"].shape, jnp.uint32),
        }
        if "extra" in saved:
            target["extra"] = _numpy_target(saved["extra"])
        restored = self._manager.restore(
            step, args=ocp.args.Composite(state=ocp.args.StandardRestore(target))
        )["state"]
        model = _to_device(restored["model"])
        return eqx.combine(jax.tree_util.tree_unflatten(treedef, model), static)

    def close(self) -> None:
        self._manager.close()


def _numpy_target(metadata: dict) -> dict[str, np.ndarray]:
    """Restore targets for saved extra arrays: numpy, shaped and typed as saved
    (a JAX target would turn int64 into int32 when 64-bit types are off)."""
    return {name: _target(m.shape, m.dtype) for name, m in metadata.items()}


def read_run_config(path: str | Path, step: int | None = None) -> dict | None:
    """The run config stored in the metadata of checkpoint `step` (latest when None).

    `path` is a run directory or its `checkpoints/` folder. Returns None when
    there is no checkpoint or it holds no config.
    """
    directory = checkpoint_dir(path)
    if not directory.is_dir():
        return None
    checkpointer = Checkpointer(directory)
    try:
        if checkpointer.latest_step() is None:
            return None
        return checkpointer.metadata(step).get("config")
    finally:
        checkpointer.close()


def restore_model(run_dir: str | Path, model_like: Any, *, step: int | None = None) -> Any:
    """Loads a trained model from a run directory, for inference (no optimiser needed).

    **Arguments:**

    - `run_dir`: a run directory (holding `checkpoints/`), or a checkpoint
      folder itself.
    - `model_like`: a model of the same structure, e.g. built from the run's
      config (see [`read_run_config`][sciml.training.read_run_config]), or
      `eqx.filter_eval_shape(build, ...)` of it; only its structure, shapes,
      dtypes and non-array fields are used.
    - `step`: the checkpoint to load (default: the latest).

    **Returns:** `model_like` with the checkpoint's arrays.
    """
    directory = checkpoint_dir(run_dir)
    if not directory.is_dir():
        raise FileNotFoundError(f"No checkpoint folder in {run_dir}.")
    checkpointer = Checkpointer(directory)
    try:
        return checkpointer.restore_model(model_like, step)
    finally:
        checkpointer.close()


def pack_arrays(arrays: dict[str, np.ndarray], data: Any) -> bytes:
    """`arrays` and JSON `data` as one `.npz` blob (no pickles)."""
    out = io.BytesIO()
    payload = np.frombuffer(json.dumps(data).encode(), np.uint8)
    np.savez(out, **{f"a_{k}": np.asarray(v) for k, v in arrays.items()}, data=payload)
    return out.getvalue()


def unpack_arrays(blob: bytes) -> tuple[dict[str, np.ndarray], Any]:
    """The `(arrays, data)` of a `pack_arrays` blob."""
    with np.load(io.BytesIO(blob), allow_pickle=False) as f:
        arrays = {k[2:]: f[k] for k in f.files if k.startswith("a_")}
        data = json.loads(f["data"].tobytes())
    return arrays, data
