"""Stand-in solver processes for the transport tests (and the online benchmark).

Kept apart from the test modules so that a spawned process imports only numpy,
pyzmq and `sciml.transport`, never JAX.
"""

from __future__ import annotations

import numpy as np

from sciml.transport import SolverClient


def field_value(run: int, step: int, shape: tuple[int, ...]) -> np.ndarray:
    """The field a stand-in solver sends for `(run, step)`: known to the test,
    different for every id and every entry (exact in float32 for the sizes used)."""
    ramp = np.arange(np.prod(shape), dtype=np.float32).reshape(shape)
    return ramp / 1024 + np.float32(1000 * run + step)


def params_of(run: int) -> dict[str, float]:
    return {"alpha": 0.5 + run, "beta": -float(run)}


def send_runs(
    address: str,
    secret: bytes,
    runs: list[int],
    n_steps: int,
    shape: tuple[int, ...],
    attempt: int = 0,
) -> None:
    """Runs `runs` one after the other, each open → `n_steps` × send → close."""
    for run in runs:
        with SolverClient(address, secret, run=run, attempt=attempt) as client:
            client.open(params_of(run))
            for step in range(n_steps):
                client.send(step, {"u": field_value(run, step, shape), "t": np.float64(step)})
