"""The process boundary of an online study: what a solver process imports.

A solver process (the worker, `python -m sciml.transport.worker JOB.json`)
imports this package and nothing of JAX: numpy, pyzmq and the standard library
only. It holds both ends of the wire and what travels between the processes:

- the message format: [`Schema`][sciml.transport.Schema],
  [`FieldSpec`][sciml.transport.FieldSpec], [`Message`][sciml.transport.Message],
  [`RejectedMessage`][sciml.transport.RejectedMessage];
- the statuses: [`RunState`][sciml.transport.RunState],
  [`CloseStatus`][sciml.transport.CloseStatus], [`JobEnd`][sciml.transport.JobEnd];
- the job description: [`SolverJob`][sciml.transport.SolverJob],
  [`RunSpec`][sciml.transport.RunSpec];
- the study's secret: `new_secret`, `SECRET_ENV`, `secret_to_env` /
  `secret_from_env`, `write_secret` / `read_secret`;
- the solvers' [`SolverClient`][sciml.transport.SolverClient] and the trainer's
  [`SampleReceiver`][sciml.transport.SampleReceiver];
- one simulation run and its step count checked:
  [`simulate`][sciml.transport.simulate], `import_simulation`.

The trainer's side of a study (buffers, launchers, the training loop) is
`sciml.online`.
"""

from ._client import SolverClient as SolverClient
from ._job import (
    PARENT_ENV as PARENT_ENV,
    WORKER_MODULE as WORKER_MODULE,
    RunSpec as RunSpec,
    SolverJob as SolverJob,
)
from ._receiver import SampleReceiver as SampleReceiver
from ._secret import (
    SECRET_ENV as SECRET_ENV,
    check_secret as check_secret,
    new_secret as new_secret,
    read_secret as read_secret,
    secret_from_env as secret_from_env,
    secret_to_env as secret_to_env,
    write_secret as write_secret,
)
from ._simulation import import_simulation as import_simulation, simulate as simulate
from ._sockets import connect_address as connect_address
from ._status import CloseStatus as CloseStatus, JobEnd as JobEnd, RunState as RunState
from ._wire import (
    REJECT_REASONS as REJECT_REASONS,
    FieldSpec as FieldSpec,
    Message as Message,
    RejectedMessage as RejectedMessage,
    Schema as Schema,
)
