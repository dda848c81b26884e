"""The processes that train together, and what they exchange.

One trainer may run as N processes (on one machine, or one per node of a
cluster), each driving its own devices; together they hold one mesh over
every device, the model replicated and each global batch split by rows
(data parallel: one all-reduce of the gradient per step, inserted by XLA).
[`ProcessGroup`][sciml.distributed.ProcessGroup] is what a training loop
needs of the runtime: the mesh, moving arrays between a process's own copy
and the global array, and the few host-side exchanges (a flag, JSON data,
bytes) that keep the processes in step.

Every method marked *collective* must be called by every process, in the
same order; a process that dies makes the others' next collective raise.
"""

from __future__ import annotations

import dataclasses
import functools
import json
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax.experimental import multihost_utils
from jax.sharding import Mesh, NamedSharding, PartitionSpec

from ._runtime import is_main_process


def equal_share(total: int, parts: int, what: str, *, among: str = "processes") -> int:
    """The size of each of `parts` equal shares of `total` (a batch split over
    processes or devices): the one check that it splits evenly.

    **Raises:** `ValueError` naming `what`, the number of `among` and the fix.
    """
    if total % parts:
        raise ValueError(
            f"{what} ({total}) must be a multiple of the number of {among} ({parts}): each "
            f"takes an equal share; use a multiple of {parts}."
        )
    return total // parts


@functools.cache
def _mesh(devices: tuple) -> Mesh:
    return Mesh(np.array(devices), ("data",))


def _is_int(x: Any) -> bool:
    return isinstance(x, int | np.integer) and not isinstance(x, bool)


def _is_array(x: Any) -> bool:
    return isinstance(x, jax.Array | np.ndarray | np.generic)


def _is_key(x: Any) -> bool:
    return jnp.issubdtype(x.dtype, jax.dtypes.prng_key)


@dataclasses.dataclass(frozen=True)
class ProcessGroup:
    """The processes that train together: `count` of them, this one `index`.

    With one process (`single`) every method is the identity or trivial, so
    a loop written for a group costs nothing when it runs alone. Process 0 is
    the `main` one (see [`is_main_process`][sciml.distributed.is_main_process]):
    it writes files, shows progress and evaluates.
    """

    count: int
    index: int

    def __post_init__(self):
        if not _is_int(self.count) or self.count < 1:
            raise ValueError(f"`count` must be a positive integer, got {self.count!r}.")
        if not _is_int(self.index) or not 0 <= self.index < self.count:
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
        [`initialize_processes`][sciml.distributed.initialize_processes] joined several)."""
        return cls(jax.process_count(), jax.process_index())

    @property
    def single(self) -> bool:
        return self.count == 1

    @property
    def main(self) -> bool:
        return is_main_process(self.index)

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

        return jax.tree.map(lambda x: put(x) if _is_array(x) else x, tree)

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
            what = f"a global batch of {rows} rows ({x.shape[0]} on each process)"
            equal_share(rows, devices, what, among="devices")
            return jax.make_array_from_process_local_data(sharding, x, (rows, *x.shape[1:]))

        return jax.tree.map(put, batch)

    def rows(self, batch: Any) -> Any:
        """This process's rows (block `index` of `count` along the leading axis)
        of a batch that every process holds whole."""
        if self.single:
            return batch

        def take(x):
            size = equal_share(np.shape(x)[0], self.count, "a batch's rows")
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
