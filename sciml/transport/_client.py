"""The solvers' side of the transport: `SolverClient` sends one run's messages.

`open(params) → send(step, fields) → close(status)`, each message the
single-frame format of `_wire`, over a ZeroMQ PUSH socket (CURVE over TCP, see
`_sockets`). `close` waits until the queued messages were delivered, so a run
that ends cleanly has reached the trainer. Nothing here imports JAX.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

import zmq
from zmq.utils.monitor import parse_monitor_message

from .._checks import check_int
from . import _sockets
from ._secret import SECRET_ENV, check_secret
from ._sockets import CLIENT_EVENTS, check_address, secure_client_socket
from ._status import CloseStatus
from ._wire import encode_close, encode_data, encode_open


class SolverClient:
    """Solver side: `open(params)`, then `send(step, fields)` per time step,
    then `close(status)`.

    **Arguments:**

    - `address`: the receiver's `address`.
    - `secret`: the study's secret (see `secret_from_env`, `read_secret`).
    - `run`: this run's id (>= 0); `attempt`: how many times it was restarted.
    - `sndhwm`: how many messages queue here before `send` blocks.
    - `send_timeout_ms`: how long `send` may block on a full queue before it
      raises `TimeoutError` (None: forever). A solver whose trainer is gone
      (killed, or restarted on another address) then exits instead of
      waiting forever.
    - `linger_ms`: how long `close` waits for queued messages to be delivered
      (default: `send_timeout_ms`, or 30 s without one); if they were not,
      `close` raises `TimeoutError`.

    As a context manager, an exception inside the block closes the run with
    status `"error: <type>: <message>"` (and propagates); otherwise `"ok"`.

    The `TimeoutError` says why, as far as the client can tell: over TCP it
    watches its connection, so it tells a trainer that refuses its CURVE
    handshake (the two sides do not share the study's secret: the receiver
    cuts the connection without a reply, and the client retries) from one it
    cannot reach and from one that is connected but takes nothing. Over ipc a
    message with another secret is delivered and rejected by its HMAC on the
    trainer's side (counted as `auth` and warned about there), unseen here.
    """

    def __init__(
        self,
        address: str,
        secret: bytes,
        *,
        run: int,
        attempt: int = 0,
        sndhwm: int = 16,
        send_timeout_ms: int | None = None,
        linger_ms: int | None = None,
    ):
        self.address = check_address(address)
        self._secret = check_secret(secret)
        self.run = check_int("run", run, minimum=0)
        self.attempt = check_int("attempt", attempt, minimum=0)
        sndhwm = check_int("sndhwm", sndhwm, minimum=1)
        if send_timeout_ms is not None:
            send_timeout_ms = check_int("send_timeout_ms", send_timeout_ms, minimum=1)
        self._send_timeout_ms = send_timeout_ms
        if linger_ms is None:
            linger_ms = 30000 if send_timeout_ms is None else send_timeout_ms
        self._linger_ms = check_int("linger_ms", linger_ms, minimum=0)
        self._opened = self._closed = False
        self._context = zmq.Context(io_threads=1)
        self._socket = self._context.socket(zmq.PUSH)
        self._socket.setsockopt(zmq.SNDHWM, sndhwm)
        self._socket.setsockopt(zmq.LINGER, self._linger_ms)
        secure_client_socket(self._socket, self._secret, self.address)
        self._monitor = None
        if _sockets.use_curve(self.address):
            self._monitor = self._socket.get_monitor_socket(CLIENT_EVENTS)
        # what the monitor told so far: connections made, handshakes refused,
        # whether the latest handshake was accepted
        self._link = {"connected": 0, "refused": 0, "accepted": False}
        if send_timeout_ms is not None:
            self._socket.setsockopt(zmq.SNDTIMEO, send_timeout_ms)
        self._socket.connect(self.address)

    def open(self, params: Mapping[str, float]) -> None:
        """Announces the run with its parameters (names to finite floats)."""
        self._check_state("open")
        if self._opened:
            raise RuntimeError("`open` was already called for this run.")
        self._send(encode_open(self._secret, self.run, self.attempt, params))
        self._opened = True

    def send(self, step: int, fields: Mapping[str, Any]) -> None:
        """Sends time step `step` (arrays made little-endian C-contiguous);
        blocks while the server's queues are full."""
        self._check_state("send")
        if not self._opened:
            raise RuntimeError("call `open(params)` before `send`.")
        self._send(encode_data(self._secret, self.run, self.attempt, step, fields), copy=False)

    def _send(self, data: bytes, copy: bool = True) -> None:
        try:
            self._socket.send(data, copy=copy)
        except zmq.Again:
            raise self._timeout(self._send_timeout_ms) from None

    def _watch(self, wait_ms: int = 0) -> None:
        """Reads the connection events queued by the monitor; with `wait_ms`,
        waits up to that long for a handshake's outcome (accepted or refused)."""
        if self._monitor is None or self._monitor.closed:
            return
        deadline = time.monotonic() + wait_ms / 1000
        while True:
            try:
                event = parse_monitor_message(self._monitor.recv_multipart(zmq.NOBLOCK))
            except zmq.Again:
                left_ms = 1000 * (deadline - time.monotonic())
                if self._link["accepted"] or self._link["refused"] or left_ms <= 0:
                    return
                self._monitor.poll(max(1, round(left_ms)))
                continue
            if event["event"] == zmq.EVENT_CONNECTED:
                self._link["connected"] += 1
            elif event["event"] == zmq.EVENT_HANDSHAKE_SUCCEEDED:
                self._link["accepted"] = True
            else:  # the trainer cut the connection during the handshake
                self._link["refused"] += 1
                self._link["accepted"] = False

    def _timeout(self, ms: int) -> TimeoutError:
        """The error of a message not taken within `ms`, with its likely cause."""
        self._watch()
        text = f"run {self.run}: the trainer at {self.address} took no message for {ms / 1000:g} s"
        link = self._link
        if self._monitor is not None and link["refused"] and not link["accepted"]:
            # a CURVE server with other keys cannot open our hello: it closes
            # the connection without a reply (no ZAP, so no error status)
            text += (
                f": it refused this process's connection {link['refused']} times at the "
                "CURVE handshake, which fails when the two sides do not share the "
                "study's secret. Check that this process was given the secret of the "
                f"trainer's study (the environment variable {SECRET_ENV}, or the secret "
                "file it reads), not one of another or an earlier study."
            )
        elif self._monitor is not None and not link["connected"]:
            text += ": no connection to it could be made; is it still running?"
        else:
            text += "; is it still running?"
        return TimeoutError(text)

    def close(self, status: str = CloseStatus.OK) -> None:
        """Sends the close message, then closes the socket, waiting up to
        `linger_ms` for queued messages to be delivered; raises `TimeoutError`
        if they were not (the trainer is gone). Idempotent."""
        if self._closed:
            return
        self._closed = True
        queued = True
        try:
            # a full queue to a server that is gone must not block forever
            self._socket.setsockopt(zmq.SNDTIMEO, self._linger_ms)
            try:
                self._socket.send(encode_close(self._secret, self.run, self.attempt, status))
            except zmq.Again:
                queued = False
        finally:
            start = time.monotonic()
            if self._monitor is not None:
                # the context ends only once the monitor is closed: learn how
                # the connection went first (within the linger)
                self._watch(self._linger_ms)
                self._socket.disable_monitor()
                self._monitor.close(linger=0)
            spent_ms = 1000 * (time.monotonic() - start)
            self._socket.close(linger=max(0, round(self._linger_ms - spent_ms)))
            self._context.term()  # returns once all is delivered, or at the linger
            waited_ms = 1000 * (time.monotonic() - start)
        # ZeroMQ's timers run on a cached clock of 1 ms precision: the linger
        # can end up to ~1 ms early by ours (measured: 199.7 ms for 200 ms).
        slack_ms = min(5.0, self._linger_ms / 2)
        if self._linger_ms and (not queued or waited_ms >= self._linger_ms - slack_ms):
            raise self._timeout(self._linger_ms)

    @property
    def closed(self) -> bool:
        return self._closed

    def _check_state(self, what: str) -> None:
        if self._closed:
            raise RuntimeError(f"cannot `{what}`: this SolverClient is closed.")

    def __enter__(self) -> SolverClient:
        return self

    def __exit__(self, exc_type, exc, traceback) -> None:
        if exc_type is None:
            self.close(CloseStatus.OK)
            return
        if exc_type is TimeoutError:  # the trainer is gone: nothing would arrive
            self._linger_ms = 0
        try:
            self.close(CloseStatus.error(f"{exc_type.__name__}: {exc}"))
        except TimeoutError:
            pass  # the error in the block is the one to report
