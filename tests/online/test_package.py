"""`sciml.online` imports its names eagerly, the transport's among them (the
process boundary itself, `sciml.transport`, is tested without JAX in
tests/packaging/test_no_jax.py), and the security page names real tests."""

import re
from pathlib import Path

import sciml.online
import sciml.transport


def test_online_re_exports_the_transport_names_it_always_had():
    assert not hasattr(sciml.online, "__getattr__")  # no lazy export table
    moved = [
        "CloseStatus",
        "FieldSpec",
        "JobEnd",
        "Message",
        "RejectedMessage",
        "RunSpec",
        "RunState",
        "SampleReceiver",
        "Schema",
        "SolverClient",
        "SolverJob",
    ]
    for name in moved:
        assert getattr(sciml.online, name) is getattr(sciml.transport, name), name


def test_the_security_page_names_only_tests_that_exist():
    """Each `tests/...py::name` in docs/online_security.md is a test function
    of that file, and each file named alone exists."""
    root = Path(__file__).parents[2]
    page = (root / "docs" / "online_security.md").read_text()
    named = re.findall(r"`(tests/[\w/]+\.py)(?:::(\w+))?`", page)
    assert len(named) >= 20
    for path, name in named:
        source = (root / path).read_text()
        assert not name or re.search(rf"^def {name}\(", source, re.M), f"{path}::{name}"
