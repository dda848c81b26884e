"""Training on several processes: JAX's multi-process runtime (`jax.distributed`).

One trainer may run as N processes (on one machine, or one per node of a
cluster), each driving its own devices; together they hold one mesh over
every device, the model replicated and each global batch split by rows
(data parallel: one all-reduce of the gradient per step, inserted by XLA).
[`initialize_processes`][sciml.training.initialize_processes] joins the
runtime; [`ProcessGroup`][sciml.training.ProcessGroup] is what the training
loop needs of it: the mesh, moving arrays between a process's own copy and
the global array, and the few host-side exchanges (a flag, JSON data, bytes)
that keep the processes in step.

Every method marked *collective* must be called by every process, in the
same order; a process that dies makes the others' next collective raise.
"""

from __future__ import annotations

import dataclasses
import functools
import io
import json
import os
from collections.abc import Callable
from typing import Any

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jax.experimental import multihost_utils
from jax.sharding import Mesh, NamedSharding, PartitionSpec

from .._checks import check_positive_int, is_int


ENV_PROCESSES = "SCIML_PROCESSES"  # the number of processes (set by `--processes N`)
ENV_PROCESS_ID = "SCIML_PROCESS_ID"  # this process's index
ENV_COORDINATOR = "JAX_COORDINATOR_ADDRESS"  # JAX's own: "host:port" of process 0

# At exit each process waits for the others (JAX's shutdown barrier); process 0
# may work on alone for long after training (evaluation, plots), so the wait
# is long. A dead process is still noticed in JAX's heartbeat time (100 s).
_SHUTDOWN_SECONDS = 24 * 3600


def _env_int(name: str) -> int:
    value = os.environ[name]
    try:
        return int(value)
    except ValueError:
        raise ValueError(
            f"the environment variable {name} must be an integer, got {value!r}."
        ) from None


def initialize_processes(
    coordinator_address: str | None = None,
    num_processes: int | None = None,
    process_id: int | None = None,
) -> int:
    """Joins JAX's multi-process runtime when asked to; call it before any JAX
    computation.

    Asked by, in this order: the arguments (all three); the environment that
    `python -m experiments.run --processes N` gives each process
    (`SCIML_PROCESSES`, `SCIML_PROCESS_ID` and JAX's `JAX_COORDINATOR_ADDRESS`);
    an `srun` job step of more than one task (`SLURM_STEP_NUM_TASKS` > 1; JAX
    reads the coordinator, the process count and index from Slurm). Otherwise,
    or for one process, it does nothing. Calling it again does nothing.

    **Returns:** the number of processes.
    """
    if jax.distributed.is_initialized():
        return jax.process_count()
    given = (coordinator_address, num_processes, process_id)
    if any(x is not None for x in given) and any(x is None for x in given):
        raise ValueError(
            "give all of `coordinator_address`, `num_processes` and `process_id`, or none "
            f"(to read them from the environment); got {given}."
        )
    if num_processes is None and ENV_PROCESSES in os.environ:
        num_processes = _env_int(ENV_PROCESSES)
        process_id = _env_int(ENV_PROCESS_ID) if ENV_PROCESS_ID in os.environ else None
        coordinator_address = os.environ.get(ENV_COORDINATOR)
        missing = [
            name
            for name, value in (
                (ENV_PROCESS_ID, process_id),
                (ENV_COORDINATOR, coordinator_address),
            )
            if value is None
        ]
        if missing and num_processes > 1:
            raise ValueError(
                f"{ENV_PROCESSES}={num_processes} is set, but {' and '.join(missing)} "
                "is not: each process needs its index and the coordinator's host:port."
            )
    if num_processes is not None:
        if num_processes < 1 or not 0 <= process_id < num_processes:
            raise ValueError(
                f"the process index must be in [0, {num_processes}) for {num_processes} "
                f"processes, got {process_id}."
            )
        if num_processes > 1:
            jax.distributed.initialize(
                coordinator_address,
                num_processes,
                process_id,
                shutdown_timeout_seconds=_SHUTDOWN_SECONDS,
            )
        return jax.process_count()
    if int(os.environ.get("SLURM_STEP_NUM_TASKS", "1")) > 1:
        jax.distributed.initialize(
            cluster_detection_method="slurm", shutdown_timeout_seconds=_SHUTDOWN_SECONDS
        )
    return jax.process_count()


@functools.cache
def _mesh(devices: tuple) -> Mesh:
    return Mesh(np.array(devices), ("data",))


def _is_key(x: Any) -> bool:
    return jnp.issubdtype(x.dtype, jax.dtypes.prng_key)


