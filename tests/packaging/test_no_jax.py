"""`sciml.transport`, the process boundary, imports without JAX: a solver
process (the worker) starts light, and it is the one package that must."""

import subprocess
import sys
import textwrap
from pathlib import Path


ROOT = Path(__file__).resolve().parents[2]

# makes JAX (and the JAX libraries the trainer's side uses) unimportable
_NO_JAX = textwrap.dedent(
    """
    import sys

    class NoJax:
        def find_spec(self, name, path=None, target=None):
            if name.split(".")[0] in {"jax", "jaxlib", "equinox", "optax", "orbax"}:
                raise ImportError(f"importing {name} is forbidden here")
            return None

    sys.meta_path.insert(0, NoJax())
    """
)


def test_a_job_runs_end_to_end_where_jax_cannot_be_imported():
    """The worker runs a job (a numpy simulation, step count checked) into a
    receiver, both in one process that cannot import JAX."""
    code = _NO_JAX + textwrap.dedent(
        """
        import numpy as np
        import sciml.transport as t
        from sciml.transport import worker

        secret, n_steps = t.new_secret(), 3
        schema = t.Schema.from_example({"u": np.zeros((3, 4, 4), np.float32)}, n_steps)
        got = []
        with t.SampleReceiver(
            schema, secret, on_open=got.append, on_data=got.append, on_close=got.append
        ) as receiver:
            runs = (t.RunSpec(run=0, attempt=0, params={"a": 0.25}, seed=7),)
            job = t.SolverJob(
                0, "tests.online.stream_solvers.counter", {"n_steps": n_steps},
                receiver.address, n_steps, runs, timeout=30.0,
            )
            worker.run_job(t.SolverJob.from_json(job.to_json()), secret)
            assert receiver.wait_idle()
        assert [m.kind for m in got] == ["open", "data", "data", "data", "close"], got
        assert [float(m.fields["u"][1, 0, 0]) for m in got[1:-1]] == [0.0, 1.0, 2.0]
        assert got[-1].status == t.CloseStatus.OK
        assert "jax" not in sys.modules, sorted(m for m in sys.modules if "jax" in m)
        print("ok")
        """
    )
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    assert out.returncode == 0 and out.stdout.endswith("ok\n"), out.stderr


def test_the_forbidding_hook_works():
    out = subprocess.run(
        [sys.executable, "-c", _NO_JAX + "import jax"], capture_output=True, text=True, timeout=60
    )
    assert out.returncode != 0 and "importing jax is forbidden here" in out.stderr
