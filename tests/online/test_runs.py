"""The run table: resubmission, redraw after the attempt limit, restore."""

import json

import numpy as np

from sciml.online._runs import DONE, FAILED, PENDING, RUNNING, RunTable, run_seed
from sciml.online._sampler import MonteCarlo, ParameterSpace


SPACE = ParameterSpace({"nu": (1e-3, 1e-2, "log")})


def table(n_runs=3, n_steps=4, max_attempts=2):
    return RunTable(
        SPACE, MonteCarlo(seed=5), n_runs=n_runs, n_steps=n_steps, seed=5, max_attempts=max_attempts
    )


def test_a_run_is_done_when_all_its_steps_are_accepted_whatever_its_job_does():
    t = table()
    (spec,) = t.start([0])
    assert (spec.run, spec.attempt, spec.seed) == (0, 0, run_seed(5, 0))
    assert t.status[0] == RUNNING
    for _ in range(4):
        t.accept(0)
    assert t.status[0] == DONE
    assert t.ended(0) == DONE  # a crash after the last step changes nothing


def test_an_unfinished_run_is_resubmitted_with_the_same_parameters_and_seed():
    t = table()
    (first,) = t.start([1])
    t.accept(1)
    assert t.ended(1) == PENDING
    (second,) = t.start([1])
    assert second.attempt == 1 and second.seed == first.seed and second.params == first.params
    assert t.is_known(1, 0) and t.is_known(1, 1) and not t.is_known(1, 2)


def test_after_max_attempts_a_run_fails_and_a_redrawn_run_replaces_it():
    t = table(max_attempts=2)
    for _ in range(2):
        t.start([2])
        assert t.ended(2) in (PENDING, FAILED)
    assert t.status[2] == FAILED and len(t) == 4 and t.replaced_by == {2: 3}
    # the replacement is row 3 of the same sampler: what a restart would draw too
    np.testing.assert_array_equal(t.params[3], MonteCarlo(seed=5).draw(SPACE, 4)[3])
    assert t.status[3] == PENDING
    (failed,) = t.failed_runs()
    assert failed["run"] == 2 and failed["attempts"] == 2 and failed["replaced_by"] == 3
    assert not t.finished()


def test_restore_turns_running_runs_into_pending_and_keeps_the_rest():
    t = table(max_attempts=1)
    t.start([0, 1, 2])
    for _ in range(4):
        t.accept(0)
    t.ended(1)  # fails (one attempt), replaced by run 3
    saved = json.loads(json.dumps(t.to_json()))  # what a checkpoint holds
    restored = table(max_attempts=1)
    restored.restore(saved)
    assert restored.status == [DONE, FAILED, PENDING, PENDING]
    assert restored.attempts == [1, 1, 1, 0]
    np.testing.assert_array_equal(restored.params, t.params)
    assert restored.replaced_by == {1: 3}


def test_a_retired_attempt_is_unknown_and_its_run_ends_as_if_its_job_crashed():
    t = table(max_attempts=2)
    t.start([0])
    assert t.retire(0, 0) == PENDING and not t.is_known(0, 0)
    t.start([0])
    assert t.is_known(0, 1)
    assert t.retire(0, 0) == RUNNING  # a late message of the retired attempt: no change
    assert t.retire(0, 1) == FAILED and t.replaced_by == {0: 3}
    (failed,) = t.failed_runs()
    assert failed["non_finite_attempts"] == [0, 1]
    restored = table(max_attempts=2)
    restored.restore(json.loads(json.dumps(t.to_json())))
    assert restored.retired == {(0, 0), (0, 1)} and not restored.is_known(0, 1)


def test_a_diverged_run_is_listed_with_its_first_non_finite_step_also_after_a_restore():
    t = table(max_attempts=2)
    t.start([0, 1])
    t.retire(1, 0, step=3)
    t.start([1])
    t.retire(1, 1, step=2)  # the second attempt diverged earlier
    (diverged,) = t.diverged_runs()
    assert diverged == {
        "run": 1,
        "params": SPACE.as_dict(t.params[1]),
        "non_finite_step": 2,
        "non_finite_attempts": [0, 1],
        "state": "failed",
    }
    restored = table(max_attempts=2)
    restored.restore(json.loads(json.dumps(t.to_json())))
    assert restored.diverged_runs() == t.diverged_runs()
