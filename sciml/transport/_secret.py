"""The study's secret: made, checked, and carried to a solver process.

A study's messages are authenticated with a random per-study secret (HMAC, and
over TCP the CURVE keys derived from it). It reaches a solver process through
the environment variable `SECRET_ENV`, hex-encoded (`secret_to_env` /
`secret_from_env`), or a file of mode 0600 (`write_secret` / `read_secret`),
never the command line, which other users of the machine can read.
"""

from __future__ import annotations

import os
import secrets
from collections.abc import Mapping
from typing import Any


#: The environment variable that carries the study's secret (hex) to a solver process.
SECRET_ENV = "SCIML_ONLINE_SECRET"
MIN_SECRET_BYTES = 16


def new_secret() -> bytes:
    """A fresh random per-study secret (32 bytes)."""
    return secrets.token_bytes(32)


def check_secret(secret: Any) -> bytes:
    """Returns `secret` if it is `bytes` of at least `MIN_SECRET_BYTES`; raises otherwise."""
    if not isinstance(secret, bytes) or len(secret) < MIN_SECRET_BYTES:
        shown = f"{len(secret)} bytes" if isinstance(secret, bytes) else type(secret).__name__
        raise ValueError(
            f"`secret` must be bytes of length >= {MIN_SECRET_BYTES} (e.g. from "
            f"`new_secret()`), got {shown}."
        )
    return secret


def secret_to_env(
    secret: bytes, env: Mapping[str, str] | None = None, *, var: str = SECRET_ENV
) -> dict[str, str]:
    """A copy of `env` (default `os.environ`) with the secret, hex-encoded, in
    `var`: pass it as a solver process's environment."""
    env = dict(os.environ if env is None else env)
    env[var] = check_secret(secret).hex()
    return env


def secret_from_env(var: str = SECRET_ENV) -> bytes:
    """The secret that `secret_to_env` put into this process's environment."""
    value = os.environ.get(var)
    if value is None:
        raise KeyError(f"the environment variable {var!r} (the study's secret) is not set.")
    try:
        secret = bytes.fromhex(value)
    except ValueError:
        raise ValueError(f"the environment variable {var!r} is not a hex string.") from None
    return check_secret(secret)


def write_secret(path: str | os.PathLike, secret: bytes) -> None:
    """Writes the secret, hex-encoded, to `path`, readable by its owner only (mode 0600)."""
    data = check_secret(secret).hex().encode("ascii")
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        os.fchmod(descriptor, 0o600)  # also when the file existed with another mode
        os.write(descriptor, data)
    finally:
        os.close(descriptor)


def read_secret(path: str | os.PathLike) -> bytes:
    """The secret that `write_secret` wrote to `path`."""
    with open(path, encoding="ascii") as file:
        text = file.read().strip()
    try:
        secret = bytes.fromhex(text)
    except ValueError:
        raise ValueError(f"{os.fspath(path)!r} does not hold a hex-encoded secret.") from None
    return check_secret(secret)
