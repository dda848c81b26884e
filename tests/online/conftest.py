"""The Slurm test cluster, shared by the modules that submit real jobs."""

import pytest

from .slurm_cluster import SlurmCluster, Unavailable


@pytest.fixture(scope="module")
def cluster():
    """A single-node Slurm cluster for one module's tests, stopped at its end
    (the module's tests are skipped, naming why, where none can be started)."""
    try:
        with SlurmCluster() as started:
            yield started
    except Unavailable as reason:
        pytest.skip(f"no Slurm test cluster: {reason}")
