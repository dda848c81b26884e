"""Joining JAX's multi-process runtime, and the one rule for which process writes.

A run on several processes is started by the `--processes N` supervisor (see
[`run_processes`][sciml.distributed.run_processes]), by `srun` on a cluster,
or by hand; each process learns its place from the environment names below
and joins the runtime with
[`initialize_processes`][sciml.distributed.initialize_processes] before any
JAX computation.

Which process writes a run's files (metrics, checkpoints' side files, plots,
the summary, data sets made once) is decided here only:
[`is_main_process`][sciml.distributed.is_main_process]. It is process 0, as
in orbax's `primary_host` and flax's `just_logging=jax.process_index() != 0`.
"""

from __future__ import annotations

import contextlib
import os
import sys

import jax


#: The number of processes of a run (set by `--processes N` for each child).
ENV_PROCESSES = "SCIML_PROCESSES"
#: This process's index, in [0, number of processes).
ENV_PROCESS_ID = "SCIML_PROCESS_ID"
#: JAX's own name: the `host:port` of process 0's coordinator.
ENV_COORDINATOR = "JAX_COORDINATOR_ADDRESS"
#: The three names above: what a process of a run is told, and what a solver
#: process it starts must not inherit.
PROCESS_ENV = (ENV_PROCESSES, ENV_PROCESS_ID, ENV_COORDINATOR)

# At exit each process waits for the others (JAX's shutdown barrier); process 0
# may work on alone for long after training (evaluation, plots), so the wait
# is long. A dead process is still noticed in JAX's heartbeat time (100 s).
_SHUTDOWN_SECONDS = 24 * 3600


def is_main_process(index: int | None = None) -> bool:
    """Whether process `index` (this one when None) is the one that writes a
    run's files, shows progress and evaluates: process 0 of several, or the
    only one. Every such decision in the package asks this function."""
    return (jax.process_index() if index is None else index) == 0


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


@contextlib.contextmanager
def quiet_stdout():
    """Sends what is written to file descriptor 1 to /dev/null: the first
    collective of a process connects JAX's CPU collectives (gloo), which
    announce it on stdout, where only what the main process prints belongs."""
    sys.stdout.flush()
    saved, devnull = os.dup(1), os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 1)
    try:
        yield
    finally:
        os.dup2(saved, 1)
        os.close(saved)
        os.close(devnull)
