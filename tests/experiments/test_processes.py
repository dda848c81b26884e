"""`--processes N`: one run trained by N processes of this machine.

Two processes (JAX's CPU collectives, one device each) must train the
quickstart to the parameters one process reaches with the same global batch
and seed, and write one run directory as one process does; a killed process
must end the whole run, and a task or batch size that cannot be split is
refused before anything is written.
"""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import equinox as eqx
import jax
import numpy as np
import pytest

from sciml.distributed import GRACE_SECONDS, gpu_share
from sciml.experiment import ConfigError, load_run, main
from sciml.experiment._cli import child_arguments, split_processes
from sciml.training import restore_model


ROOT = Path(__file__).resolve().parents[2]
QUICKSTART = str(ROOT / "experiments" / "configs" / "quickstart.py")
# 20 steps of the tiny quickstart, with checkpoints at steps 19 and 20
SHORT = [
    f"--config={QUICKSTART}:tiny",
    "--config.train.steps=20",
    "--config.train.checkpoint_every=19",
    "--config.train.progress=false",
    "--json",
]


def _env() -> dict[str, str]:
    """The environment of a run: the checkout importable, one CPU device per
    process (no forced device count)."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), "MPLBACKEND": "Agg"}
    env.pop("XLA_FLAGS", None)
    return env


def _start(*args, cwd: Path, **options) -> subprocess.Popen:
    command = [sys.executable, "-m", "experiments.run", *map(str, args)]
    return subprocess.Popen(command, cwd=cwd, env=_env(), text=True, **options)


def _files(run: Path) -> set[str]:
    """The run's files, checkpoints as their step folders (orbax writes one
    part of a checkpoint per process inside them), TensorBoard event files
    without their time and process in the name."""
    return {
        "events.out.tfevents"
        if p.name.startswith("events.out.tfevents.")
        else str(p.relative_to(run))
        for p in run.rglob("*")
        if "checkpoints" not in p.relative_to(run).parts[:1] or len(p.relative_to(run).parts) <= 2
    }


def _leaves(model) -> list[np.ndarray]:
    return [
        np.asarray(x, np.float64)
        for x in jax.tree_util.tree_leaves(eqx.filter(model, eqx.is_array))
    ]


@pytest.mark.slow
def test_two_processes_train_to_the_parameters_of_one(tmp_path):
    # both runs at once (each compiles the same small program; the machine
    # has two cores), each in a folder of its own as working directory, so a
    # stray default run directory would show
    (tmp_path / "one").mkdir()
    (tmp_path / "two").mkdir()
    runs = {
        "one": _start(*SHORT, "--workdir", "run", cwd=tmp_path / "one", stdout=subprocess.PIPE),
        "two": _start(
            *SHORT, "--processes", "2", "--workdir", "run", cwd=tmp_path / "two",
            stdout=subprocess.PIPE,
        ),
    }  # fmt: skip
    out = {name: proc.communicate(timeout=300)[0] for name, proc in runs.items()}
    assert {name: proc.returncode for name, proc in runs.items()} == {"one": 0, "two": 0}
    summaries = {name: json.loads(text) for name, text in out.items()}  # one JSON document each
    assert summaries["two"].keys() == summaries["one"].keys()
    assert summaries["two"]["steps"] == 20
    one, two = tmp_path / "one" / "run", tmp_path / "two" / "run"
    assert os.listdir(tmp_path / "two") == ["run"]
    assert _files(two) == _files(one)
    assert len(list(two.glob("events.out.tfevents.*"))) == 1  # process 0's alone
    assert summaries["two"]["processes"] == 2 and summaries["one"]["processes"] == 1
    assert (two / "plots" / "loss.png").is_file()
    # exactly one copy of each file: no line of a file that is appended to was
    # written twice (two writers would double metrics.jsonl)
    for name in sorted(n for n in _files(one) if n.endswith((".json", ".jsonl"))):
        if not name.startswith("checkpoints"):
            lines = {run: (run / name).read_bytes().count(b"\n") for run in (one, two)}
            assert lines[two] == lines[one], (name, lines)

    model_one, _ = load_run(one)
    model_two, _ = load_run(two)
    a, b = _leaves(model_one), _leaves(model_two)
    error = max(float(np.max(np.abs(x - y)) / np.max(np.abs(x))) for x, y in zip(a, b))
    # Measured 1.9e-7: float32 round-off (the gradient's all-reduce adds the
    # two halves of the batch in another order than one process does). Each
    # process given the same rows (the first half of the batch, a hand-made
    # break of train_experiment) gives 0.21.
    assert error < 1e-6, error
    # a real difference, one optimiser step, is far outside it: 5.8e-3
    step_19 = _leaves(restore_model(one, model_one, step=19))
    step_error = max(float(np.max(np.abs(x - y)) / np.max(np.abs(x))) for x, y in zip(a, step_19))
    assert step_error > 1e3 * 1e-6, step_error


def _children(pid: int) -> list[int]:
    path = Path(f"/proc/{pid}/task/{pid}/children")
    return [int(c) for c in path.read_text().split()] if path.exists() else []


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


@pytest.mark.slow
@pytest.mark.skipif(not Path("/proc/self/task").is_dir(), reason="reads /proc for child ids")
def test_a_killed_process_ends_the_run_and_leaves_no_process(tmp_path):
    run = tmp_path / "run"
    parent = _start(
        f"--config={QUICKSTART}:tiny",
        "--config.train.steps=600",
        "--config.train.log_every=10",
        "--config.train.progress=false",
        "--processes=2",
        "--workdir",
        run,
        cwd=tmp_path,
        stderr=subprocess.PIPE,
    )
    try:
        deadline = time.monotonic() + 120
        while not (run / "metrics.jsonl").is_file() or not (run / "metrics.jsonl").read_text():
            assert parent.poll() is None and time.monotonic() < deadline, "no training step"
            time.sleep(0.05)
        children = _children(parent.pid)
        assert len(children) == 2
        os.kill(children[1], signal.SIGKILL)
        killed = time.monotonic()
        _, err = parent.communicate(timeout=60)
        seconds = time.monotonic() - killed
    finally:
        if parent.poll() is None:
            parent.kill()
    assert parent.returncode == 128 + signal.SIGKILL, err  # the killed process's status
    assert "process 1 of 2 ended with exit status 137" in err
    # Measured 0.8 s: the survivor's next collective fails at once, and it
    # exits without waiting for its dead peer; a survivor left to the
    # parent's SIGTERM took the grace period, 6.6 s.
    assert seconds < GRACE_SECONDS, seconds
    assert not [pid for pid in children if _alive(pid)]
    steps = [json.loads(line)["step"] for line in (run / "metrics.jsonl").read_text().splitlines()]
    assert max(steps) < 600  # killed mid-run


@pytest.mark.parametrize("value", ["0", "-2", "two", "1.5", ""])
def test_a_bad_process_count_is_refused(value, capsys):
    assert main([f"--config={QUICKSTART}:tiny", f"--processes={value}"]) == 2
    assert "error: --processes takes a whole number of processes, at least 1" in (
        capsys.readouterr().err
    )
    with pytest.raises(ConfigError, match="--processes: missing value"):
        split_processes(["--config", "x", "--processes"])


def test_the_children_get_the_arguments_and_the_run_directory():
    argv = ["--config", "c.py:tiny", "--processes", "3", "--config.seed=2"]
    assert split_processes(argv) == (3, ["--config", "c.py:tiny", "--config.seed=2"])
    assert split_processes(["--config", "c.py"]) == (1, ["--config", "c.py"])
    rest = split_processes(argv)[1]
    assert child_arguments(rest, Path("w")) == [*rest, "--workdir", "w"]
    resume = ["--resume", "runs/x", "--config.train.steps=9"]
    assert child_arguments(resume, Path("runs/x")) == resume


OWN_LOOP_TASK = """
def train_and_evaluate(config, workdir):
    return {}
