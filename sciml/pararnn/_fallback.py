"""`Fallback(primary, backup)`: Newton, then a backup where Newton did not converge."""

from __future__ import annotations

from typing import Any

from ..recurrence import AbstractScanMethod
from ._newton import Newton
from ._solvers import AbstractBackup, AbstractSolver


class Fallback(AbstractSolver):
    """Newton, then `backup` where Newton stopped without converging or met a
    non-finite iterate. The stats always say whether the backup ran.

    **Arguments:** `primary` (a [`Newton`][sciml.pararnn.Newton]), `backup`
    ([`Sequential`][sciml.pararnn.Sequential], exact, or
    [`DampedNewton`][sciml.pararnn.DampedNewton], parallel but iterative).
    """

    primary: Any  # Newton; checked in __check_init__
    backup: Any  # AbstractBackup; likewise

    def __check_init__(self):
        if not isinstance(self.primary, Newton):
            raise ValueError(f"`primary` must be a Newton(...); got {self.primary!r}.")
        if not isinstance(self.backup, AbstractBackup):
            raise ValueError(
                f"`backup` must be Sequential() or DampedNewton(...); got {self.backup!r}."
            )

    def window_steps(self) -> int | None:
        return self.primary.window_steps()

    def linear_method(self) -> AbstractScanMethod:
        return self.primary.linear_method()

    def checked(self, fn, h0, xs, structure, guess):
        return self.primary.checked(fn, h0, xs, structure, guess)

    def solve_window(self, fn, h0, xs, structure, guess):
        return self.primary.solve_with_backup(fn, h0, xs, structure, guess, self.backup)
