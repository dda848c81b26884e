"""What every trainer shares: the jitted step, optimisers, checkpoints, metrics."""

from ._checkpoint import (
    Checkpointer as Checkpointer,
    CheckpointMismatchError as CheckpointMismatchError,
)
from ._fit import FitResult as FitResult, NonFiniteLossError as NonFiniteLossError, fit as fit
from ._memory import peak_memory_bytes as peak_memory_bytes
from ._metrics import MetricsWriter as MetricsWriter, read_metrics as read_metrics
from ._optim import make_optimizer as make_optimizer, make_schedule as make_schedule
from ._step import (
    init_opt_state as init_opt_state,
    make_train_step as make_train_step,
    trainable as trainable,
)
