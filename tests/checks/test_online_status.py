"""The online statuses that cross a process boundary: standard-library
enumerations whose members are their strings, so checkpoints and messages
written with plain strings read back unchanged."""

import json

import numpy as np

from sciml.online import CloseStatus, JobEnd, RunState, RunTable
from sciml.online._sampler import MonteCarlo, ParameterSpace
from sciml.transport import Schema, new_secret
from sciml.transport._wire import decode, encode_close


def test_members_are_their_strings():
    assert RunState.DONE == "done" and RunState("failed") is RunState.FAILED
    assert f"run_{RunState.PENDING}" == "run_pending" and str(JobEnd.TIMEOUT) == "timeout"
    assert json.dumps({"exit": JobEnd.TIMEOUT, "s": list(RunState)}) == (
        '{"exit": "timeout", "s": ["pending", "running", "done", "failed"]}'
    )


def test_close_status_round_trips_through_the_wire():
    secret, schema = new_secret(), Schema.from_example({"u": np.zeros(2, np.float32)}, 1)
    for status, outcome in (
        (CloseStatus.OK, CloseStatus.OK),
        (CloseStatus.error("ValueError: bad"), CloseStatus.ERROR),
    ):
        msg = decode(encode_close(secret, 1, 0, status), secret, schema)
        assert msg.status == status and type(msg.status) is str
        assert CloseStatus.of(msg.status) is outcome
    assert CloseStatus.error("ValueError: bad") == "error: ValueError: bad"


def test_a_run_table_saved_with_plain_strings_restores_to_states():
    table = RunTable(
        ParameterSpace({"a": (0.0, 1.0)}), MonteCarlo(seed=0), n_runs=3, n_steps=1, seed=0,
        max_attempts=2,
    )  # fmt: skip
    old = {"status": ["done", "running", "failed"], "attempts": [1, 1, 2], "received": [1, 0, 0]}
    table.restore({**old, "replaced_by": {}})
    assert table.status == [RunState.DONE, RunState.PENDING, RunState.FAILED]
    assert all(type(s) is RunState for s in table.status)
    saved = json.loads(json.dumps(table.to_json()))
    assert saved["status"] == ["done", "pending", "failed"]
