"""The ZeroMQ transport: exactly-once delivery from several solver processes,
duplicates from restarts and replays, hostile input, client status and checks.

All sockets bind or connect on loopback or ipc only.
"""

import hmac
import logging
import multiprocessing
import re
import stat
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest
import zmq
from zmq.utils.monitor import recv_monitor_message

from sciml.transport import (
    REJECT_REASONS,
    RejectedMessage,
    SampleReceiver,
    Schema,
    SolverClient,
    new_secret,
    read_secret,
    secret_from_env,
    secret_to_env,
    simulate,
    write_secret,
)
from sciml.transport._sockets import MAXMSGSIZE_SLACK, secure_client_socket
from sciml.transport._wire import decode, encode_close, encode_data, encode_open, max_message_bytes

from ._solvers import field_value, params_of, send_runs


SECRET = new_secret()
SHAPE = (16, 16)
N_STEPS = 25
SCHEMA = Schema.from_example({"u": np.zeros(SHAPE, np.float32), "t": np.float64(0)}, N_STEPS)
REPO = Path(__file__).resolve().parents[2]


class Sink:
    """Records what the receiver hands on (the fields copied, as a buffer would)."""

    def __init__(self):
        self.opened, self.closed, self.data = [], [], []

    def callbacks(self):
        return {"on_open": self.on_open, "on_data": self.on_data, "on_close": self.on_close}

    def on_open(self, message):
        self.opened.append((message.run, message.attempt, message.params))

    def on_data(self, message):
        fields = {name: np.array(array) for name, array in message.fields.items()}
        self.data.append((message.run, message.attempt, message.step, fields))

    def on_close(self, message):
        self.closed.append((message.run, message.attempt, message.status))

    def check_fields(self):
        for run, _, step, fields in self.data:
            np.testing.assert_array_equal(fields["u"], field_value(run, step, SHAPE))
            assert fields["t"] == step


def wait_until(predicate, timeout_s=30.0):
    deadline = time.monotonic() + timeout_s
    while not predicate():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.01)


def expected_counters(**counts):
    names = ["accepted", "duplicates", "opened", "closed", "rejected"]
    result = dict.fromkeys(names + [f"rejected_{r}" for r in REJECT_REASONS], 0)
    result.update(counts)
    result["rejected"] = sum(v for k, v in result.items() if k.startswith("rejected_"))
    return result


def test_exactly_once_from_three_processes():
    """3 solver processes × 4 runs × 25 steps of 16×16 float32: every id once,
    values intact (over loopback TCP with CURVE)."""
    runs = [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9, 10, 11]]
    planned = {(run, step) for group in runs for run in group for step in range(N_STEPS)}
    sink = Sink()
    context = multiprocessing.get_context("spawn")
    with SampleReceiver(SCHEMA, SECRET, **sink.callbacks()) as receiver:
        assert receiver.address.startswith("tcp://127.0.0.1:")
        processes = [
            context.Process(
                target=send_runs, args=(receiver.address, SECRET, group, N_STEPS, SHAPE)
            )
            for group in runs
        ]
        try:
            for process in processes:
                process.start()
            for process in processes:
                process.join(timeout=120)
                assert process.exitcode == 0
        finally:
            for process in processes:
                if process.is_alive():
                    process.kill()
                    process.join()
        # the close of a run follows its data on the same connection
        wait_until(lambda: receiver.counters()["closed"] == 12)
        assert receiver.wait_idle(idle_s=0.2)
        counters = receiver.counters()
        ids = receiver.accepted_ids()
    assert counters == expected_counters(accepted=300, opened=12, closed=12)
    assert ids.dtype == np.int64 and ids.shape == (300, 2)
    assert {tuple(map(int, i)) for i in ids} == planned
    assert sorted((run, step) for run, _, step, _ in sink.data) == sorted(planned)
    sink.check_fields()
    # within one run, steps arrive in order (one connection)
    for run in range(12):
        assert [s for r, _, s, _ in sink.data if r == run] == list(range(N_STEPS))
    assert sorted(sink.opened) == [(run, 0, params_of(run)) for run in range(12)]
    assert sorted(sink.closed) == [(run, 0, "ok") for run in range(12)]


