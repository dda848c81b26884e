"""The run table: every run of a study, its parameters, seed, state and attempts.

Semantics (the same for every launcher):

- A sample's id is `(run, step)`. A run is **done** once the trainer has
  accepted all `n_steps` of its ids, whichever attempts sent them; its exit
  status does not matter then.
- A run whose job ended (crashed, was killed, hung past the timeout) before
  that is **pending** again and resubmitted with the same parameters and seed;
  the steps it re-sends that were accepted before are dropped as duplicates.
- After `max_attempts` attempts it is **failed** (logged with its parameters),
  and a new run with freshly drawn parameters takes its place, so the study
  still trains on `n_runs` complete runs.
- An attempt that sent a non-finite sample is **retired**: its messages are
  refused from then on (it is no longer a known attempt) and the run ends as
  if its job had crashed: pending again, or failed and redrawn. A diverging
  solver therefore costs `max_attempts` attempts, never the study. Such a run
  is **diverged** (whether a later attempt finished it or not), and listed
  with its parameters and its first non-finite step.

The table is plain JSON data, so it is checkpointed with the model; runs that
were running when the checkpoint was written are pending after a restore.

With several trainer processes, each process keeps a table of its own share
of the study: process `r` of `P` holds the global runs `r, r + P, r + 2P, …`
below `n_runs`, its local run `i` being global run `i·P + r` (the parameters of
row `i·P + r` of the sampler's draw, the seed `run_seed(seed, i·P + r)`); a
redrawn run takes the next local index, so redraws of different processes
never share a global id either. Local ids go on the wire and into the
checkpoint; reports (failed and diverged runs, events) name global ids. With
one process the two are the same.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..transport import RunSpec, RunState
from ._sampler import AbstractSampler, ParameterSpace


PENDING, RUNNING, DONE, FAILED = RunState.PENDING, RunState.RUNNING, RunState.DONE, RunState.FAILED


def run_seed(seed: int, run: int) -> int:
    """The solver seed of run `run` of a study seeded `seed` (a 31-bit int)."""
    return int(np.random.SeedSequence([int(seed), int(run)]).generate_state(1)[0] >> 1)


class RunTable:
    """Bookkeeping of a study's runs (see the module docstring).

    **Arguments:** the parameter `space` and `sampler`; `n_runs` planned runs
    (of the whole study); `n_steps` time steps per run; `seed` (solver seeds
    derive from it); `max_attempts` per run before its parameters are
    redrawn; `process` of `processes`: the share of the study this table holds (see
    the module docstring; default the whole study).
    """

    def __init__(
        self,
        space: ParameterSpace,
        sampler: AbstractSampler,
        *,
        n_runs: int,
        n_steps: int,
        seed: int,
        max_attempts: int,
        process: int = 0,
        processes: int = 1,
    ):
        self.space, self.sampler = space, sampler
        self.n_runs, self.n_steps, self.seed = int(n_runs), int(n_steps), int(seed)
        self.max_attempts = int(max_attempts)
        self.process, self.processes = int(process), int(processes)
        if not 0 <= self.process < self.processes:
            raise ValueError(f"`process` must be in [0, {self.processes}), got {process}.")
        if self.processes > 1 and self.n_runs < self.processes:
            raise ValueError(
                f"`n_runs` ({self.n_runs}) must be at least the number of trainer processes "
                f"({self.processes}): each process needs runs of its own."
            )
        n = len(range(self.process, self.n_runs, self.processes))  # this process's runs
        self.n_local = n
        self.params = self._draw(n)
        self.status = [PENDING] * n
        self.attempts = [0] * n
        self.received = [0] * n
        self.replaced_by: dict[int, int] = {}
        self.retired: set[tuple[int, int]] = set()
        self.non_finite_step: dict[int, int] = {}  # of diverged runs: the first

    # -- queries ---------------------------------------------------------------

    def __len__(self) -> int:
        return len(self.status)

    def count(self, status: RunState) -> int:
        return self.status.count(status)

    def pending(self) -> list[int]:
        return [r for r, s in enumerate(self.status) if s == PENDING]

    def finished(self) -> bool:
        """No run is pending or running."""
        return self.count(PENDING) == 0 and self.count(RUNNING) == 0

    def is_known(self, run: int, attempt: int) -> bool:
        """Whether `(run, attempt)` was ever started and is not retired
        (messages of others are rejected)."""
        started = 0 <= run < len(self) and 0 <= attempt < self.attempts[run]
        return started and (run, attempt) not in self.retired

    def global_run(self, run: int) -> int:
        """The study-wide id of local run `run`."""
        return run * self.processes + self.process

    def _draw(self, n: int) -> np.ndarray:
        """The parameters of local runs `0 … n − 1` (rows `i·P + r` of the draw)."""
        return self.sampler.draw(self.space, self.global_run(n - 1) + 1)[
            self.process :: self.processes
        ]

    def spec(self, run: int) -> RunSpec:
        return RunSpec(
            run=run,
            attempt=self.attempts[run],
            params=self.space.as_dict(self.params[run]),
            seed=run_seed(self.seed, self.global_run(run)),
        )

    # -- transitions -------------------------------------------------------------

    def start(self, runs: list[int]) -> list[RunSpec]:
        """Marks `runs` running and returns their specs (with a new attempt each)."""
        specs = []
        for run in runs:
            if self.status[run] != PENDING:
                raise RuntimeError(f"run {run} is {self.status[run]}, not pending.")
            specs.append(self.spec(run))
            self.status[run] = RUNNING
            self.attempts[run] += 1
        return specs

    def accept(self, run: int) -> None:
        """Counts one newly accepted step of `run`; the run is done at `n_steps`."""
        self.received[run] += 1
        if self.received[run] == self.n_steps and self.status[run] != DONE:
            self.status[run] = DONE

    def ended(self, run: int) -> RunState:
        """The job of `run` has ended: returns the run's new state.

        Done runs stay done; others are pending again, or failed and replaced
        by a redrawn run after `max_attempts` attempts.
        """
        if self.status[run] in (DONE, FAILED):
            return self.status[run]
        if self.attempts[run] < self.max_attempts:
            self.status[run] = PENDING
            return PENDING
        self.status[run] = FAILED
        self.replaced_by[run] = self._redraw()
        return FAILED

    def retire(self, run: int, attempt: int, step: int | None = None) -> RunState:
        """Attempt `attempt` of `run` sent a non-finite sample (at `step`):
        refuses its messages from now on and, if it is the run's running
        attempt, ends the run as [`ended`][sciml.online.RunTable.ended] does.
        Returns the run's state."""
        self.retired.add((run, attempt))
        if step is not None:
            self.non_finite_step[run] = min(step, self.non_finite_step.get(run, step))
        if self.status[run] == RUNNING and attempt == self.attempts[run] - 1:
            return self.ended(run)
        return self.status[run]

    def _redraw(self) -> int:
        run = len(self)
        row = self.sampler.draw(self.space, self.global_run(run) + 1)[-1]
        self.params = np.concatenate([self.params, row[None]])
        self.status.append(PENDING)
        self.attempts.append(0)
        self.received.append(0)
        return run

    def failed_runs(self) -> list[dict[str, Any]]:
        """The failed runs (global ids) with their parameters, attempts, the
        attempts that sent non-finite samples, and replacement."""
        return [
            {
                "run": self.global_run(r),
                "params": self.space.as_dict(self.params[r]),
                "attempts": self.attempts[r],
                "non_finite_attempts": sorted(a for run, a in self.retired if run == r),
                "replaced_by": (
                    self.global_run(self.replaced_by[r]) if r in self.replaced_by else None
                ),
            }
            for r, s in enumerate(self.status)
            if s == FAILED
        ]

    def diverged_runs(self) -> list[dict[str, Any]]:
        """The runs (global ids) an attempt of which sent a non-finite sample: their
        parameters, first non-finite step (None if not known), the attempts
        that diverged, and their state now (`failed` and redrawn, or `done` by
        a later attempt, ...)."""
        runs = sorted({run for run, _ in self.retired})
        return [
            {
                "run": self.global_run(r),
                "params": self.space.as_dict(self.params[r]),
                "non_finite_step": self.non_finite_step.get(r),
                "non_finite_attempts": sorted(a for run, a in self.retired if run == r),
                "state": str(self.status[r]),
            }
            for r in runs
        ]

    # -- checkpoint ----------------------------------------------------------------

    def to_json(self) -> dict[str, Any]:
        return {
            "status": list(self.status),
            "attempts": list(self.attempts),
            "received": list(self.received),
            "replaced_by": {str(k): v for k, v in self.replaced_by.items()},
            "retired": sorted(self.retired),
            "non_finite_step": {str(k): v for k, v in self.non_finite_step.items()},
        }

    def restore(self, data: dict[str, Any]) -> None:
        """Loads a table saved by `to_json`; running runs become pending."""
        n = len(data["status"])
        if n < self.n_local:
            raise ValueError(f"the saved run table has {n} runs, the study plans {self.n_local}.")
        self.params = self._draw(n)
        self.status = [PENDING if s == RUNNING else RunState(s) for s in data["status"]]
        self.attempts = [int(a) for a in data["attempts"]]
        self.received = [int(c) for c in data["received"]]
        self.replaced_by = {int(k): int(v) for k, v in data["replaced_by"].items()}
        self.retired = {(int(r), int(a)) for r, a in data.get("retired", [])}
        steps = data.get("non_finite_step", {})
        self.non_finite_step = {int(k): int(v) for k, v in steps.items()}
