"""Online surrogate training: solvers run beside the trainer and stream samples.

Instead of writing a data set to disk and training on it for many epochs, a
study runs many solver instances (one per sampled parameter set) at the same
time as the trainer; each sends its time steps over ZeroMQ to the trainer,
which keeps them in a bounded training buffer and draws batches from it
(Meyer et al., "Training Deep Surrogate Models with Large Scale Online
Learning", ICML 2023). The model sees many more distinct simulations than
storage would hold.

- the study: [`Study`][sciml.online.Study], [`ParameterSpace`][sciml.online.ParameterSpace]
  and the samplers ([`MonteCarlo`][sciml.online.MonteCarlo],
  [`LatinHypercube`][sciml.online.LatinHypercube], [`Halton`][sciml.online.Halton],
  [`Sobol`][sciml.online.Sobol]);
- the transport: authenticated messages ([`Schema`][sciml.online.Schema]),
  [`SolverClient`][sciml.online.SolverClient] on the solver side and
  [`SampleReceiver`][sciml.online.SampleReceiver] on the trainer's;
- launchers: [`LocalLauncher`][sciml.online.LocalLauncher] and
  [`SlurmLauncher`][sciml.online.SlurmLauncher];
- buffers: [`FIFO`][sciml.online.FIFO], [`FIRO`][sciml.online.FIRO],
  [`Reservoir`][sciml.online.Reservoir];
- the trainer: [`train_online`][sciml.online.train_online] (on
  [`SampleStream`][sciml.online.SampleStream]).
"""

import importlib
from typing import TYPE_CHECKING


# Names are imported on first use: a solver process imports the client side
# (`SolverClient`, the worker) without JAX, which only the trainer needs.
_EXPORTS = {
    "AbstractBuffer": "._buffers",
    "BufferState": "._buffers",
    "COUNTER_NAMES": "._buffers",
    "FIFO": "._buffers",
    "FIRO": "._buffers",
    "AbstractLauncher": "._launch",
    "LocalLauncher": "._launch",
    "RunSpec": "._launch",
    "SolverJob": "._launch",
    "Reservoir": "._reservoir",
    "RunTable": "._runs",
    "run_seed": "._runs",
    "AbstractSampler": "._sampler",
    "Halton": "._sampler",
    "LatinHypercube": "._sampler",
    "MonteCarlo": "._sampler",
    "ParameterSpace": "._sampler",
    "Sobol": "._sampler",
    "SlurmLauncher": "._slurm",
    "CloseStatus": "._status",
    "JobEnd": "._status",
    "RunState": "._status",
    "SampleStream": "._stream",
    "Study": "._study",
    "offline_data": "._study",
    "validation_data": "._study",
    "validation_runs": "._study",
    "OnlineResult": "._trainer",
    "data_sharding": "._trainer",
    "train_online": "._trainer",
    "SampleReceiver": "._transport",
    "SolverClient": "._transport",
    "FieldSpec": "._wire",
    "Message": "._wire",
    "RejectedMessage": "._wire",
    "Schema": "._wire",
}
__all__ = sorted(_EXPORTS)


def __getattr__(name: str):
    if name not in _EXPORTS:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(_EXPORTS[name], __name__), name)
    globals()[name] = value  # once
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_EXPORTS))


if TYPE_CHECKING:  # the same names, for type checkers and the API docs
    from ._buffers import (
        COUNTER_NAMES as COUNTER_NAMES,
        FIFO as FIFO,
        FIRO as FIRO,
        AbstractBuffer as AbstractBuffer,
        BufferState as BufferState,
    )
    from ._launch import (
        AbstractLauncher as AbstractLauncher,
        LocalLauncher as LocalLauncher,
        RunSpec as RunSpec,
        SolverJob as SolverJob,
    )
    from ._reservoir import Reservoir as Reservoir
    from ._runs import RunTable as RunTable, run_seed as run_seed
    from ._sampler import (
        AbstractSampler as AbstractSampler,
        Halton as Halton,
        LatinHypercube as LatinHypercube,
        MonteCarlo as MonteCarlo,
        ParameterSpace as ParameterSpace,
        Sobol as Sobol,
    )
    from ._slurm import SlurmLauncher as SlurmLauncher
    from ._status import CloseStatus as CloseStatus, JobEnd as JobEnd, RunState as RunState
    from ._stream import SampleStream as SampleStream
    from ._study import (
        Study as Study,
        offline_data as offline_data,
        validation_data as validation_data,
        validation_runs as validation_runs,
    )
    from ._trainer import (
        OnlineResult as OnlineResult,
        data_sharding as data_sharding,
        train_online as train_online,
    )
    from ._transport import SampleReceiver as SampleReceiver, SolverClient as SolverClient
    from ._wire import (
        FieldSpec as FieldSpec,
        Message as Message,
        RejectedMessage as RejectedMessage,
        Schema as Schema,
    )
