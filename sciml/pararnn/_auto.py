"""`Auto()`: sequential or Newton evaluation, whichever was measured faster here."""

from __future__ import annotations

from typing import Any

import equinox as eqx
import jax

from .._checks import check_positive_int
from ..recurrence import (
    AbstractStructure,
)
from ._damped import DampedNewton
from ._fallback import Fallback
from ._newton import Newton
from ._sequential import Sequential
from ._solvers import (
    AbstractSolver,
)
from ._structure import check_structure_type


# Where Newton is faster than sequential evaluation, per backend and structure
# kind: `(min_length, max_length, max_batch_state)`: Newton when
# `min_length <= length <= max_length` and `batch_size * state_size <=
# max_batch_state` (`None`: no bound); a kind missing from a backend's table
# always runs sequentially.
# CPU: measured with `benchmarks/pararnn.py` on a 2-core CPU, forward+backward
# (training) time, see docs/benchmarks.md. Newton's forward pass lost everywhere;
# its cheaper backward pass (one reverse linear recurrence instead of a reverse
# scan through every step) made training faster only for a single sequence
# (batch 1) of ParaGRU with hidden size 8, 1k-16k steps, in two runs (1.2-2.4x).
# ParaLSTM at hidden 8 was faster in one run and slower in the other, so block
# structures stay sequential.
# GPU/TPU: not measured in this repository; the published parallel-Newton
# speed-ups (ParaRNN, DEER) start at a few hundred steps.
CROSSOVERS: dict[str, dict[str, tuple[int, int | None, int | None]]] = {
    "cpu": {"diagonal": (1024, 16384, 8)},
    "gpu": {"diagonal": (512, None, None), "block": (512, None, None), "dense": (512, None, 32)},
    "tpu": {"diagonal": (512, None, None), "block": (512, None, None), "dense": (512, None, 32)},
}


def _freeze(table) -> tuple:
    return tuple((backend, tuple(sorted(kinds.items()))) for backend, kinds in table.items())


class Auto(AbstractSolver):
    """Sequential or Newton evaluation, whichever was measured faster here.

    Looks up `crossovers[backend][structure kind]` (default: the measured
    `CROSSOVERS` table; default backend: JAX's): `newton` when the length is in
    the measured range and `batch_size * state_size` within the measured bound,
    [`Sequential()`][sciml.pararnn.Sequential] otherwise.

    **Arguments:** `newton` (the Newton solver used, default
    `Fallback(Newton(), Sequential())`), `batch_size` (the batch the layer is
    vmapped over: a one-sample layer cannot know it), `crossovers` (a table in
    the layout of `CROSSOVERS`), `backend`.
    """

    newton: Any = Fallback(Newton(), Sequential())  # checked in __check_init__
    batch_size: int = eqx.field(static=True, default=1)
    crossovers: Any = eqx.field(static=True, default=None, converter=lambda t: t and _freeze(t))
    backend: str | None = eqx.field(static=True, default=None)

    def __check_init__(self):
        check_positive_int("batch_size", self.batch_size)
        if not isinstance(self.newton, (Newton, Fallback, DampedNewton)):
            raise ValueError(
                f"`newton` must be Newton(...), Fallback(...) or DampedNewton(...); got {self.newton!r}."
            )

    def uses_newton(self, length: int, state_size: int, structure: AbstractStructure) -> bool:
        """Whether a call on `length` steps of a state of `state_size` runs `newton`.

        **Raises:** `ValueError` unless `length` and `state_size` are positive
        ints and `structure` is a structure module (`Diagonal()`, `Block(k)`,
        `Dense()`).
        """
        check_positive_int("length", length)
        check_positive_int("state_size", state_size)
        check_structure_type(structure)
        table = CROSSOVERS if self.crossovers is None else {b: dict(k) for b, k in self.crossovers}
        entry = table.get(self.backend or jax.default_backend(), {}).get(structure.kind)
        if entry is None:
            return False
        min_length, max_length, max_batch_state = entry
        if length < min_length or (max_length is not None and length > max_length):
            return False
        return max_batch_state is None or self.batch_size * state_size <= max_batch_state

    def select(self, length: int, state_size: int, structure: AbstractStructure) -> AbstractSolver:
        """The solver a call on `length` steps runs (arguments checked as in
        `uses_newton`)."""
        if self.uses_newton(length, state_size, structure):
            return self.newton
        return Sequential()

    def solve_window(self, fn, h0, xs, structure, guess):
        """The window solve of the solver `select` chooses for this window."""
        length = jax.tree_util.tree_leaves(xs)[0].shape[0]
        solver = self.select(length, h0.shape[0], structure)
        return solver.solve_window(fn, h0, xs, structure, guess)
