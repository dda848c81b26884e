"""Test data from numpy: eager `jax.random` calls compile once per shape, which
dominates the run time of small tests."""

import numpy as np
import pytest


@pytest.fixture
def rng():
    """A seeded numpy generator; each test gets the same fresh stream."""
    return np.random.default_rng(0)