def test_restarted_run_and_restored_ids_are_duplicates():
    """A restarted run (attempt 1) resends steps 0..6: 7 duplicates, nothing re-accepted;
    ids restored from a checkpoint count as accepted."""
    restored = [(1, step) for step in range(5)]
    sink = Sink()
    with SampleReceiver(SCHEMA, SECRET, accepted=restored, **sink.callbacks()) as receiver:
        client = SolverClient(receiver.address, SECRET, run=0, attempt=0)
        client.open(params_of(0))
        for step in range(7):  # then the solver "crashes"
            client.send(step, {"u": field_value(0, step, SHAPE), "t": np.float64(step)})
        client.close("error: killed")
        wait_until(lambda: receiver.counters()["closed"] == 1)
        send_runs(receiver.address, SECRET, [0], N_STEPS, SHAPE, attempt=1)
        wait_until(lambda: receiver.counters()["closed"] == 2)
        assert receiver.counters()["duplicates"] == 7
        send_runs(receiver.address, SECRET, [1], N_STEPS, SHAPE)
        wait_until(lambda: receiver.counters()["closed"] == 3)
        assert receiver.wait_idle(idle_s=0.2)
        counters = receiver.counters()
        ids = [tuple(map(int, i)) for i in receiver.accepted_ids()]
    assert counters == expected_counters(accepted=25 + 20, duplicates=7 + 5, opened=3, closed=3)
    assert ids == restored + [(0, s) for s in range(N_STEPS)] + [(1, s) for s in range(5, N_STEPS)]
    attempts = {(run, step): attempt for run, attempt, step, _ in sink.data}
    assert attempts == {
        **{(0, s): 0 for s in range(7)},
        **{(0, s): 1 for s in range(7, N_STEPS)},
        **{(1, s): 0 for s in range(5, N_STEPS)},
    }
    sink.check_fields()
    assert sink.closed == [(0, 0, "error: killed"), (0, 1, "ok"), (1, 0, "ok")]


def _oversized_frame_disconnects(address):
    """Sends one frame above MAXMSGSIZE from its own socket; True if ZeroMQ
    dropped that connection (seen from the sender's side)."""
    context = zmq.Context()
    socket = context.socket(zmq.PUSH)
    secure_client_socket(socket, SECRET, address)
    monitor = socket.get_monitor_socket(zmq.EVENT_DISCONNECTED)
    try:
        socket.connect(address)
        socket.send(bytes(max_message_bytes(SCHEMA) + MAXMSGSIZE_SLACK + 1))
        if not monitor.poll(10000):
            return False
        return recv_monitor_message(monitor)["event"] == zmq.EVENT_DISCONNECTED
    finally:
        socket.disable_monitor()
        monitor.close(linger=0)
        socket.close(linger=0)
        context.term()


