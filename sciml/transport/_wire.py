"""The message format between solver processes and the training server.

Pure functions, no sockets. A message is one ZeroMQ frame (never a multipart
message), the concatenation `prefix + header + payload + mac`:

- `prefix`: `len(header)` as 8 little-endian bytes (`PREFIX_BYTES`).
- `header`: a UTF-8 JSON object of at most `MAX_HEADER_BYTES` bytes,
  `{"magic": "sciml-online", "version": 1, "kind": "open" | "data" | "close",
  "run": int, "attempt": int, ...}` plus, by kind, `"params": {str: float}`
  (open), `"step": int` and `"fields": [{"name", "dtype", "shape"}, ...]`
  (data, in payload order), `"status": str` (close: `"ok"` or an error text).
- `payload`: the raw little-endian C-order bytes of the fields, concatenated in
  header order (empty for open and close).
- `mac`: HMAC-SHA256 (`MAC_BYTES`) with the study's secret over
  `prefix + header + payload` (the length prefix fixes where the header ends,
  so no bytes can move between header and payload under the same MAC).

One frame, because ZeroMQ bounds frames, not messages: `zmq.MAXMSGSIZE` set to
`max_message_bytes(schema)` makes ZeroMQ drop a connection that sends a larger
frame before allocating it, while the frames of a multipart message would each
pass it.

Why this shape: no pickle anywhere (unpickling runs code chosen by whoever can
reach the socket), so the header is JSON and arrays travel as raw bytes that
`np.frombuffer` views without a copy. The receiver trusts nothing before the
MAC: `decode` checks the sizes against fixed caps and the schema
first, then the MAC (`hmac.compare_digest`, constant time), and only then parses
JSON. It never allocates from a size an untrusted message states: every length
it uses comes from the `Schema` the server was built with, so a hostile header
cannot make it reserve memory. The order of the checks, and the reason each
failure is reported with, is

| check | reason |
| --- | --- |
| message <= `max_message_bytes(schema)` | `oversized` |
| prefix and MAC fit, header <= `MAX_HEADER_BYTES` | `malformed` / `oversized` |
| payload <= `Schema.max_payload_bytes()` | `oversized` |
| MAC | `auth` |
| JSON, magic, version, kind, key set and types | `malformed` |
| field names and order as in the schema | `malformed` |
| field dtypes | `dtype` |
| field shapes | `shape` |
| payload length == sum of the field sizes | `malformed` |
| `0 <= step < n_steps` | `step` |

A known-run check (`unknown_run`) needs the run table and is the receiver's
job, as is `check_finite` (`non_finite`), which it runs on each data message
that passed `decode`: a NaN or infinity fails the run that sent it, so the
receiver needs the message's run and attempt. A replayed message passes
`decode` (it carries a valid MAC); the receiver drops it as a duplicate by its
sample id `(run, step)`, or by `(run, attempt)` for an open or close.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import hmac
import json
import math
import numbers
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from .._checks import check_int, is_int
from ._secret import check_secret
from ._status import CloseStatus


MAGIC = "sciml-online"
VERSION = 1
MAX_HEADER_BYTES = 16384
PREFIX_BYTES = 8
MAC_BYTES = 32
KINDS = ("open", "data", "close")
REJECT_REASONS = (
    "auth",
    "malformed",
    "oversized",
    "dtype",
    "shape",
    "step",
    "unknown_run",
    "non_finite",
)
# Fixed-size numeric types only: no object, string or structured dtypes on the wire.
DTYPES = (
    "bool",
    "int8",
    "int16",
    "int32",
    "int64",
    "uint8",
    "uint16",
    "uint32",
    "uint64",
    "float16",
    "float32",
    "float64",
    "complex64",
    "complex128",
)
# A close status longer than this is cut (an error text with a long traceback
# must still fit into the header).
MAX_STATUS_CHARS = 2000

_HEADER_KEYS = {
    "open": {"magic", "version", "kind", "run", "attempt", "params"},
    "data": {"magic", "version", "kind", "run", "attempt", "step", "fields"},
    "close": {"magic", "version", "kind", "run", "attempt", "status"},
}


class RejectedMessage(ValueError):
    """A received message that `decode` (or the receiver) refuses.

    `reason` is one of `REJECT_REASONS`; the message text says what was wrong.
    """

    def __init__(self, reason: str, detail: str):
        if reason not in REJECT_REASONS:
            raise ValueError(f"`reason` must be one of {REJECT_REASONS}, got {reason!r}.")
        super().__init__(f"{reason}: {detail}")
        self.reason = reason


@dataclasses.dataclass(frozen=True)
class FieldSpec:
    """One array every data message carries: its name, shape and numpy dtype
    name (one of `DTYPES`, e.g. `"float32"`)."""

    name: str
    shape: tuple[int, ...]
    dtype: str

    def __post_init__(self):
        if not isinstance(self.name, str) or not self.name:
            raise ValueError(f"`name` must be a non-empty string, got {self.name!r}.")
        shape = tuple(self.shape) if isinstance(self.shape, Sequence) else None
        if shape is None or not all(is_int(n) and n >= 0 for n in shape):
            raise ValueError(
                f"`shape` of field {self.name!r} must be a tuple of integers >= 0, "
                f"got {self.shape!r}."
            )
        try:
            dtype = np.dtype(self.dtype).name
        except TypeError:
            dtype = None
        if dtype not in DTYPES:
            raise ValueError(
                f"`dtype` of field {self.name!r} must be one of {DTYPES}, got {self.dtype!r}."
            )
        object.__setattr__(self, "shape", tuple(int(n) for n in shape))
        object.__setattr__(self, "dtype", dtype)

    @property
    def nbytes(self) -> int:
        """Bytes of this field in a payload."""
        return math.prod(self.shape) * np.dtype(self.dtype).itemsize


@dataclasses.dataclass(frozen=True)
class Schema:
    """What every data message of a study must carry.

    **Arguments:**

    - `fields`: the arrays of one time step, in payload order (names unique).
    - `n_steps`: number of time steps of one run; valid steps are
      `0 .. n_steps - 1`.
    """

    fields: tuple[FieldSpec, ...]
    n_steps: int

    def __post_init__(self):
        fields = tuple(self.fields) if isinstance(self.fields, Sequence) else ()
        if not fields or not all(isinstance(f, FieldSpec) for f in fields):
            raise ValueError(
                f"`fields` must be a non-empty sequence of `FieldSpec`, got {self.fields!r}."
            )
        names = [f.name for f in fields]
        if len(set(names)) != len(names):
            raise ValueError(f"`fields` must have unique names, got {names}.")
        if not is_int(self.n_steps) or self.n_steps < 1:
            raise ValueError(f"`n_steps` must be a positive integer, got {self.n_steps!r}.")
        object.__setattr__(self, "fields", fields)
        object.__setattr__(self, "n_steps", int(self.n_steps))

    def max_payload_bytes(self) -> int:
        """The payload size of a data message (the sum of the field sizes)."""
        return self._layout[-1][3] if self._layout else 0

    @functools.cached_property
    def _layout(self) -> tuple[tuple[str, np.dtype, int, int, tuple[int, ...]], ...]:
        """Per field: name, wire dtype, element count, end offset in the payload, shape."""
        layout, end = [], 0
        for f in self.fields:
            end += f.nbytes
            wire = np.dtype(f.dtype).newbyteorder("<")
            layout.append((f.name, wire, math.prod(f.shape), end, f.shape))
        return tuple(layout)

    @classmethod
    def from_example(cls, example: Mapping[str, Any], n_steps: int) -> Schema:
        """The schema of messages that carry arrays like `example` (a dict of
        name to array, in payload order)."""
        if not isinstance(example, Mapping):
            raise ValueError(f"`example` must be a dict of name to array, got {example!r}.")
        fields = []
        for name, value in example.items():
            array = np.asarray(value)
            fields.append(FieldSpec(name, array.shape, array.dtype.name))
        return cls(tuple(fields), n_steps)


@dataclasses.dataclass(frozen=True, eq=False)
class Message:
    """A decoded, authenticated message.

    `step` and `fields` are set for `kind == "data"` (the arrays are read-only
    views of the received payload: copy them to keep them), `params` for
    `"open"`, `status` for `"close"`; the others are `None`.
    """

    kind: str
    run: int
    attempt: int
    step: int | None = None
    params: dict[str, float] | None = None
    status: str | None = None
    fields: dict[str, np.ndarray] | None = None


def max_message_bytes(schema: Schema) -> int:
    """The size of the largest message a receiver of `schema` accepts (a data
    message with a header of `MAX_HEADER_BYTES`)."""
    return PREFIX_BYTES + MAX_HEADER_BYTES + schema.max_payload_bytes() + MAC_BYTES


def encode_open(secret: bytes, run: int, attempt: int, params: Mapping[str, Any]) -> bytes:
    """The message announcing run `run` (attempt `attempt`) with its parameters."""
    if not isinstance(params, Mapping) or not all(isinstance(k, str) for k in params):
        raise ValueError(f"`params` must be a dict of str to float, got {params!r}.")
    values = {}
    for key, value in params.items():
        if isinstance(value, bool) or not isinstance(value, numbers.Real):
            raise ValueError(f"`params[{key!r}]` must be a real number, got {value!r}.")
        if not math.isfinite(value):
            raise ValueError(f"`params[{key!r}]` must be finite, got {value!r}.")
        values[key] = float(value)
    return _message(secret, _header("open", run, attempt, params=values), [])


def encode_data(
    secret: bytes, run: int, attempt: int, step: int, fields: Mapping[str, Any]
) -> bytes:
    """The message of one time step: `fields` maps names to arrays (anything
    `np.asarray` takes, e.g. JAX arrays), sent in the dict's order."""
    step = check_int("step", step, minimum=0)
    if not isinstance(fields, Mapping) or not fields:
        raise ValueError(f"`fields` must be a non-empty dict of name to array, got {fields!r}.")
    specs, arrays = [], []
    for name, value in fields.items():
        array = np.asarray(value)
        if not isinstance(name, str) or array.dtype.name not in DTYPES:
            raise ValueError(
                f"`fields` must map names (str) to arrays of one of {DTYPES}, got "
                f"{name!r}: {array.dtype}."
            )
        # little-endian, C order, one contiguous block
        array = array.astype(array.dtype.newbyteorder("<"), order="C", copy=False)
        specs.append({"name": name, "dtype": array.dtype.name, "shape": list(array.shape)})
        arrays.append(memoryview(array.reshape(-1).view(np.uint8)))
    return _message(secret, _header("data", run, attempt, step=step, fields=specs), arrays)


