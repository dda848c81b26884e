"""Several processes training as one: JAX's multi-process runtime, the group
of processes and its collectives, the one rule for which process writes, the
local `--processes` supervisor, and records of the OS processes a run starts.

Imports jax, numpy and the standard library only.
"""

from ._group import ProcessGroup as ProcessGroup, equal_share as equal_share
from ._records import (
    PROCESSES_FILE as PROCESSES_FILE,
    reap_all as reap_all,
    reap_processes as reap_processes,
    record_process as record_process,
    start_time as start_time,
)
from ._runtime import (
    ENV_COORDINATOR as ENV_COORDINATOR,
    ENV_PROCESS_ID as ENV_PROCESS_ID,
    ENV_PROCESSES as ENV_PROCESSES,
    PROCESS_ENV as PROCESS_ENV,
    initialize_processes as initialize_processes,
    is_main_process as is_main_process,
    quiet_stdout as quiet_stdout,
)
from ._supervisor import (
    GRACE_SECONDS as GRACE_SECONDS,
    gpu_share as gpu_share,
    run_processes as run_processes,
)
