"""The message format: round trips bit for bit, the MAC as specified, and every
reject reason triggered by a hand-built bad message."""

import ast
import hashlib
import hmac
import inspect
import json
import pickle

import numpy as np
import pytest

from sciml.transport import _client, _receiver, _secret, _sockets, _wire, new_secret
from sciml.transport._wire import (
    MAC_BYTES,
    MAX_HEADER_BYTES,
    PREFIX_BYTES,
    REJECT_REASONS,
    FieldSpec,
    RejectedMessage,
    Schema,
    decode,
    encode_close,
    encode_data,
    encode_open,
)


SECRET = bytes(range(32))
N_STEPS = 10


def example_fields(seed=0):
    """Float fields from random bits (NaN and Inf payloads included) and ints."""
    rng = np.random.default_rng(seed)
    return {
        "u": rng.integers(0, 2**32, (16, 16), dtype=np.uint32).view(np.float32),
        "v": rng.integers(0, 2**63, (3, 5), dtype=np.uint64).view(np.float64),
        "k": rng.integers(-(2**31), 2**31, (2, 3, 4), dtype=np.int32),
        "m": rng.integers(0, 256, (7,), dtype=np.uint8),
        "t": np.float64(0.25),
    }


@pytest.fixture
def schema():
    return Schema.from_example(example_fields(), N_STEPS)


def sign(header, payload=b"", secret=SECRET):
    """A message built by hand: `header` a dict (JSON-encoded here) or raw bytes."""
    if isinstance(header, dict):
        header = json.dumps(header).encode()
    prefix = len(header).to_bytes(8, "little")
    mac = hmac.new(secret, prefix + header + payload, hashlib.sha256).digest()
    return prefix + header + payload + mac


def split(message):
    """(prefix, header, payload, mac) of a message, cut by hand."""
    size = int.from_bytes(message[:8], "little")
    return message[:8], message[8 : 8 + size], message[8 + size : -32], message[-32:]


def data_header(schema, **changes):
    header = {
        "magic": "sciml-online",
        "version": 1,
        "kind": "data",
        "run": 3,
        "attempt": 0,
        "step": 4,
        "fields": [
            {"name": f.name, "dtype": f.dtype, "shape": list(f.shape)} for f in schema.fields
        ],
    }
    header.update(changes)
    return header


def payload_of(fields):
    return b"".join(
        np.ascontiguousarray(a).astype(a.dtype.newbyteorder("<")).tobytes() for a in fields.values()
    )


def assert_bits_equal(a, b):
    a, b = np.asarray(a), np.asarray(b)
    assert a.shape == b.shape and a.dtype == b.dtype
    assert a.tobytes() == b.tobytes()


def test_data_round_trip_bit_for_bit(schema):
    fields = example_fields()
    message = decode(encode_data(SECRET, 3, 2, 4, fields), SECRET, schema)
    assert (message.kind, message.run, message.attempt, message.step) == ("data", 3, 2, 4)
    assert message.params is None and message.status is None
    assert list(message.fields) == list(fields)
    for name, array in fields.items():
        assert_bits_equal(message.fields[name], array)
        assert not message.fields[name].flags.writeable


def test_non_contiguous_and_big_endian_inputs(schema):
    fields = example_fields(1)
    sent = dict(fields)
    sent["u"] = np.asfortranarray(fields["u"])
    sent["v"] = fields["v"].astype(">f8")  # same values, other byte order
    sent["k"] = np.ascontiguousarray(fields["k"].transpose(2, 1, 0)).transpose(2, 1, 0)
    assert not sent["k"].flags.c_contiguous
    message = decode(encode_data(SECRET, 0, 0, 0, sent), SECRET, schema)
    for name, array in fields.items():
        np.testing.assert_array_equal(message.fields[name], array)
        assert message.fields[name].dtype == array.dtype


def test_messages_follow_the_specification(schema):
    """Header JSON, payload bytes and MAC recomputed independently of the module."""
    fields = example_fields()
    message = encode_data(SECRET, 3, 0, 4, fields)
    assert isinstance(message, bytes)  # one frame
    prefix, header, payload, mac = split(message)
    assert json.loads(header) == data_header(schema)
    assert payload == payload_of(fields)
    assert prefix == len(header).to_bytes(8, "little")
    assert mac == hmac.new(SECRET, prefix + header + payload, hashlib.sha256).digest()
    assert len(message) <= _wire.max_message_bytes(schema)
    assert _wire.max_message_bytes(schema) == (
        PREFIX_BYTES + MAX_HEADER_BYTES + schema.max_payload_bytes() + MAC_BYTES
    )