def encode_close(secret: bytes, run: int, attempt: int, status: str = CloseStatus.OK) -> bytes:
    """The message ending run `run`: `status` is `"ok"` or an error text (cut to
    `MAX_STATUS_CHARS` characters)."""
    if not isinstance(status, str):
        raise ValueError(f"`status` must be a string, got {status!r}.")
    return _message(secret, _header("close", run, attempt, status=status[:MAX_STATUS_CHARS]), [])


def decode(data: object, secret: bytes, schema: Schema) -> Message:
    """Checks and decodes one received message.

    **Arguments:**

    - `data`: the received frame (`bytes`, `bytearray` or `memoryview`).
    - `secret`: the study's secret.
    - `schema`: what data messages must carry.

    **Returns:** the `Message`.

    **Raises:** `RejectedMessage` with `reason` one of `REJECT_REASONS` (see the
    module docstring for the order of the checks).
    """
    check_secret(secret)
    if not isinstance(data, bytes | bytearray | memoryview):
        raise RejectedMessage("malformed", f"a message must be bytes, got {type(data).__name__}.")
    data = memoryview(data).cast("B")
    if len(data) > max_message_bytes(schema):
        raise RejectedMessage(
            "oversized", f"message of {len(data)} bytes > {max_message_bytes(schema)}."
        )
    if len(data) < PREFIX_BYTES + MAC_BYTES:
        raise RejectedMessage("malformed", f"message of {len(data)} bytes is too short.")
    size = int.from_bytes(data[:PREFIX_BYTES], "little")
    if size > MAX_HEADER_BYTES:
        raise RejectedMessage(
            "oversized", f"header of {size} bytes > MAX_HEADER_BYTES = {MAX_HEADER_BYTES}."
        )
    if PREFIX_BYTES + size + MAC_BYTES > len(data):
        raise RejectedMessage("malformed", f"header of {size} bytes overruns the message.")
    header = data[PREFIX_BYTES : PREFIX_BYTES + size]
    payload = data[PREFIX_BYTES + size : len(data) - MAC_BYTES]
    mac = data[len(data) - MAC_BYTES :]
    cap = schema.max_payload_bytes()
    if len(payload) > cap:
        raise RejectedMessage("oversized", f"payload of {len(payload)} bytes > {cap}.")
    if not hmac.compare_digest(_mac(secret, data[: len(data) - MAC_BYTES]), mac):
        raise RejectedMessage("auth", "the MAC does not match (wrong secret or altered message).")

    head = _parse_header(header)
    kind, run, attempt = head["kind"], head["run"], head["attempt"]
    if kind == "open":
        return Message(kind, run, attempt, params=head["params"])
    if kind == "close":
        return Message(kind, run, attempt, status=head["status"])

    check_field_specs(head["fields"], schema)
    if len(payload) != cap:
        raise RejectedMessage("malformed", f"payload of {len(payload)} bytes != {cap}.")
    step = head["step"]
    if not 0 <= step < schema.n_steps:
        raise RejectedMessage("step", f"step {step} outside 0 .. {schema.n_steps - 1}.")

    arrays, offset = {}, 0
    for name, dtype, count, end, shape in schema._layout:
        array = np.frombuffer(payload, dtype, count=count, offset=offset).reshape(shape)
        array.flags.writeable = False
        arrays[name] = array
        offset = end
    return Message(kind, run, attempt, step=step, fields=arrays)