"""
OWN_LOOP_CONFIG = """
from sciml.experiment import defaults


def get_config(variant=None):
    return defaults.base_config("own_loop", "own_loop.py", steps=10)
"""


def test_a_task_that_does_not_split_its_batches_is_refused(tmp_path, capsys):
    (tmp_path / "own_loop.py").write_text(OWN_LOOP_TASK)  # a task that is not data-parallel
    (tmp_path / "config.py").write_text(OWN_LOOP_CONFIG)
    run = tmp_path / "run"
    assert main([f"--config={tmp_path / 'config.py'}", "--processes=2", "--workdir", str(run)]) == 2
    err = capsys.readouterr().err
    assert "task own_loop.py cannot train on 2 processes" in err
    assert "data_parallel=True" in err
    assert not run.exists()


def test_a_batch_the_processes_cannot_share_is_refused(tmp_path, capsys):
    run = tmp_path / "run"
    argv = [f"--config={QUICKSTART}:tiny", "--config.train.batch_size=15", "--processes", "2"]
    assert main([*argv, "--workdir", str(run)]) == 2
    err = capsys.readouterr().err
    assert "'train.batch_size': train.batch_size (15) must be a multiple of the number of " in err
    assert "processes (2)" in err
    assert not run.exists()


SIGNAL_TASK = """
import signal
import time
from pathlib import Path