def test_open_and_close_round_trip(schema):
    params = {"alpha": 0.125, "beta": -3.0, "n": 7}
    message = decode(encode_open(SECRET, 5, 1, params), SECRET, schema)
    assert (message.kind, message.run, message.attempt) == ("open", 5, 1)
    assert message.params == {"alpha": 0.125, "beta": -3.0, "n": 7.0}
    assert message.step is None and message.fields is None
    for status in ("ok", "error: RuntimeError: diverged at step 3 — ünïcode"):
        message = decode(encode_close(SECRET, 5, 1, status), SECRET, schema)
        assert (message.kind, message.run, message.status) == ("close", 5, status)
    long = decode(encode_close(SECRET, 5, 1, "x" * 10**6), SECRET, schema)
    assert long.status == "x" * _wire.MAX_STATUS_CHARS


def test_from_example_and_payload_size(schema):
    assert [(f.name, f.shape, f.dtype) for f in schema.fields] == [
        ("u", (16, 16), "float32"),
        ("v", (3, 5), "float64"),
        ("k", (2, 3, 4), "int32"),
        ("m", (7,), "uint8"),
        ("t", (), "float64"),
    ]
    assert schema.max_payload_bytes() == 16 * 16 * 4 + 15 * 8 + 24 * 4 + 7 + 8
    assert FieldSpec("x", (2, 3), "single") == FieldSpec("x", (2, 3), "float32")
    assert FieldSpec("x", (2, 3), "complex64").nbytes == 48


def _tamper(message, part, position):
    """`message` with one bit flipped at `position` of part `part` (0 prefix,
    1 header, 2 payload, 3 mac)."""
    start = sum(len(p) for p in split(message)[:part])
    data = bytearray(message)
    data[start + position] ^= 0x01
    return bytes(data)


def _bad_messages(schema):
    """(name, frames, reason): one hand-built message per failure."""
    fields = example_fields()
    good = encode_data(SECRET, 3, 0, 4, fields)
    payload = payload_of(fields)
    cap = schema.max_payload_bytes()
    wrong_dtype = data_header(schema)
    wrong_dtype["fields"][0]["dtype"] = "float64"
    wrong_shape = data_header(schema)
    wrong_shape["fields"][0]["shape"] = [16, 15]
    swapped = data_header(schema)
    swapped["fields"][0], swapped["fields"][1] = swapped["fields"][1], swapped["fields"][0]
    big_header = json.dumps({**data_header(schema), "pad": "x" * MAX_HEADER_BYTES}).encode()
    return [
        ("wrong secret", encode_data(new_secret(), 3, 0, 4, fields), "auth"),
        ("tampered header", _tamper(good, 1, 40), "auth"),
        ("tampered payload", _tamper(good, 2, 100), "auth"),
        ("tampered mac", _tamper(good, 3, 0), "auth"),
        ("short mac", good[:-16], "auth"),
        ("prefix moved into the header", _tamper(good, 0, 0), "auth"),
        ("prefix past the end", (2**20).to_bytes(8, "little") + good[8:], "oversized"),
        ("prefix just past the end", len(good).to_bytes(8, "little") + good[8:], "malformed"),
        ("shorter than prefix and mac", good[:39], "malformed"),
        ("frames, not one message", list(split(good)), "malformed"),
        ("whole message over the cap", good + bytes(MAX_HEADER_BYTES + 64), "oversized"),
        ("header too large", sign(big_header, payload), "oversized"),
        ("payload over the cap", sign(data_header(schema), payload + b"\0"), "oversized"),
        ("payload far over the cap", sign(data_header(schema), bytes(10 * cap)), "oversized"),
        ("not JSON", sign(b"\x80\xff not json", payload), "malformed"),
        ("JSON list", sign(b"[1, 2]", payload), "malformed"),
        ("deeply nested", sign(b"[" * 10000, payload), "malformed"),
        ("wrong magic", sign(data_header(schema, magic="melissa"), payload), "malformed"),
        ("wrong version", sign(data_header(schema, version=2), payload), "malformed"),
        ("bool version", sign(data_header(schema, version=True), payload), "malformed"),
        ("wrong kind", sign(data_header(schema, kind="exec"), payload), "malformed"),
        ("negative run", sign(data_header(schema, run=-1), payload), "malformed"),
        ("float step", sign(data_header(schema, step=1.0), payload), "malformed"),
        ("extra key", sign(data_header(schema, extra=1), payload), "malformed"),
        ("fields not a list", sign(data_header(schema, fields={"u": 1}), payload), "malformed"),
        ("fields swapped", sign(swapped, payload), "malformed"),
        (
            "field missing",
            sign(data_header(schema, fields=data_header(schema)["fields"][1:]), payload),
            "malformed",
        ),
        ("wrong dtype", sign(wrong_dtype, payload), "dtype"),
        ("wrong shape", sign(wrong_shape, payload), "shape"),
        ("truncated payload", sign(data_header(schema), payload[:-1]), "malformed"),
        ("empty payload", sign(data_header(schema), b""), "malformed"),
        ("step -1", sign(data_header(schema, step=-1), payload), "step"),
        ("step n_steps", sign(data_header(schema, step=N_STEPS), payload), "step"),
        ("step huge", sign(data_header(schema, step=10**30), payload), "step"),
        (
            "NaN parameter",
            sign(
                b'{"magic":"sciml-online","version":1,"kind":"open","run":0,"attempt":0,"params":{"a":NaN}}'
            ),
            "malformed",
        ),
        (
            "string parameter",
            sign(
                {
                    "magic": "sciml-online",
                    "version": 1,
                    "kind": "open",
                    "run": 0,
                    "attempt": 0,
                    "params": {"a": "1"},
                }
            ),
            "malformed",
        ),
        (
            "status not a string",
            sign(
                {
                    "magic": "sciml-online",
                    "version": 1,
                    "kind": "close",
                    "run": 0,
                    "attempt": 0,
                    "status": 0,
                }
            ),
            "malformed",
        ),
    ]