def check_field_specs(specs: list[dict[str, Any]], schema: Schema) -> None:
    """Raises `RejectedMessage` unless a data header's field specs (`name`,
    `dtype`, `shape` each) are the schema's fields, in order: `malformed` for
    other names, then `dtype`, then `shape`."""
    names = [spec["name"] for spec in specs]
    expected = [f.name for f in schema.fields]
    if names != expected:
        raise RejectedMessage("malformed", f"fields {names} != the schema's {expected}.")
    for spec, field in zip(specs, schema.fields):
        if spec["dtype"] != field.dtype:
            raise RejectedMessage(
                "dtype", f"field {field.name!r} has dtype {spec['dtype']!r}, not {field.dtype!r}."
            )
    for spec, field in zip(specs, schema.fields):
        if tuple(spec["shape"]) != field.shape:
            raise RejectedMessage(
                "shape", f"field {field.name!r} has shape {spec['shape']}, not {list(field.shape)}."
            )


def check_finite(message: Message) -> None:
    """Raises `RejectedMessage` (`non_finite`) if a floating or complex field of
    a data message holds a NaN or an infinity (one vectorised pass per field)."""
    for name, array in (message.fields or {}).items():
        if array.dtype.kind in "fc" and not np.isfinite(array).all():
            count = array.size - int(np.count_nonzero(np.isfinite(array)))
            raise RejectedMessage(
                "non_finite",
                f"run {message.run} (attempt {message.attempt}), step {message.step}: "
                f"field {name!r} has {count} non-finite values.",
            )