def test_hostile_messages_are_rejected_and_honest_samples_arrive():
    fields = {"u": field_value(0, 3, SHAPE), "t": np.float64(3)}
    wrong_dtype = {"u": fields["u"].view(np.int32), "t": fields["t"]}  # same size
    wrong_shape = {"u": fields["u"][:, :8], "t": fields["t"]}
    good = encode_data(SECRET, 0, 0, 3, fields)

    def signed(header, payload):
        signed = len(header).to_bytes(8, "little") + header + payload
        return signed + hmac.new(SECRET, signed, "sha256").digest()

    size = int.from_bytes(good[:8], "little")
    header, payload = good[8 : 8 + size], good[8 + size : -32]

    hostile = [
        encode_data(new_secret(), 0, 0, 3, fields),  # unauthenticated
        signed(header, payload + bytes(8)),  # within MAXMSGSIZE, over the schema's cap
        signed(header, payload[:-8]),  # truncated
        encode_data(SECRET, 0, 0, 3, wrong_dtype),
        encode_data(SECRET, 0, 0, 3, wrong_shape),
        encode_data(SECRET, 0, 0, N_STEPS, fields),  # step out of range
        encode_data(SECRET, 7, 0, 3, fields),  # unknown run
        encode_open(SECRET, 8, 0, {}),  # unknown run
    ]
    replays = [encode_data(SECRET, 1, 0, s, _solvers_fields(1, s)) for s in range(5)]
    rng = np.random.default_rng(1234)
    random_messages = [
        [rng.bytes(int(rng.integers(0, 300))) for _ in range(int(rng.integers(1, 6)))]
        for _ in range(1000)
    ]
    # a multipart message is malformed; a random frame is whatever the decoder
    # (tested frame by frame in test_wire) says
    random_reasons = [_reason(m[0]) if len(m) == 1 else "malformed" for m in random_messages]
    n_auth = random_reasons.count("auth")
    n_oversized = random_reasons.count("oversized")
    queue = hostile + replays + random_messages
    rng.shuffle(queue)

    sink = Sink()
    known = lambda run, attempt: run < 2  # noqa: E731
    with SampleReceiver(SCHEMA, SECRET, is_known_run=known, **sink.callbacks()) as receiver:
        context = zmq.Context()
        raw = context.socket(zmq.PUSH)
        secure_client_socket(raw, SECRET, receiver.address)
        clients = [SolverClient(receiver.address, SECRET, run=run) for run in range(2)]
        try:
            raw.connect(receiver.address)
            for client in clients:
                client.open(params_of(client.run))
            per_step = -(-len(queue) // N_STEPS)
            for step in range(N_STEPS):  # honest steps interleaved with hostile messages
                for client in clients:
                    client.send(step, _solvers_fields(client.run, step))
                for frames in queue[step * per_step : (step + 1) * per_step]:
                    raw.send_multipart(frames if isinstance(frames, list) else [frames])
                if step == 10:
                    assert _oversized_frame_disconnects(receiver.address)
            for client in clients:
                client.close()
        finally:
            for client in clients:
                client.close()
            raw.close(linger=5000)
            context.term()
        expected = expected_counters(
            accepted=50,
            duplicates=5,
            opened=2,
            closed=2,
            rejected_auth=1 + n_auth,
            rejected_malformed=1 + len(random_messages) - n_auth - n_oversized,
            rejected_oversized=1 + n_oversized,
            rejected_dtype=1,
            rejected_shape=1,
            rejected_step=1,
            rejected_unknown_run=2,
        )
        wait_until(lambda: receiver.counters()["rejected"] == expected["rejected"])
        wait_until(lambda: receiver.counters()["closed"] == 2)
        wait_until(lambda: receiver.counters()["duplicates"] == 5)
        assert receiver.wait_idle(idle_s=0.2)
        assert receiver.running and receiver.error is None
        counters = receiver.counters()
        ids = {tuple(map(int, i)) for i in receiver.accepted_ids()}
    assert counters == expected
    assert ids == {(run, step) for run in range(2) for step in range(N_STEPS)}
    assert len(sink.data) == 50
    sink.check_fields()


def _reason(data):
    try:
        decode(data, SECRET, SCHEMA)
    except RejectedMessage as error:
        return error.reason
    raise AssertionError("a random frame was accepted")


def _solvers_fields(run, step):
    return {"u": field_value(run, step, SHAPE), "t": np.float64(step)}


def test_ipc_address(tmp_path):
    sink = Sink()
    address = f"ipc://{tmp_path}/receiver.sock"
    with SampleReceiver(SCHEMA, SECRET, address=address, **sink.callbacks()) as receiver:
        assert receiver.address == address
        send_runs(receiver.address, SECRET, [3], 4, SHAPE)
        wait_until(lambda: receiver.counters()["closed"] == 1)
        assert receiver.counters()["accepted"] == 4
    assert [(r, s) for r, _, s, _ in sink.data] == [(3, s) for s in range(4)]
    sink.check_fields()


def test_client_context_manager_reports_the_error():
    sink = Sink()
    with SampleReceiver(SCHEMA, SECRET, **sink.callbacks()) as receiver:
        with pytest.raises(RuntimeError, match="diverged"):
            with SolverClient(receiver.address, SECRET, run=4, attempt=2) as client:
                client.open({"alpha": 1.0})
                client.send(0, _solvers_fields(4, 0))
                raise RuntimeError("solver diverged at step 1")
        assert client.closed
        wait_until(lambda: receiver.counters()["closed"] == 1)
    assert sink.closed == [(4, 2, "error: RuntimeError: solver diverged at step 1")]
    assert sink.opened == [(4, 2, {"alpha": 1.0})]
    assert [(r, a, s) for r, a, s, _ in sink.data] == [(4, 2, 0)]


@pytest.mark.parametrize("n_steps", [2, N_STEPS])
def test_a_client_whose_trainer_is_gone_times_out_and_exits_promptly(n_steps, tmp_path):
    # An endpoint nobody listens on (a loopback port could be taken by another process).
    address = f"ipc://{tmp_path / 'gone.ipc'}"
    start = time.monotonic()
    # 2 steps fit the queue of 4 (then `close` waits 0.2 s for delivery and
    # raises); 25 steps fill it (then `send` waits 0.2 s and raises).
    with pytest.raises(TimeoutError, match="took no message for 0.2 s"):
        with SolverClient(address, SECRET, run=0, sndhwm=4, send_timeout_ms=200) as client:
            client.open({"alpha": 1.0})
            for step in range(n_steps):
                client.send(step, _solvers_fields(0, step))
    assert time.monotonic() - start < 5.0  # no 30 s linger
    assert client.closed


def test_callback_error_is_raised_by_stop():
    def on_data(message):
        raise ValueError(f"buffer bug at step {message.step}")

    receiver = SampleReceiver(
        SCHEMA, SECRET, on_open=lambda m: None, on_data=on_data, on_close=lambda m: None
    )
    receiver.start()
    try:
        send_runs(receiver.address, SECRET, [0], 3, SHAPE)
        wait_until(lambda: receiver.error is not None)
        wait_until(lambda: not receiver.running)  # the receiver stops on a user bug
    finally:
        with pytest.raises(ValueError, match="buffer bug at step 0"):
            receiver.stop()
    receiver.stop()  # idempotent, raises once


def test_stop_is_idempotent_and_final():
    receiver = SampleReceiver(SCHEMA, SECRET, on_open=print, on_data=print, on_close=print, hwm=4)
    receiver.start()
    assert receiver.running
    receiver.stop()
    assert not receiver.running
    receiver.stop()
    with pytest.raises(RuntimeError, match="once"):
        receiver.start()


def test_back_pressure_blocks_then_delivers():
    """`on_data` blocking: the client's sends block once the queues are full,
    and everything is delivered once the consumer resumes."""
    shape, n_steps = (512, 512), 30  # 1 MiB messages: more than the queues and TCP buffers hold
    schema = Schema.from_example({"u": np.zeros(shape, np.float32)}, n_steps)
    gate = threading.Event()
    received, sent = [], []

    def on_data(message):
        gate.wait()
        received.append((message.step, np.array(message.fields["u"])))

    def solver(address):
        with SolverClient(address, SECRET, run=0, sndhwm=2) as client:
            client.open({})
            for step in range(n_steps):
                client.send(step, {"u": field_value(0, step, shape)})
                sent.append(step)

    noop = lambda message: None  # noqa: E731
    with SampleReceiver(
        schema, SECRET, on_open=noop, on_data=on_data, on_close=noop, hwm=2
    ) as receiver:
        thread = threading.Thread(target=solver, args=(receiver.address,))
        thread.start()
        try:
            wait_until(lambda: receiver.in_flight() == (0, 0))
            time.sleep(0.5)
            assert len(sent) < n_steps  # blocked
        finally:
            gate.set()
            thread.join(timeout=60)
        wait_until(lambda: receiver.counters()["closed"] == 1)
        assert receiver.in_flight() is None
    assert [step for step, _ in received] == list(range(n_steps))
    for step, u in received:
        np.testing.assert_array_equal(u, field_value(0, step, shape))


def test_argument_checks():
    with pytest.raises(ValueError, match="run"):
        SolverClient("tcp://127.0.0.1:5555", SECRET, run=-1)
    with pytest.raises(ValueError, match="attempt"):
        SolverClient("tcp://127.0.0.1:5555", SECRET, run=0, attempt=-2)
    with pytest.raises(ValueError, match="secret"):
        SolverClient("tcp://127.0.0.1:5555", b"0123456789", run=0)
    with pytest.raises(ValueError, match="address"):
        SolverClient("http://127.0.0.1:5555", SECRET, run=0)
    with pytest.raises(ValueError, match="sndhwm"):
        SolverClient("tcp://127.0.0.1:5555", SECRET, run=0, sndhwm=0)
    callbacks = Sink().callbacks()
    with pytest.raises(ValueError, match="secret"):
        SampleReceiver(SCHEMA, b"short", **callbacks)
    with pytest.raises(ValueError, match="hwm"):
        SampleReceiver(SCHEMA, SECRET, hwm=0, **callbacks)
    with pytest.raises(ValueError, match="address"):
        SampleReceiver(SCHEMA, SECRET, address="udp://127.0.0.1:1", **callbacks)
    with pytest.raises(ValueError, match="twice"):
        SampleReceiver(SCHEMA, SECRET, accepted=[(0, 1), (0, 1)], **callbacks)


def test_client_state_errors():
    with SampleReceiver(SCHEMA, SECRET, **Sink().callbacks()) as receiver:
        client = SolverClient(receiver.address, SECRET, run=0, linger_ms=1000)
        with pytest.raises(RuntimeError, match="open"):
            client.send(0, _solvers_fields(0, 0))
        client.close()
        with pytest.raises(RuntimeError, match="closed"):
            client.open({})


def test_secret_through_file_and_environment(tmp_path, monkeypatch):
    secret = new_secret()
    path = tmp_path / "secret"
    path.write_text("old")
    path.chmod(0o644)
    write_secret(path, secret)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert read_secret(path) == secret
    env = secret_to_env(secret, {"PATH": "/bin"})
    assert env == {"PATH": "/bin", "SCIML_ONLINE_SECRET": secret.hex()}
    monkeypatch.setenv("SCIML_ONLINE_SECRET", env["SCIML_ONLINE_SECRET"])
    assert secret_from_env() == secret
    monkeypatch.delenv("SCIML_ONLINE_SECRET")
    with pytest.raises(KeyError, match="SCIML_ONLINE_SECRET"):
        secret_from_env()
    monkeypatch.setenv("SCIML_ONLINE_SECRET", "zz")
    with pytest.raises(ValueError, match="hex"):
        secret_from_env()


def test_a_non_finite_sample_is_handed_to_on_non_finite_and_never_accepted():
    sink, refused = Sink(), []
    with SampleReceiver(
        SCHEMA, SECRET, on_non_finite=lambda m: refused.append((m.run, m.step)), **sink.callbacks()
    ) as receiver:
        with SolverClient(receiver.address, SECRET, run=0) as client:
            client.open(params_of(0))
            for step in range(4):
                u = field_value(0, step, SHAPE)
                u[5, 7] = np.nan if step == 2 else u[5, 7]
                client.send(step, {"u": u, "t": np.float64(np.inf if step == 3 else step)})
        wait_until(lambda: receiver.counters()["closed"] == 1)
        counters = receiver.counters()
        ids = [tuple(map(int, i)) for i in receiver.accepted_ids()]
    assert counters == expected_counters(accepted=2, opened=1, closed=1, rejected_non_finite=2)
    assert refused == [(0, 2), (0, 3)] and ids == [(0, 0), (0, 1)]
    assert [step for _, _, step, _ in sink.data] == [0, 1]


def test_replayed_opens_and_closes_are_duplicates_that_reach_no_callback():
    sink = Sink()
    with SampleReceiver(SCHEMA, SECRET, **sink.callbacks()) as receiver:
        opening = encode_open(SECRET, 0, 0, params_of(0))
        closing = encode_close(SECRET, 0, 0, "error: replayed")
        context = zmq.Context()
        raw = context.socket(zmq.PUSH)
        secure_client_socket(raw, SECRET, receiver.address)
        try:
            raw.connect(receiver.address)
            for data in [opening, opening, closing, opening, closing, closing]:
                raw.send(data)
            # a new attempt opens and closes once each
            raw.send(encode_open(SECRET, 0, 1, params_of(0)))
            raw.send(encode_close(SECRET, 0, 1, "ok"))
        finally:
            raw.close(linger=5000)
            context.term()
        wait_until(lambda: receiver.counters()["duplicates"] == 4)
        assert receiver.wait_idle(idle_s=0.2)
        counters = receiver.counters()
    assert counters == expected_counters(duplicates=4, opened=2, closed=2)
    assert sink.opened == [(0, 0, params_of(0)), (0, 1, params_of(0))]
    assert sink.closed == [(0, 0, "error: replayed"), (0, 1, "ok")]


def test_rejections_are_warned_about_in_few_lines_that_count_them_all(caplog):
    forged = encode_data(new_secret(), 0, 0, 3, _solvers_fields(0, 3))
    with caplog.at_level(logging.WARNING, logger="sciml.transport._receiver"):
        with SampleReceiver(SCHEMA, SECRET, **Sink().callbacks()) as receiver:
            context = zmq.Context()
            raw = context.socket(zmq.PUSH)
            secure_client_socket(raw, SECRET, receiver.address)
            try:
                raw.connect(receiver.address)
                for frames in [[forged]] * 500 + [[b"x"]] * 300:
                    raw.send_multipart(frames)
            finally:
                raw.close(linger=5000)
                context.term()
            wait_until(lambda: receiver.counters()["rejected"] == 800)
    lines = [record.getMessage() for record in caplog.records]
    # the first rejection is reported at once, the rest when the receiver stops
    # (or each WARNING_INTERVAL = 10 s on a very slow machine)
    assert 2 <= len(lines) <= 3, lines
    assert lines[0].startswith("rejected 1 messages (auth: 1)")
    counts = [re.findall(r"(\w+): (\d+)", line.split(" at ")[0]) for line in lines]
    totals = {}
    for reason, n in (pair for line in counts for pair in line):
        totals[reason] = totals.get(reason, 0) + int(n)
    assert totals == {"auth": 500, "malformed": 300}


def _rss_mb():
    """This process's resident memory in MB (Linux)."""
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    raise AssertionError("no VmRSS line")


@pytest.mark.slow
@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="reads VmRSS from /proc")
@pytest.mark.parametrize("mode", ["multipart", "frame", "raw"])
def test_a_flooding_stranger_neither_grows_the_receivers_memory_nor_stops_it(mode):
    """A peer without the secret streams 200 MB at the receiver for 6 s (an
    unterminated multipart message of 20 kB frames, one 200 MB frame, or raw
    bytes), from a process of its own; meanwhile a solver's 25 steps are all
    accepted, and the receiver's memory grows by less than 40 MB (measured:
    under 5 MB; before CURVE the multipart flood grew it by the 200 MB sent)."""
    sink = Sink()
    with SampleReceiver(SCHEMA, SECRET, **sink.callbacks()) as receiver:
        before = peak = _rss_mb()
        flood = subprocess.Popen(
            [sys.executable, "-m", "tests.online.flood", receiver.address, mode, "6", "200"],
            cwd=REPO,
            stdout=subprocess.PIPE,
            text=True,
        )
        try:
            with SolverClient(receiver.address, SECRET, run=0) as client:
                client.open(params_of(0))
                time.sleep(0.5)  # the flood is under way
                for step in range(N_STEPS):
                    client.send(step, _solvers_fields(0, step))
                    wait_until(lambda: receiver.counters()["accepted"] == step + 1)  # noqa: B023
                    peak = max(peak, _rss_mb())
                    time.sleep(0.2)
            out, _ = flood.communicate(timeout=60)
        finally:
            flood.kill()
        peak = max(peak, _rss_mb())
        wait_until(lambda: receiver.counters()["closed"] == 1)
        counters = receiver.counters()
    assert flood.returncode == 0 and float(out) >= 0
    assert peak - before < 40, (before, peak, out)
    assert counters["accepted"] == N_STEPS and receiver.error is None
    if mode != "raw":  # a ZeroMQ peer without keys fails the CURVE handshake
        assert counters["rejected_auth"] >= 1
    sink.check_fields()