def test_bad_messages_cover_every_reason(schema):
    reasons = {reason for _, _, reason in _bad_messages(schema)}
    assert reasons == set(REJECT_REASONS) - {"unknown_run", "non_finite"}  # the receiver's


@pytest.mark.parametrize("name", ["u", "v", "t"])
@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_check_finite_rejects_any_nan_or_infinity_in_a_float_field(schema, name, bad):
    fields = {key: np.zeros_like(value) for key, value in example_fields().items()}
    fields["k"] = np.full_like(fields["k"], -1)  # integer fields are never non-finite
    _wire.check_finite(decode(encode_data(SECRET, 0, 0, 1, fields), SECRET, schema))
    fields[name] = fields[name].copy()
    fields[name].reshape(-1)[-1] = bad  # the last entry only
    message = decode(encode_data(SECRET, 0, 0, 1, fields), SECRET, schema)
    with pytest.raises(RejectedMessage, match=f"field '{name}' has 1 non-finite") as info:
        _wire.check_finite(message)
    assert info.value.reason == "non_finite"


@pytest.mark.parametrize("index", range(37))
def test_rejects(schema, index):
    cases = _bad_messages(schema)
    assert len(cases) == 37
    name, frames, reason = cases[index]
    with pytest.raises(RejectedMessage) as info:
        decode(frames, SECRET, schema)
    assert info.value.reason == reason, name


