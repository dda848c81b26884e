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
- the transport, re-exported from `sciml.transport` (the process boundary,
  which solver processes import without JAX):
  authenticated messages ([`Schema`][sciml.transport.Schema]),
  [`SolverClient`][sciml.transport.SolverClient] on the solver side and
  [`SampleReceiver`][sciml.transport.SampleReceiver] on the trainer's;
- launchers: [`LocalLauncher`][sciml.online.LocalLauncher] and
  [`SlurmLauncher`][sciml.online.SlurmLauncher];
- buffers: [`FIFO`][sciml.online.FIFO], [`FIRO`][sciml.online.FIRO],
  [`Reservoir`][sciml.online.Reservoir];
- the trainer: [`train_online`][sciml.online.train_online] (on
  [`SampleStream`][sciml.online.SampleStream]).
"""

from ..transport import (
    CloseStatus as CloseStatus,
    FieldSpec as FieldSpec,
    JobEnd as JobEnd,
    Message as Message,
    RejectedMessage as RejectedMessage,
    RunSpec as RunSpec,
    RunState as RunState,
    SampleReceiver as SampleReceiver,
    Schema as Schema,
    SolverClient as SolverClient,
    SolverJob as SolverJob,
)
from ._buffers import (
    COUNTER_NAMES as COUNTER_NAMES,
    FIFO as FIFO,
    FIRO as FIRO,
    AbstractBuffer as AbstractBuffer,
    BufferState as BufferState,
)
from ._launch import AbstractLauncher as AbstractLauncher, LocalLauncher as LocalLauncher
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