def test_a_client_with_another_secret_fails_the_curve_handshake_and_delivers_nothing():
    """Its `close`, and a `send` that waits on a full queue, say why: the
    trainer refused the handshake, so the secrets differ (not "is it still
    running?")."""
    sink = Sink()
    with SampleReceiver(SCHEMA, SECRET, **sink.callbacks()) as receiver:
        client = SolverClient(receiver.address, new_secret(), run=0, linger_ms=1000)
        client.open(params_of(0))
        client.send(0, _solvers_fields(0, 0))
        with pytest.raises(TimeoutError, match="took no message for 1 s: it refused") as info:
            client.close()
        assert "do not share the study's secret" in str(info.value)
        assert "SCIML_ONLINE_SECRET" in str(info.value)
        # a send that blocks on its full queue (2 messages) says the same
        client = SolverClient(
            receiver.address, new_secret(), run=1, sndhwm=2, send_timeout_ms=300, linger_ms=0
        )
        with pytest.raises(TimeoutError, match=r"0\.3 s: it refused .* times at the CURVE"):
            client.open(params_of(1))
            for step in range(N_STEPS):
                client.send(step, _solvers_fields(1, step))
        client.close()
        wait_until(lambda: receiver.counters()["rejected_auth"] >= 2)
        counters = receiver.counters()
    assert counters["opened"] == counters["accepted"] == 0 and sink.data == []