import jax

from sciml.experiment import Task


def train_and_evaluate(config, workdir):
    got = []
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, lambda signum, frame: got.append(signum))
    here = Path(__file__).parent
    (here / f"ready-{jax.process_index()}").write_text("")
    deadline = time.monotonic() + 60
    while not got and time.monotonic() < deadline:
        time.sleep(0.02)
    time.sleep(0.5)  # a second delivery would arrive meanwhile
    (here / f"signals-{jax.process_index()}").write_text(" ".join(map(str, got)))
    if jax.process_index() == 0:  # as if a checkpoint of step 5 had been written
        (Path(workdir) / "checkpoints" / "5").mkdir(parents=True)
    raise KeyboardInterrupt


TASK = Task(train_and_evaluate, data_parallel=True)
"""
SIGNAL_CONFIG = """
from sciml.experiment import defaults


def get_config(variant=None):
    return defaults.base_config("signals", "signal_task.py", steps=10)
"""


def test_a_ctrl_c_reaches_each_process_once_through_the_parent(tmp_path):
    (tmp_path / "signal_task.py").write_text(SIGNAL_TASK)
    (tmp_path / "config.py").write_text(SIGNAL_CONFIG)
    # the parent leads a process group of its own, as a shell's foreground job
    parent = _start(
        f"--config={tmp_path / 'config.py'}", "--processes=2",
        cwd=tmp_path, stderr=subprocess.PIPE, start_new_session=True,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 120
        while not all((tmp_path / f"ready-{i}").exists() for i in range(2)):
            assert parent.poll() is None and time.monotonic() < deadline, parent.stderr.read()
            time.sleep(0.05)
        os.killpg(parent.pid, signal.SIGINT)  # what a Ctrl-C at the terminal does
        _, err = parent.communicate(timeout=60)
    finally:
        if parent.poll() is None:
            parent.kill()
    assert parent.returncode == 130, err
    for i in range(2):  # once each: the terminal's SIGINT reached only the parent
        assert (tmp_path / f"signals-{i}").read_text() == str(int(signal.SIGINT))
    assert err.count("interrupted; finished steps are checkpointed") == 1, err
    (run,) = (tmp_path / "runs" / "signals").iterdir()  # the parent's choice, for both
    assert f"run directory: {run.relative_to(tmp_path)} (2 processes)" in err
    # the command typed, not the one the parent started the processes with
    assert f"-m experiments.run --resume {run.relative_to(tmp_path)} --processes 2" in err


def test_gpus_are_shared_out_in_equal_blocks_or_not_at_all():
    assert [gpu_share(i, 4, 8) for i in range(4)] == ["0,1", "2,3", "4,5", "6,7"]
    assert [gpu_share(i, 2, 2) for i in range(2)] == ["0", "1"]
    assert gpu_share(0, 2, 0) is None  # no GPU: nothing to share
    assert gpu_share(0, 3, 8) is None  # unequal shares: left to the user
