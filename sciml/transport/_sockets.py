"""The ZeroMQ side of the transport, shared by the receiver and the client:
endpoints, and the CURVE keys that authenticate a TCP connection.

A TCP endpoint uses ZeroMQ CURVE: the key pairs of both sides are derived from
the study's secret (`curve_keys`), so a peer without the secret fails the
handshake. An `ipc://` endpoint has no CURVE (see `SampleReceiver`).
"""

from __future__ import annotations

import hashlib
import hmac
import re
from socket import gethostname
from typing import Any

import zmq
from zmq.utils import z85

from ._secret import check_secret


# What CURVE adds to a frame on the wire (command name, nonce, box MAC, flags:
# 33 bytes); frames above the largest valid message by more are dropped by ZeroMQ.
MAXMSGSIZE_SLACK = 64
HANDSHAKE_FAILED = (
    zmq.EVENT_HANDSHAKE_FAILED_NO_DETAIL
    | zmq.EVENT_HANDSHAKE_FAILED_PROTOCOL
    | zmq.EVENT_HANDSHAKE_FAILED_AUTH
)
# The handshakes a receiver counts as refused peers (`auth` rejections): a peer
# without the secret, or without CURVE, fails with PROTOCOL (or AUTH). NO_DETAIL
# is a connection that dropped during its handshake (EPIPE, ECONNRESET): a solver
# process stopped, or closing, while it connected; it carried no message.
HANDSHAKE_REFUSED = zmq.EVENT_HANDSHAKE_FAILED_PROTOCOL | zmq.EVENT_HANDSHAKE_FAILED_AUTH
# What a client watches of its connection (TCP with CURVE): made, and its
# handshake accepted or refused.
CLIENT_EVENTS = zmq.EVENT_CONNECTED | zmq.EVENT_HANDSHAKE_SUCCEEDED | HANDSHAKE_FAILED


def check_address(address: Any) -> str:
    if not isinstance(address, str) or not address.startswith(("tcp://", "ipc://")):
        raise ValueError(
            "`address` must be a ZeroMQ endpoint 'tcp://HOST:PORT' or 'ipc://PATH', "
            f"got {address!r}."
        )
    return address


def connect_address(address: str) -> str:
    """The endpoint a client on another machine connects to, for a bound
    `address`: a wildcard host (`tcp://0.0.0.0:PORT`, `tcp://*:PORT`,
    `tcp://[::]:PORT`) becomes this machine's host name; others are returned
    as they are."""
    match = re.fullmatch(r"tcp://(0\.0\.0\.0|\*|\[::\]|::):(\d+)", address)
    if match is None:
        return address
    return f"tcp://{gethostname()}:{match.group(2)}"


def curve_keys(secret: bytes) -> dict[str, bytes]:
    """The CURVE key pairs (Z85-encoded) of a study's TCP transport, derived from
    its secret: `server_public`, `server_secret`, `client_public`,
    `client_secret`. A client must know `server_public` to complete the
    handshake (the server cannot open its hello otherwise), so it is kept as
    secret as the secret it comes from."""
    keys = {}
    for side in ("server", "client"):
        seed = hmac.new(check_secret(secret), f"sciml-online curve {side}".encode(), hashlib.sha256)
        secret_key = z85.encode(seed.digest())
        keys[f"{side}_secret"] = secret_key
        keys[f"{side}_public"] = zmq.curve_public(secret_key)
    return keys


def use_curve(address: str) -> bool:
    return address.startswith("tcp://") and zmq.has("curve")


def secure_client_socket(socket: zmq.Socket, secret: bytes, address: str) -> None:
    """Sets a client socket's CURVE keys for a TCP `address` (nothing for ipc)."""
    if use_curve(address):
        keys = curve_keys(secret)
        socket.curve_secretkey = keys["client_secret"]
        socket.curve_publickey = keys["client_public"]
        socket.curve_serverkey = keys["server_public"]