def _header(kind: str, run: int, attempt: int, **extra: Any) -> bytes:
    head = {
        "magic": MAGIC,
        "version": VERSION,
        "kind": kind,
        "run": check_int("run", run, minimum=0),
        "attempt": check_int("attempt", attempt, minimum=0),
        **extra,
    }
    data = json.dumps(head, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
    data = data.encode("utf-8")
    if len(data) > MAX_HEADER_BYTES:
        raise ValueError(
            f"the {kind} header is {len(data)} bytes > MAX_HEADER_BYTES = {MAX_HEADER_BYTES} "
            "(too many or too long parameter or field names)."
        )
    return data


def _mac(secret: bytes, *parts: bytes | memoryview) -> bytes:
    mac = hmac.new(secret, digestmod=hashlib.sha256)
    for part in parts:
        mac.update(part)
    return mac.digest()


def _message(secret: bytes, header: bytes, payload: list[memoryview]) -> bytes:
    """`prefix + header + payload + mac`, the payload's parts copied once."""
    check_secret(secret)
    signed = [len(header).to_bytes(PREFIX_BYTES, "little"), header, *payload]
    return b"".join([*signed, _mac(secret, *signed)])


def _reject_constant(name: str) -> None:
    raise ValueError(f"{name} is not allowed")


# strict JSON: NaN and Infinity are not numbers here
_JSON = json.JSONDecoder(parse_constant=_reject_constant)


def _parse_header(header: memoryview) -> dict[str, Any]:
    """The header as a dict with checked keys and types; `RejectedMessage("malformed")`
    otherwise. JSON values are checked by exact type (`bool` is not an `int`)."""
    try:
        head = _JSON.decode(bytes(header).decode("utf-8"))
    except (ValueError, RecursionError) as error:  # UnicodeDecodeError is a ValueError
        raise RejectedMessage("malformed", f"header is not JSON ({error}).") from None

    def bad(what: str) -> RejectedMessage:
        return RejectedMessage("malformed", f"header: {what}.")

    if not isinstance(head, dict):
        raise bad("not a JSON object")
    if head.get("magic") != MAGIC:
        raise bad(f"magic is not {MAGIC!r}")
    if type(head.get("version")) is not int or head["version"] != VERSION:
        raise bad(f"version is not {VERSION}")
    kind = head.get("kind")
    if kind not in KINDS:
        raise bad(f"kind is not one of {KINDS}")
    if set(head) != _HEADER_KEYS[kind]:
        raise bad(f"keys {sorted(head)} != {sorted(_HEADER_KEYS[kind])}")
    for key in ("run", "attempt") + (("step",) if kind == "data" else ()):
        if type(head[key]) is not int or (key != "step" and head[key] < 0):
            raise bad(f"{key} is not an integer" + (" >= 0" if key != "step" else ""))
    if kind == "open":
        params = head["params"]
        if not isinstance(params, dict) or not all(
            isinstance(v, int | float) and not isinstance(v, bool) for v in params.values()
        ):
            raise bad("params is not an object of numbers")
        head["params"] = {k: float(v) for k, v in params.items()}
    elif kind == "close":
        if not isinstance(head["status"], str):
            raise bad("status is not a string")
    else:
        specs = head["fields"]
        if not isinstance(specs, list) or not all(
            isinstance(s, dict)
            and set(s) == {"name", "dtype", "shape"}
            and isinstance(s["name"], str)
            and isinstance(s["dtype"], str)
            and isinstance(s["shape"], list)
            and all(type(n) is int for n in s["shape"])
            for s in specs
        ):
            raise bad("fields is not a list of {name: str, dtype: str, shape: [int, ...]}")
    return head
