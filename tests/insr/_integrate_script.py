"""Integrates a small advection field with checkpoints; used by
test_integrate_resume.py in a subprocess.

usage: python _integrate_script.py CHECKPOINT_DIR N_STEPS
Steps 1-D advection by implicit midpoint in chunks of 2 steps, checkpointing
after every chunk, until SIGTERM (which it turns into a checkpoint) or the end.
"""

import sys

import jax


jax.config.update("jax_enable_x64", True)

from sciml.training import ChunkedRun  # noqa: E402


sys.path.insert(0, str(__import__("pathlib").Path(__file__).parent))
from test_integrate_resume import CHUNK, run  # noqa: E402


if __name__ == "__main__":
    run(int(sys.argv[2]), steps_per_chunk=CHUNK, monitor=ChunkedRun(sys.argv[1]))