def test_a_connection_dropped_during_its_handshake_is_not_an_auth_rejection():
    """A solver process stopped while it connects (here: clients with the
    study's secret closed at once, 20 times) drops its connection during the
    CURVE handshake: ZeroMQ reports it as a failed handshake without detail,
    which carried no message and is not a refused peer. Counted as `auth`
    before, it put a false warning in a run's output. A peer without the
    secret is still counted."""
    sink = Sink()
    with SampleReceiver(SCHEMA, SECRET, **sink.callbacks()) as receiver:
        context = zmq.Context()
        try:
            for _ in range(20):
                dropped = context.socket(zmq.PUSH)
                secure_client_socket(dropped, SECRET, receiver.address)
                dropped.connect(receiver.address)
                dropped.close(linger=0)
            time.sleep(0.5)  # the receiver polls its monitor every ~100 ms
            assert receiver.counters()["rejected"] == 0
            refused = context.socket(zmq.PUSH)
            secure_client_socket(refused, new_secret(), receiver.address)
            refused.connect(receiver.address)
            wait_until(lambda: receiver.counters()["rejected_auth"] >= 1)
        finally:
            context.destroy(linger=0)  # closes the sockets too, should an assertion fail


def test_a_client_that_cannot_connect_or_is_not_served_is_not_told_of_the_secret():
    """The secret is blamed only for a refused handshake: a TCP port nobody
    listens on, and a trainer that took the handshake but no message (its
    queue full: it stopped reading), get other words."""
    context = zmq.Context()
    probe = context.socket(zmq.PULL)
    probe.bind("tcp://127.0.0.1:*")
    free = probe.getsockopt_string(zmq.LAST_ENDPOINT)
    probe.close(linger=0)
    context.term()
    with pytest.raises(TimeoutError, match=r"0\.3 s: no connection to it could be made; is it"):
        SolverClient(free, SECRET, run=0, linger_ms=300).close()
    blocked = threading.Event()
    sink = Sink()
    callbacks = {**sink.callbacks(), "on_data": lambda message: blocked.wait(30)}
    with SampleReceiver(SCHEMA, SECRET, hwm=1, **callbacks) as receiver:
        client = SolverClient(receiver.address, SECRET, run=0, sndhwm=1, send_timeout_ms=300)
        with pytest.raises(TimeoutError, match=r"took no message for 0\.3 s; is it still running"):
            client.open(params_of(0))
            for _ in range(100_000):  # until the socket buffers are full (a few MB)
                client.send(0, _solvers_fields(0, 0))
        blocked.set()
        client._linger_ms = 0
        client.close()


def test_simulate_checks_the_step_count_as_the_steps_come():
    """The one home of "run a simulation, check its step count" (the worker
    and the trainer's validation runs both use it)."""

    def simulation(params, *, seed, n):
        for k in range(n):
            yield {"k": np.array(1000 * params["a"] + seed + k)}

    steps = simulate(simulation, {"a": 1.0}, seed=10, settings={"n": 3}, n_steps=3)
    assert [int(f["k"]) for f in steps] == [1010, 1011, 1012]
    steps = simulate(simulation, {"a": 0.0}, seed=0, settings={"n": 5}, n_steps=3)
    assert [int(next(steps)["k"]) for _ in range(3)] == [0, 1, 2]
    with pytest.raises(RuntimeError, match="more than the study's n_steps = 3 steps"):
        next(steps)  # raised before a fourth step is handed on
    with pytest.raises(RuntimeError, match="yielded 2 steps, the study expects 3"):
        list(simulate(simulation, {"a": 0.0}, seed=0, settings={"n": 2}, n_steps=3))
