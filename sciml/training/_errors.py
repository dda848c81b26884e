"""What the training loop raises: the end of a stream of batches, a non-finite
loss or batch, and a resume past the run's last step."""

from __future__ import annotations

from pathlib import Path


class EndOfData(Exception):
    """Raised by a `batch_fn` when its stream has ended: no batch will come again.

    `fit` then stops before `steps`, as after the last step: it logs, evaluates
    and writes the final checkpoint. An online trainer raises it once every
    solver run has finished and its buffer is drained.
    """


class NonFiniteLossError(FloatingPointError):
    """Training produced a NaN or Inf loss or gradient."""


class ResumePastEndError(ValueError):
    """`fit` was asked for fewer `steps` than its run directory's checkpoint
    already holds: a run cannot train back, and returning the later model as
    if it had `steps` steps would mislabel it. Carries `steps`,
    `checkpoint_step` and `directory` (the checkpoint folder)."""

    def __init__(self, steps: int, checkpoint_step: int, directory: Path):
        self.steps, self.checkpoint_step, self.directory = steps, checkpoint_step, directory
        super().__init__(
            f"`steps` is {steps}, but {directory} holds a checkpoint at step "
            f"{checkpoint_step}: a run cannot train back to fewer steps. To train on, give "
            f"`steps` > {checkpoint_step}; to use the model as it is, read it with "
            "`sciml.training.restore_model`; to train anew, use another `workdir`."
        )


class NonFiniteBatchError(NonFiniteLossError, ValueError):
    """`batch_fn` returned a batch holding NaN or Inf (a `ValueError` about the
    data, and a `NonFiniteLossError` for code that guards training as a whole)."""
