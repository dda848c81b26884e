"""What every trainer shares: the jitted step, optimisers, checkpoints, metrics."""

from .._deprecated import removed_names as _removed_names

# moved to sciml.distributed, importable here until the release named in sciml._deprecated
from ..distributed import (
    ProcessGroup as ProcessGroup,
    initialize_processes as initialize_processes,
)
from ._checkpoint import (
    Checkpointer as Checkpointer,
    CheckpointMismatchError as CheckpointMismatchError,
    Extra as Extra,
    read_run_config as read_run_config,
    restore_model as restore_model,
)
from ._chunked import ChunkedRun as ChunkedRun
from ._errors import (
    EndOfData as EndOfData,
    NonFiniteBatchError as NonFiniteBatchError,
    NonFiniteLossError as NonFiniteLossError,
    ResumePastEndError as ResumePastEndError,
)
from ._fit import ExtraState as ExtraState, FitResult as FitResult, fit as fit
from ._host_memory import reuse_host_memory as reuse_host_memory
from ._memory import peak_memory_bytes as peak_memory_bytes
from ._metrics import MetricsWriter as MetricsWriter, read_metrics as read_metrics
from ._optim import make_optimizer as make_optimizer, make_schedule as make_schedule
from ._progress import LineProgress as LineProgress, progress_bar as progress_bar
from ._settings import OptimizerSettings as OptimizerSettings, TrainSettings as TrainSettings
from ._step import (
    init_opt_state as init_opt_state,
    make_train_step as make_train_step,
    trainable as trainable,
)


__getattr__ = _removed_names(__name__)
