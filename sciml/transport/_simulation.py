"""One simulation, run where it is needed: in a solver process (the worker),
or in the trainer's process for the validation runs and the offline data.

A simulation is a function named by its dotted path,
`simulation(params, *, seed, **settings) -> iterator of {name: array}` (see
`solvers/streams.py` for the contract); `simulate` runs it and checks that it
yields exactly the study's `n_steps` time steps.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterator, Mapping
from typing import Any


def import_simulation(path: str) -> Callable:
    """The function named by a dotted path `package.module.function`."""
    module_name, _, name = path.rpartition(".")
    if not module_name:
        raise ValueError(
            f"`simulation` must be a dotted path 'package.module.function', got {path!r}."
        )
    try:
        module = importlib.import_module(module_name)
    except ImportError as error:
        raise ValueError(
            f"`simulation` {path!r} cannot be imported: {type(error).__name__}: {error}."
        ) from None
    try:
        return getattr(module, name)
    except AttributeError:
        raise ValueError(
            f"`simulation` {path!r}: module {module_name!r} has no function {name!r}."
        ) from None


def simulate(
    simulation: Callable,
    params: Mapping[str, float],
    *,
    seed: int,
    settings: Mapping[str, Any],
    n_steps: int,
) -> Iterator[dict[str, Any]]:
    """The time steps `{name: array}` of one run of `simulation`, as it yields
    them. Raises `RuntimeError` as soon as it yields a step more than
    `n_steps`, or once it ends with fewer (the trainer takes exactly
    `n_steps` steps of every run)."""
    steps = 0
    for fields in simulation(dict(params), seed=seed, **settings):
        if steps == n_steps:
            raise RuntimeError(
                f"the simulation yielded more than the study's n_steps = {n_steps} steps."
            )
        yield fields
        steps += 1
    if steps != n_steps:
        raise RuntimeError(f"the simulation yielded {steps} steps, the study expects {n_steps}.")