@dataclasses.dataclass(frozen=True)
class ProcessGroup:
    """The processes that train together: `count` of them, this one `index`.

    With one process (`single`) every method is the identity or trivial, so
    a loop written for a group costs nothing when it runs alone. Process 0 is
    the `main` one: it writes files, shows progress and evaluates.
    """

    count: int
    index: int

    def __post_init__(self):
        check_positive_int("count", self.count)
        if not is_int(self.index) or not 0 <= self.index < self.count:
            raise ValueError(
                f"`index` must be an integer in [0, {self.count}) for a group of "
                f"{self.count} process(es), got {self.index!r}."
            )

    def _check_runtime(self) -> None:
        """A collective needs every process of the JAX runtime: a hand-made
        group of another size would wait for processes that do not exist."""
        if self.count != jax.process_count():
            raise ValueError(
                f"ProcessGroup(count={self.count}, index={self.index}) does not match "
                f"JAX's runtime of {jax.process_count()} process(es): use "
                "`ProcessGroup.current()` (after `initialize_processes`) for collectives."
            )

    @classmethod
    def current(cls) -> ProcessGroup:
        """The group of this JAX runtime (one process unless
        [`initialize_processes`][sciml.training.initialize_processes] joined several)."""
        return cls(jax.process_count(), jax.process_index())

    @property
    def single(self) -> bool:
        return self.count == 1

    @property
    def main(self) -> bool:
        return self.index == 0

    @property
    def mesh(self) -> Mesh:
        """One axis, `"data"`, over every process's devices (process 0's first)."""
        return _mesh(tuple(jax.devices()))

    def replicate(self, tree: Any) -> Any:
        """Each array of `tree` (the same on every process) as one global array,
        replicated on every device."""
        if self.single:
            return tree
        self._check_runtime()
        sharding = NamedSharding(self.mesh, PartitionSpec())

        def put(x):
            if _is_key(x):
                return jax.random.wrap_key_data(put(jax.random.key_data(x)))
            return jax.make_array_from_process_local_data(sharding, np.asarray(x), np.shape(x))

        return jax.tree.map(lambda x: put(x) if eqx.is_array(x) else x, tree)

    def local(self, tree: Any) -> Any:
        """Each replicated global array of `tree` as this process's own copy
        (on its first device): for work that needs no other process."""
        if self.single:
            return tree

        def own(x):
            if isinstance(x, jax.Array) and not x.is_fully_addressable:
                return x.addressable_data(0)
            return x

        return jax.tree.map(own, tree)

    def global_batch(self, batch: Any) -> Any:
        """This process's rows of a batch as global arrays split over the mesh's
        `"data"` axis by rows (process `i`'s rows are block `i`)."""
        if self.single:
            return batch
        self._check_runtime()
        sharding = NamedSharding(self.mesh, PartitionSpec("data"))
        devices = self.mesh.devices.size

        def put(x):
            x = np.asarray(x)
            rows = x.shape[0] * self.count
            if rows % devices:
                raise ValueError(
                    f"a global batch of {rows} rows ({x.shape[0]} on each of {self.count} "
                    f"processes) cannot be split over {devices} devices; use a batch size "
                    f"that is a multiple of {devices}."
                )
            return jax.make_array_from_process_local_data(sharding, x, (rows, *x.shape[1:]))

        return jax.tree.map(put, batch)

    def rows(self, batch: Any) -> Any:
        """This process's rows (block `index` of `count` along the leading axis)
        of a batch that every process holds whole."""
        if self.single:
            return batch

        def take(x):
            n = np.shape(x)[0]
            if n % self.count:
                raise ValueError(
                    f"a batch of {n} rows cannot be split over {self.count} processes; "
                    f"use a batch size that is a multiple of {self.count}."
                )
            size = n // self.count
            return x[self.index * size : (self.index + 1) * size]

        return jax.tree.map(take, batch)

    def any(self, *flags: bool) -> tuple[bool, ...]:
        """Each flag OR-ed over the processes (*collective*)."""
        if self.single:
            return tuple(bool(f) for f in flags)
        self._check_runtime()
        gathered = multihost_utils.process_allgather(np.array(flags, np.int32))
        return tuple(bool(f) for f in np.asarray(gathered).reshape(self.count, -1).any(axis=0))

    def gather_bytes(self, data: bytes) -> list[bytes]:
        """`data` of every process, in process order (*collective*)."""
        if self.single:
            return [data]
        self._check_runtime()
        sizes = np.asarray(multihost_utils.process_allgather(np.array([len(data)], np.int64)))
        sizes = sizes.reshape(self.count)
        padded = np.zeros(int(sizes.max()) or 1, np.uint8)
        padded[: len(data)] = np.frombuffer(data, np.uint8)
        rows = np.asarray(multihost_utils.process_allgather(padded)).reshape(self.count, -1)
        return [rows[i, : sizes[i]].tobytes() for i in range(self.count)]

    def gather(self, value: Any) -> list[Any]:
        """`value` (JSON data) of every process, in process order (*collective*)."""
        if self.single:
            return [value]
        return [json.loads(b) for b in self.gather_bytes(json.dumps(value).encode())]

    def broadcast(self, value: Any) -> Any:
        """Process 0's `value` (JSON data) on every process (*collective*; the
        others' `value` is ignored)."""
        return value if self.single else self.gather(value if self.main else None)[0]

    def on_main(self, make: Callable[[], Any], read: Callable[[], Any]) -> Any:
        """`make()` on process 0 and, once it is done, `read()` on the others:
        for what process 0 writes to a file and every process needs
        (*collective*; with one process, `make()`). An error of `make()` is
        raised on process 0 and a `RuntimeError` saying so on the others, which
        never wait for a file that will not come."""
        if self.single:
            return make()
        result = error = None
        if self.main:
            try:
                result = make()
            except Exception as e:
                error = e
        (failed,) = self.any(error is not None)
        if error is not None:
            raise error
        if failed:
            raise RuntimeError(
                "process 0 failed to make what every process reads; its error says why."
            )
        return result if self.main else read()

    def barrier(self, name: str = "sciml") -> None:
        """Waits until every process is here (*collective*)."""
        if not self.single:
            self._check_runtime()
            multihost_utils.sync_global_devices(name)


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