def test_the_whole_mac_is_compared_in_constant_time(schema, monkeypatch):
    """A one-bit change anywhere in the MAC or the signed bytes, a MAC cut
    short or one with a byte more, is `auth`: a check of part of the MAC (its
    first byte, its first 16) would pass a change of the others. The
    comparison is `hmac.compare_digest` of the whole 32-byte digest."""
    good = encode_data(SECRET, 3, 0, 4, example_fields())
    prefix, header, payload, _ = split(good)
    changed = [("mac", position, _tamper(good, 3, position)) for position in (0, 1, 15, 16, 31)]
    changed += [("prefix", 0, _tamper(good, 0, 0))]  # the header one byte longer
    changed += [("header", p, _tamper(good, 1, p)) for p in (0, len(header) - 1)]
    changed += [
        ("payload", p, _tamper(good, 2, p)) for p in (0, len(payload) // 2, len(payload) - 1)
    ]
    changed += [("mac cut", 31, good[:-1]), ("mac cut", 16, good[:-16])]
    # an open message has no payload, so the bytes added stay under the payload cap
    opened = encode_open(SECRET, 5, 1, {"a": 1.0})
    decode(opened, SECRET, schema)
    changed += [("mac extended", 33, opened + b"\0"), ("mac extended", 64, opened + opened[-32:])]
    for part, position, message in changed:
        with pytest.raises(RejectedMessage) as info:
            decode(message, SECRET, schema)
        assert info.value.reason == "auth", (part, position)

    compared, compare_digest = [], hmac.compare_digest

    def spy(a, b):
        compared.append((bytes(a), bytes(b)))
        return compare_digest(a, b)

    monkeypatch.setattr(_wire.hmac, "compare_digest", spy)
    decode(good, SECRET, schema)
    expected = hmac.new(SECRET, prefix + header + payload, hashlib.sha256).digest()
    assert compared == [(expected, good[-32:])]


def test_hand_built_good_message_is_accepted(schema):
    """The hand-built messages above fail for their one defect only."""
    fields = example_fields()
    message = decode(sign(data_header(schema), payload_of(fields)), SECRET, schema)
    for name, array in fields.items():
        assert_bits_equal(message.fields[name], array)


def test_mac_checked_before_json(schema, monkeypatch):
    """A message with a wrong MAC never reaches the JSON parser."""

    def fail(*args, **kwargs):
        raise AssertionError("JSON parsed before the MAC was checked")

    monkeypatch.setattr(_wire, "_parse_header", fail)
    with pytest.raises(RejectedMessage, match="auth"):
        decode(sign(b'{"magic": "sciml-online"}', secret=new_secret()), SECRET, schema)


def test_no_pickle_on_the_receive_path(schema, monkeypatch):
    def forbidden(*args, **kwargs):
        raise AssertionError("pickle or np.load used on the receive path")

    for module, name in [(pickle, "loads"), (pickle, "load"), (pickle, "Unpickler"), (np, "load")]:
        monkeypatch.setattr(module, name, forbidden)
    fields = example_fields()
    message = decode(encode_data(SECRET, 1, 0, 2, fields), SECRET, schema)
    assert_bits_equal(message.fields["u"], fields["u"])
    for module in (_wire, _receiver, _client, _sockets, _secret):
        tree = ast.parse(inspect.getsource(module))
        imported = set()
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                imported |= {alias.name.split(".")[0] for alias in node.names}
            elif isinstance(node, ast.ImportFrom) and node.module:
                imported.add(node.module.split(".")[0])
        assert not imported & {
            "pickle",
            "cPickle",
            "dill",
            "cloudpickle",
            "marshal",
            "shelve",
            "jax",
        }
        source = inspect.getsource(module)
        assert "allow_pickle" not in source and "recv_pyobj" not in source


def test_encode_argument_checks():
    with pytest.raises(ValueError, match="secret"):
        encode_open(b"short", 0, 0, {})
    with pytest.raises(ValueError, match="secret"):
        _wire.check_secret("0" * 32)  # text, not bytes
    with pytest.raises(ValueError, match="run"):
        encode_open(SECRET, -1, 0, {})
    with pytest.raises(ValueError, match="attempt"):
        encode_close(SECRET, 0, True)
    with pytest.raises(ValueError, match="finite"):
        encode_open(SECRET, 0, 0, {"a": float("nan")})
    with pytest.raises(ValueError, match="real number"):
        encode_open(SECRET, 0, 0, {"a": "1.0"})
    with pytest.raises(ValueError, match="MAX_HEADER_BYTES"):
        encode_open(SECRET, 0, 0, {f"p{i:05d}": 1.0 for i in range(2000)})
    with pytest.raises(ValueError, match="step"):
        encode_data(SECRET, 0, 0, -1, {"u": np.zeros(2)})
    with pytest.raises(ValueError, match="fields"):
        encode_data(SECRET, 0, 0, 0, {"u": np.array(["a"])})
    with pytest.raises(ValueError, match="fields"):
        encode_data(SECRET, 0, 0, 0, {})


def test_schema_argument_checks():
    with pytest.raises(ValueError, match="dtype"):
        FieldSpec("u", (2,), "object")
    with pytest.raises(ValueError, match="dtype"):
        FieldSpec("u", (2,), "not-a-dtype")
    with pytest.raises(ValueError, match="shape"):
        FieldSpec("u", (2, -1), "float32")
    with pytest.raises(ValueError, match="name"):
        FieldSpec("", (2,), "float32")
    with pytest.raises(ValueError, match="n_steps"):
        Schema((FieldSpec("u", (2,), "float32"),), 0)
    with pytest.raises(ValueError, match="unique"):
        Schema((FieldSpec("u", (2,), "float32"), FieldSpec("u", (3,), "float32")), 1)
    with pytest.raises(ValueError, match="fields"):
        Schema((), 1)
    with pytest.raises(ValueError, match="reason"):
        RejectedMessage("bad-reason", "x")
