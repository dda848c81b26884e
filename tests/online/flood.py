"""A peer without the study's secret that floods a receiver, for the memory test.

Run as `python -m tests.online.flood ADDRESS MODE SECONDS MEGABYTES` (a TCP
address), in a process of its own so that its buffers are not counted as the
receiver's. It speaks ZeroMQ's wire protocol (ZMTP 3.0) by hand: a PUSH peer
with the NULL mechanism, i.e. without CURVE keys. (A pyzmq socket would not do:
it keeps an unterminated multipart message on the sender's side.) Modes:

- `multipart`: one multipart message of 20 kB frames, never terminated.
- `frame`: one frame that announces MEGABYTES and sends them.
- `raw`: zeros, not even a ZMTP greeting.

Each writes up to MEGABYTES, reconnecting whenever the receiver closes the
connection, stops after SECONDS and prints the megabytes the kernel took.
"""

from __future__ import annotations

import re
import socket
import sys
import time


GREETING = b"\xff" + bytes(8) + b"\x7f" + b"\x03\x00" + b"NULL".ljust(20, b"\0") + bytes(32)
_READY_BODY = b"\x05READY" + b"\x0bSocket-Type" + (4).to_bytes(4, "big") + b"PUSH"
READY = b"\x04" + bytes([len(_READY_BODY)]) + _READY_BODY


def _long_frame_header(size: int, more: bool) -> bytes:
    return bytes([0x02 | (0x01 if more else 0)]) + size.to_bytes(8, "big")


def stream(mode: str, megabytes: int):
    """The bytes a connection of `mode` writes, in chunks."""
    total = megabytes * 10**6
    if mode == "raw":
        yield from (bytes(65536) for _ in range(total // 65536))
        return
    yield GREETING + READY
    if mode == "frame":
        yield _long_frame_header(total, more=False)
        yield from (bytes(65536) for _ in range(total // 65536))
        return
    frame = _long_frame_header(20_000, more=True) + bytes(20_000)
    yield from (frame for _ in range(total // len(frame)))


def flood(address: str, mode: str, seconds: float, megabytes: int) -> float:
    host, port = re.fullmatch(r"tcp://(.+):(\d+)", address).groups()
    deadline, sent = time.monotonic() + seconds, 0
    while time.monotonic() < deadline and sent < megabytes * 10**6:
        try:
            with socket.create_connection((host, int(port)), timeout=1.0) as connection:
                for chunk in stream(mode, megabytes):
                    if time.monotonic() > deadline or sent >= megabytes * 10**6:
                        break
                    connection.sendall(chunk)
                    sent += len(chunk)
                else:
                    time.sleep(max(0.0, deadline - time.monotonic()))  # hold it open
        except OSError:  # the receiver closed the connection
            time.sleep(0.01)
    return sent / 1e6


if __name__ == "__main__":
    address, mode, seconds, megabytes = sys.argv[1:5]
    print(flood(address, mode, float(seconds), int(megabytes)))
