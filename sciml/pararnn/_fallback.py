"""`Fallback(primary, backup)`: Newton, then a backup where Newton did not converge."""

from __future__ import annotations

from typing import Any

from ..recurrence import AbstractScanMethod
from ..solution import RESULTS
from ._newton import Newton
from ._solvers import AbstractBackup, AbstractSolver, window_result


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
        """Newton's iterations; where they did not converge the backup runs
        from the last finite iterate, with Newton's tolerance, and its states
        decide the result."""
        newton = self.primary
        tolerance = newton.tolerance(h0.dtype)
        guess = newton.start(fn, h0, xs, guess)
        iterations, hs, res, result = newton.iterate(fn, h0, xs, structure, guess, tolerance)
        done = result == RESULTS.successful
        hs, res, backup_iterations = self.backup.recover(
            fn, h0, xs, structure, hs, res, done, tolerance
        )
        return window_result(
            hs,
            res,
            tolerance,
            result == RESULTS.recurrence_nonfinite,
            iterations=iterations,
            newton_converged=done,
            fallback=~done,
            fallback_iterations=backup_iterations,
        )
