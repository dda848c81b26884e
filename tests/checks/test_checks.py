"""`sciml._checks`: one message format ("`name` must be EXPECTED, got VALUE."),
and importable where JAX is not (solver processes, the online worker)."""

import subprocess
import sys
import textwrap

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from sciml._checks import (
    check_choice,
    check_finite,
    check_int,
    check_key,
    check_pair,
    check_positive_finite,
    check_positive_int,
    check_real,
    is_int,
)


_NO_JAX = textwrap.dedent(
    """
    import sys

    class NoJax:
        def find_spec(self, name, path=None, target=None):
            if name == "jax" or name.startswith(("jax.", "jaxlib", "equinox")):
                raise ImportError(f"importing {name} is forbidden here")
            return None

    sys.meta_path.insert(0, NoJax())
    """
)


def _run_without_jax(code: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-c", _NO_JAX + textwrap.dedent(code)],
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_the_forbidding_hook_works():
    out = _run_without_jax("import jax")
    assert out.returncode != 0 and "importing jax is forbidden here" in out.stderr


def test_importable_and_usable_without_jax():
    out = _run_without_jax(
        """
        import numpy as np
        import sciml._checks as c
        import sciml.transport  # the worker's side

        assert c.check_int("n", np.int64(3), minimum=0) == 3
        assert c.check_real("dt", 0.5, positive=True) == 0.5
        assert c.check_pair("lower", (0, 1.5)) == (0.0, 1.5)
        c.check_finite("u", np.ones(3))
        c.check_positive_finite("dt", 1e-3)
        c.check_key("key", np.array([0, 1], np.uint32))
        try:
            c.check_finite("u", np.array([1.0, np.nan]))
        except ValueError as error:
            print(error)
        assert "jax" not in sys.modules, sorted(m for m in sys.modules if "jax" in m)
        """
    )
    assert out.returncode == 0, out.stderr
    assert "`u` must be finite, got 1 NaN and 0 infinite entries (of 2)." in out.stdout


@pytest.mark.parametrize(
    ("kwargs", "bad", "expected"),
    [
        ({}, 2.0, "an integer"),
        ({"minimum": 0}, -1, "an integer >= 0"),
        ({"minimum": 0}, True, "an integer >= 0"),
        ({"minimum": 1, "maximum": 4}, 5, r"an integer in \[1, 4\]"),
        ({"maximum": 4}, "3", "an integer <= 4"),
        ({"minimum": 0, "allow_none": True}, -2, "an integer >= 0 or None"),
    ],
)
def test_check_int_message(kwargs, bad, expected):
    with pytest.raises(ValueError, match=f"^`n` must be {expected}, got {bad!r}.$"):
        check_int("n", bad, **kwargs)


def test_check_int_accepts():
    assert check_int("n", np.int32(4), minimum=1, maximum=4) == 4
    assert type(check_int("n", np.int32(4))) is int
    assert check_int("n", None, allow_none=True) is None
    assert is_int(np.uint8(1)) and not is_int(True) and not is_int(1.0)
    assert check_positive_int("n", 1) == 1
    with pytest.raises(ValueError, match="^`n` must be a positive integer, got 0.$"):
        check_positive_int("n", 0)


@pytest.mark.parametrize(
    ("kwargs", "bad", "expected"),
    [
        ({}, float("nan"), "a finite number"),
        ({}, float("inf"), "a finite number"),
        ({}, True, "a finite number"),
        ({}, "1", "a finite number"),
        ({"positive": True}, 0.0, "a finite number > 0"),
        ({"minimum": 0}, -1e-9, "a finite number >= 0"),
        ({"minimum": 0, "allow_none": True}, -1, "a finite number >= 0 or None"),
    ],
)
def test_check_real_message(kwargs, bad, expected):
    with pytest.raises(ValueError, match=f"^`x` must be {expected}, got {bad!r}.$"):
        check_real("x", bad, **kwargs)


def test_check_real_accepts():
    assert check_real("x", 3) == 3.0 and type(check_real("x", 3)) is float
    assert check_real("x", np.float32(0.5), positive=True) == 0.5
    assert check_real("x", jnp.asarray(2.0)) == 2.0  # 0-d arrays are scalars
    assert check_real("x", 0, minimum=0) == 0.0
    assert check_real("x", None, allow_none=True) is None
    with pytest.raises(ValueError, match="`minimum` or `positive`"):
        check_real("x", 1.0, minimum=0, positive=True)


def test_check_pair():
    assert check_pair("force", [1, np.float64(-2.5)]) == (1.0, -2.5)
    assert check_pair("size", (1, 2), positive=True) == (1.0, 2.0)
    for bad in ((1.0,), (1.0, 2.0, 3.0), 1.0, (1.0, float("nan")), ("a", 1)):
        with pytest.raises(ValueError, match=r"^`force` must be a pair of finite numbers, got "):
            check_pair("force", bad)
    with pytest.raises(ValueError, match=r"^`size` must be a pair of finite numbers > 0, got "):
        check_pair("size", (1.0, 0.0), positive=True)


def test_check_choice():
    assert check_choice("mode", "a", ("a", "b")) == "a"
    with pytest.raises(ValueError, match=r"^`mode` must be one of \('a', 'b'\), got 'c'.$"):
        check_choice("mode", "c", ["a", "b"])


def test_check_key():
    for key in (jax.random.key(0), jax.random.PRNGKey(0), np.array([0, 1], np.uint32)):
        assert check_key("key", key) is key
    for bad in (0, jax.random.split(jax.random.key(0)), np.array([0, 1]), jnp.zeros(2)):
        with pytest.raises(TypeError, match=r"^`key` must be a JAX PRNG key such as "):
            check_key("key", bad)


def test_check_finite():
    for value in (np.ones(3), jnp.ones(3), 1.0, np.arange(3), jnp.ones(2, jnp.bfloat16)):
        assert check_finite("u", value) is value
    bad = jnp.array([np.nan, np.inf, -np.inf, 1.0])
    with pytest.raises(
        ValueError, match=r"^`u` must be finite, got 1 NaN and 2 infinite entries \(of 4\).$"
    ):
        check_finite("u", bad)
    with pytest.raises(ValueError, match="1 NaN and 0 infinite"):
        check_finite("u", np.array([[np.nan]], np.float32))
    # traced values pass unchecked: the compiled function returns the NaN
    assert np.isnan(jax.jit(lambda u: check_finite("u", u))(jnp.nan))


def test_check_finite_refuses_arrays_that_are_not_numbers():
    """`[1.0, None]` is an object array: neither finite nor not, so refused
    (it passed before, as an integer array does), in `sciml` and `solvers`."""
    from solvers._checks import check_finite as solvers_check_finite

    for check in (check_finite, solvers_check_finite):
        for bad, dtype in (([1.0, None], "object"), (np.array(["1.0"]), "<U3")):
            message = rf"^`u` must be a numeric array \(floats, integers or booleans\), got an array of dtype {dtype}: "
            with pytest.raises(TypeError, match=message):
                check("u", bad)
        assert check("u", np.array([True])) is not None and check("u", [1, 2]) is not None


def test_check_positive_finite():
    assert check_positive_finite("dt", np.array([0.1, 2.0])) is not None
    with pytest.raises(ValueError, match="^`dt` must be finite and > 0, got 0.0.$"):
        check_positive_finite("dt", 0.0)
    with pytest.raises(
        ValueError, match=r"^`dt` must be finite and > 0, got an array with min -1.0.$"
    ):
        check_positive_finite("dt", np.array([1.0, -1.0]))
    with pytest.raises(TypeError, match="^`dt` must be a positive real number, got 'a'.$"):
        check_positive_finite("dt", "a")
