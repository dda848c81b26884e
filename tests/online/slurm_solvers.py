"""A solver for the Slurm tests (numpy only): a job that waits to be cancelled."""

import os
import time
from pathlib import Path

from tests.online.stream_solvers import counter


def wait_for_cancel(params, *, seed, n_steps, marker_dir, after=1, size=4):
    """`counter`, but in a Slurm job the first attempt of a run with `a < 0.5`
    writes `marker_dir/job-<SLURM_JOB_ID>` after step `after` and then waits
    (for the test to cancel the job); a marker `seed-<seed>` remembers the
    attempt."""
    job_id = os.environ.get("SLURM_JOB_ID")
    marker = Path(marker_dir) / f"seed-{seed}"
    first = job_id is not None and params["a"] < 0.5 and not marker.exists()
    for k, fields in enumerate(counter(params, seed=seed, n_steps=n_steps, size=size)):
        yield fields
        if first and k == after:
            marker.touch()
            time.sleep(0.5)  # let the sent steps leave the socket first
            (Path(marker_dir) / f"job-{job_id}").touch()
            time.sleep(600)
