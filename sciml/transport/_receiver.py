"""The trainer's side of the transport: `SampleReceiver` (the solvers' side is `SolverClient`).

Solvers PUSH, the server PULLs (ZeroMQ fair-queues between the connected
solvers). Each message is the single-frame format of `_wire`: authenticated by
an HMAC with a per-study secret (see `_secret`), no pickle.

**Delivery semantics.** A sample's id is `(run, step)`. The receiver keeps the
ids it accepted (a set for lookups, a list in acceptance order that is part of
the trainer's checkpoint and can be handed back through `accepted=` after a
restart) and drops any data message whose id it already accepted, counting it
as a duplicate: a restarted solver (a new `attempt`) resending its first steps,
or a replayed message, never reaches the buffer twice. An id is recorded just
before `on_data` is called with it; `in_flight()` names the id whose `on_data`
has not yet returned, so a checkpoint taken while `on_data` blocks can tell
whether that sample is already in the buffer. Open and close messages are
idempotent the same way: the first open and the first close of each
`(run, attempt)` reach `on_open` / `on_close`; a replay of either is dropped
and counted as a duplicate (so it cannot, say, keep a hung run's timer alive).

**Back-pressure.** `on_data` may block (the buffer is full): ZeroMQ then
queues up to `hwm` messages on the server and `sndhwm` per solver, after which
the solvers' `send` blocks. Both count toward memory: at most
`(hwm + solvers × sndhwm) × message size` bytes sit in queues.

**Who can connect.** A TCP receiver (the default, a loopback port; or any
interface for solvers on other nodes) uses ZeroMQ CURVE: its key pair and the
clients' are derived from the study's secret (`curve_keys`), so a peer without
the secret fails the handshake and is disconnected before ZeroMQ takes a byte
of message from it; each refused handshake is counted as an `auth` rejection.
A connection that drops during its handshake (a solver process stopped while
it connected) is not: it carried no message, and its peer may well have held
the secret.
An `ipc://` receiver has no CURVE: put its socket in a directory only the
study's user can enter (mode 0700). It is not the default because libzmq
4.3's ipc transport loses the last messages of a sender that closes while the
receiver is behind (its `LINGER` returns early, zeromq/libzmq#4660), which
would break `SolverClient.close`'s delivery check.

**Bounded memory.** A message is one frame, and `zmq.MAXMSGSIZE` is set to
`max_message_bytes(schema)` (plus the few bytes CURVE adds), so ZeroMQ drops a
larger frame and disconnects that peer without allocating it. ZeroMQ counts
such a drop as an ordinary disconnect, so it is not in the counters. A
multipart message (which only a peer that can connect can send) is read frame
by frame as it arrives, never kept, and counted once as `malformed`. Every
other bad message is rejected by `decode` (or as an
unknown run) and counted under `counters()["rejected_<reason>"]`. A data
message with a NaN or an infinity in a field is rejected as `non_finite`
before it can reach `on_data`, and handed to `on_non_finite`, so that the
run that sent it can be failed. Rejections are also reported as a warning
(logger `sciml.transport._receiver`), at most one line per `WARNING_INTERVAL`
seconds, that counts them by reason since the previous line (the last ones are
reported when the receiver stops). An exception while decoding never stops the
receiver. An exception raised by a callback (`on_open`, `on_data`, `on_close`,
`on_non_finite`, `is_known_run`) is a bug in the caller: it stops the
receiving thread, is kept in `receiver.error` and re-raised by `stop()`.

Nothing here imports JAX: solver processes that only send stay light.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable
from typing import Any

import numpy as np
import zmq
from zmq.utils.monitor import parse_monitor_message

from .._checks import check_int
from . import _sockets
from ._secret import check_secret
from ._sockets import HANDSHAKE_REFUSED, MAXMSGSIZE_SLACK, check_address, curve_keys
from ._wire import (
    REJECT_REASONS,
    Message,
    RejectedMessage,
    Schema,
    check_finite,
    decode,
    max_message_bytes,
)


_POLL_MS = 100
#: Seconds between two warning lines about rejected messages.
WARNING_INTERVAL = 10.0
_DETAIL_CHARS = 200  # of a rejection's text in a warning line
_BATCH = 256  # messages handled between two checks of the stop flag
_log = logging.getLogger(__name__)


def _check_callable(name: str, value: Any) -> Callable:
    if not callable(value):
        raise ValueError(f"`{name}` must be callable, got {value!r}.")
    return value


class SampleReceiver:
    """Server side: binds a PULL socket; a background thread receives, decodes,
    de-duplicates and hands accepted samples on.

    **Arguments:**

    - `schema`: what every data message must carry (`Schema`).
    - `secret`: the study's secret (bytes, >= 16).
    - `on_open`, `on_data`, `on_close`: called from the receiving thread with
      each accepted `Message` of that kind. The arrays of a data message are
      read-only views of the received bytes: copy them into the buffer.
      `on_data` may block (back-pressure).
    - `is_known_run`: `(run, attempt) -> bool`; a message of an unknown run is
      rejected as `"unknown_run"`.
    - `on_non_finite`: called with each data message of a known run that was
      rejected as `"non_finite"` (its step is not recorded as accepted).
    - `address`: the endpoint to bind; `None` binds a random loopback port
      `"tcp://127.0.0.1:*"`. TCP endpoints use CURVE (see above).
      `"ipc://PATH"` works too; listen on other interfaces only by passing
      such an address explicitly.
    - `accepted`: sample ids `(run, step)` accepted before a restart (from a
      checkpoint's `accepted_ids()`); they count as already accepted.
    - `hwm`: how many messages ZeroMQ queues on the server (`RCVHWM`).

    After `start()`, `address` is the endpoint clients connect to (the real
    port when binding `*`). Use as a context manager (`start` / `stop`).
    """

    def __init__(
        self,
        schema: Schema,
        secret: bytes,
        *,
        on_open: Callable[[Message], None],
        on_data: Callable[[Message], None],
        on_close: Callable[[Message], None],
        is_known_run: Callable[[int, int], bool] = lambda run, attempt: True,
        on_non_finite: Callable[[Message], None] = lambda message: None,
        address: str | None = None,
        accepted: Iterable[tuple[int, int]] = (),
        hwm: int = 64,
    ):
        if not isinstance(schema, Schema):
            raise ValueError(f"`schema` must be a `Schema`, got {schema!r}.")
        self.schema = schema
        self._secret = check_secret(secret)
        self._on_open = _check_callable("on_open", on_open)
        self._on_data = _check_callable("on_data", on_data)
        self._on_close = _check_callable("on_close", on_close)
        self._is_known_run = _check_callable("is_known_run", is_known_run)
        self._on_non_finite = _check_callable("on_non_finite", on_non_finite)
        self.address = check_address("tcp://127.0.0.1:*" if address is None else address)
        self._hwm = check_int("hwm", hwm, minimum=1)
        ids = np.asarray(list(accepted), dtype=np.int64).reshape(-1, 2)
        self._accepted_list = [(int(run), int(step)) for run, step in ids]
        self._accepted_set = set(self._accepted_list)
        if len(self._accepted_set) != len(self._accepted_list):
            raise ValueError("`accepted` must not list a sample id twice.")
        self._in_flight: tuple[int, int] | None = None
        self._announced: set[tuple[str, int, int]] = set()  # (kind, run, attempt)
        self._counters = dict.fromkeys(
            ["accepted", "duplicates", "opened", "closed", "rejected"]
            + [f"rejected_{reason}" for reason in REJECT_REASONS],
            0,
        )
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._thread: threading.Thread | None = None
        self._context: zmq.Context | None = None
        self._socket: zmq.Socket | None = None
        self._monitor: zmq.Socket | None = None
        self._in_multipart = False  # discarding the rest of a multipart message
        self._last_activity = time.monotonic()
        self._unreported: dict[str, int] = {}  # rejections since the last warning
        self._last_rejection = ""
        self._next_warning = 0.0
        self._stopped = False
        self.error: BaseException | None = None

    # lifecycle

    def start(self) -> None:
        """Binds the socket and starts the receiving thread."""
        if self._thread is not None or self._stopped:
            raise RuntimeError("a SampleReceiver can be started only once.")
        context = zmq.Context(io_threads=1)
        socket = context.socket(zmq.PULL)
        try:
            socket.setsockopt(zmq.LINGER, 0)
            socket.setsockopt(zmq.RCVHWM, self._hwm)
            limit = max_message_bytes(self.schema) + MAXMSGSIZE_SLACK
            socket.setsockopt(zmq.MAXMSGSIZE, limit)
            if _sockets.use_curve(self.address):
                keys = curve_keys(self._secret)
                socket.curve_secretkey = keys["server_secret"]
                socket.curve_publickey = keys["server_public"]
                socket.curve_server = True
            monitor = socket.get_monitor_socket(HANDSHAKE_REFUSED)
            socket.bind(self.address)
            self.address = socket.getsockopt_string(zmq.LAST_ENDPOINT)
        except BaseException:
            socket.close(linger=0)
            context.destroy(linger=0)
            raise
        self._context, self._socket, self._monitor = context, socket, monitor
        self._thread = threading.Thread(target=self._run, name="sciml-online-receiver", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Stops the thread (within ~100 ms unless a callback blocks), closes
        the socket and context, and re-raises a callback's exception if one
        stopped the receiver."""
        if self._stopped:
            return
        self._stopped = True
        self._stopping.set()
        if self._thread is not None:
            self._thread.join()
        self._warn_rejections(force=True)
        if self._socket is not None:
            self._socket.disable_monitor()
            self._monitor.close(linger=0)
            self._socket.close(linger=0)
            self._context.term()
            self._socket = self._context = self._monitor = None
        if self.error is not None:
            raise self.error

    def __enter__(self) -> SampleReceiver:
        self.start()
        return self

    def __exit__(self, *exc_info) -> None:
        self.stop()

    # state (thread-safe reads)

    def accepted_ids(self) -> np.ndarray:
        """The accepted sample ids `(run, step)` in acceptance order, shape
        `(n, 2)`, int64 (restored ones first): part of a checkpoint."""
        with self._lock:
            return np.array(self._accepted_list, dtype=np.int64).reshape(-1, 2)

    def in_flight(self) -> tuple[int, int] | None:
        """The id whose `on_data` call has not returned yet, if any."""
        with self._lock:
            return self._in_flight

    def counters(self) -> dict[str, int]:
        """Counts of `"accepted"`, `"duplicates"`, `"opened"`, `"closed"`,
        `"rejected"` (total) and `"rejected_<reason>"` for each of
        `REJECT_REASONS`, since this receiver was created."""
        with self._lock:
            return dict(self._counters)

    @property
    def running(self) -> bool:
        """Whether the receiving thread is alive."""
        return self._thread is not None and self._thread.is_alive()

    def wait_idle(self, idle_s: float = 0.3, timeout_s: float = 30.0) -> bool:
        """Waits until no message has arrived for `idle_s` seconds (or the
        thread ended); `False` if that did not happen within `timeout_s`."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if not self.running or time.monotonic() - self._last_activity >= idle_s:
                return True
            time.sleep(min(0.05, idle_s))
        return False

    # the receiving thread

    def _run(self) -> None:
        socket, monitor = self._socket, self._monitor
        poller = zmq.Poller()
        poller.register(socket, zmq.POLLIN)
        poller.register(monitor, zmq.POLLIN)
        try:
            while not self._stopping.is_set():
                ready = dict(poller.poll(_POLL_MS))
                if monitor in ready:
                    self._count_failed_handshakes(monitor)
                if socket not in ready:
                    self._warn_rejections()
                    continue
                for _ in range(_BATCH):
                    data = self._receive(socket)
                    if data is None:
                        break
                    self._last_activity = time.monotonic()
                    self._handle(data)
                    if self.error is not None or self._stopping.is_set():
                        break
                if self.error is not None:
                    return
        except BaseException as error:  # a ZeroMQ failure: keep it for stop()
            self.error = error

    def _receive(self, socket: zmq.Socket) -> bytes | None:
        """The next single-frame message, or `None` when none is queued. The
        frames of a multipart message are dropped one by one as they arrive
        (the receiver never waits for, nor keeps, its end), and the message
        is counted once as malformed."""
        while True:
            try:
                frame = socket.recv(zmq.NOBLOCK)
            except zmq.Again:
                return None
            more = socket.getsockopt(zmq.RCVMORE)
            if self._in_multipart or more:
                if not self._in_multipart:
                    self._reject("malformed", "malformed: a multipart message (1 frame expected)")
                self._in_multipart = bool(more)
                continue
            return frame

    def _count_failed_handshakes(self, monitor: zmq.Socket) -> None:
        """Counts each refused CURVE handshake (a peer without the secret) as `auth`."""
        while True:
            try:
                event = parse_monitor_message(monitor.recv_multipart(zmq.NOBLOCK))
            except zmq.Again:
                return
            if event["event"] & HANDSHAKE_REFUSED:
                self._reject(
                    "auth",
                    f"auth: a peer failed the connection handshake (code {event['value']})",
                )

    def _reject(self, reason: str, detail: str) -> None:
        """Counts a rejected message and warns about it (rate-limited)."""
        _log.debug("rejected a message: %s", detail)
        with self._lock:
            self._counters[f"rejected_{reason}"] += 1
            self._counters["rejected"] += 1
            self._unreported[reason] = self._unreported.get(reason, 0) + 1
            self._last_rejection = detail[:_DETAIL_CHARS]
        self._warn_rejections()

    def _warn_rejections(self, force: bool = False) -> None:
        """One warning line for the rejections since the last one, if any and
        if `WARNING_INTERVAL` has passed since it (or `force`)."""
        now = time.monotonic()
        with self._lock:
            if not self._unreported or (now < self._next_warning and not force):
                return
            counts, self._unreported = self._unreported, {}
            last, self._next_warning = self._last_rejection, now + WARNING_INTERVAL
        _log.warning(
            "rejected %d messages (%s) at %s since the last report; the last: %s",
            sum(counts.values()),
            ", ".join(f"{reason}: {n}" for reason, n in sorted(counts.items())),
            self.address,
            last,
        )

    def _handle(self, data: bytes) -> None:
        try:
            message = decode(data, self._secret, self.schema)
        except RejectedMessage as error:
            self._reject(error.reason, str(error))
            return
        except Exception as error:  # never let a bad message stop the receiver
            self._reject("malformed", f"malformed: could not decode it ({error!r})")
            return
        try:
            if not self._is_known_run(message.run, message.attempt):
                self._reject(
                    "unknown_run", f"unknown_run: run {message.run}, attempt {message.attempt}"
                )
                return
            if message.kind == "data":
                try:
                    check_finite(message)
                except RejectedMessage as error:
                    self._reject(error.reason, str(error))
                    self._on_non_finite(message)
                    return
                key = (message.run, message.step)
                with self._lock:
                    if key in self._accepted_set:
                        self._counters["duplicates"] += 1
                        return
                    self._accepted_set.add(key)
                    self._accepted_list.append(key)
                    self._counters["accepted"] += 1
                    self._in_flight = key
                self._on_data(message)
                with self._lock:
                    self._in_flight = None
            else:
                key = (message.kind, message.run, message.attempt)
                with self._lock:
                    if key in self._announced:
                        self._counters["duplicates"] += 1
                        return
                    self._announced.add(key)
                    self._counters["opened" if message.kind == "open" else "closed"] += 1
                (self._on_open if message.kind == "open" else self._on_close)(message)
        except BaseException as error:  # a bug in a callback: surface it in stop()
            self.error = error
