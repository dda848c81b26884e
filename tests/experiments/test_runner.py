"""The library runner with a config file and task module outside the checkout,
resume after SIGTERM, resume with more steps, and models read back from a run."""

import ast
import inspect
import json
import os
import shlex
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import equinox as eqx
import jax
import numpy as np
import pytest

from sciml._launch import sciml_run
from sciml.experiment import (
    ConfigError,
    load_config,
    load_run,
    load_run_config,
    main,
    parse,
    resolve_task,
)
from sciml.experiment._resume import resume_command
from sciml.training import (
    Checkpointer,
    TrainSettings,
    fit,
    make_optimizer,
    make_schedule,
    read_metrics,
    restore_model,
)


ROOT = Path(__file__).parents[2]
QUICKSTART = str(ROOT / "experiments" / "configs" / "quickstart.py")

TASK = '''
"""A small regression task that lives outside the checkout."""

import time
from pathlib import Path

import jax

jax.config.update("jax_enable_x64", True)

import equinox as eqx  # noqa: E402
import jax.numpy as jnp  # noqa: E402

from sciml.experiment import Experiment, Task, train_experiment  # noqa: E402


def build(config):
    model = eqx.nn.MLP(3, 1, 8, 2, key=jax.random.key(config.seed))
    marker = Path(config.marker) if config.marker else None

    def batch_fn(step, key):
        if step == config.pause_at and marker is not None and not marker.exists():
            marker.write_text("paused")  # the test sends SIGTERM now
            time.sleep(600)
        x = jax.random.normal(key, (16, 3))
        return x, jnp.sin(x.sum(axis=1))

    def loss_fn(model, batch, key):
        x, y = batch
        noise = 0.01 * jax.random.normal(key, y.shape)  # the loss key matters
        return jnp.mean((jax.vmap(model)(x)[:, 0] - y - noise) ** 2), {}

    def evaluate(model):
        x = jnp.linspace(-1.0, 1.0, 12).reshape(4, 3)
        return {"test_mse": jnp.mean((jax.vmap(model)(x)[:, 0] - jnp.sin(x.sum(1))) ** 2)}

    return Experiment(model, loss_fn, batch_fn, evaluate=evaluate)


def train_and_evaluate(config, workdir):
    return train_experiment(build(config), config, workdir).summary


TASK = Task(train_and_evaluate, build=build)
'''

CONFIG = """
from sciml.experiment import defaults


def get_config(variant=None):
    config = defaults.base_config(
        "outside",
        "{task}",
        steps=40,
        batch_size=16,
        learning_rate={learning_rate},
        train={{"log_every": 5, "eval_every": 20, "checkpoint_every": 10, "progress": False}},
        optimizer={{"name": "adamw", "weight_decay": 1e-3, "warmup_steps": 4}},
    )
    config.pause_at = -1
    config.marker = ""
    return defaults.select_variant(config, variant, tiny=lambda config: None)
"""


def _project(root: Path, learning_rate: float = 1e-2) -> Path:
    """`root/configs/outside.py` naming its task `../tasks/regression.py` by relative path."""
    (root / "configs").mkdir(parents=True, exist_ok=True)
    (root / "tasks").mkdir(exist_ok=True)
    (root / "tasks" / "regression.py").write_text(TASK)
    config = root / "configs" / "outside.py"
    config.write_text(CONFIG.format(task="../tasks/regression.py", learning_rate=learning_rate))
    return config


def _leaves(model):
    return jax.tree_util.tree_leaves(eqx.filter(model, eqx.is_array))


def _env():
    return {**os.environ, "PYTHONPATH": str(ROOT), "MPLBACKEND": "Agg"}


def _cli(*args, cwd, wait=True):
    cmd = [sys.executable, "-m", "sciml.experiment", *map(str, args)]
    if wait:
        return subprocess.run(cmd, cwd=cwd, env=_env(), capture_output=True, text=True, timeout=300)
    return subprocess.Popen(cmd, cwd=cwd, env=_env(), stderr=subprocess.PIPE, text=True)


def test_resume_command_names_the_interpreter_that_ran(monkeypatch, tmp_path):
    """`make run` runs `.venv/bin/python` without activating it: a hint that said
    `python -m ...` would start another interpreter when pasted."""
    venv_python = tmp_path / ".venv" / "bin" / "python"
    monkeypatch.setattr(sys, "executable", str(venv_python))
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(shutil, "which", lambda name: "/usr/bin/python")
    prog = "python -m experiments.run"
    assert resume_command(prog, "runs/a b") == (
        ".venv/bin/python -m experiments.run --resume 'runs/a b'"
    )
    (tmp_path / "elsewhere").mkdir()
    monkeypatch.chdir(tmp_path / "elsewhere")
    assert resume_command(prog, "r") == f"{venv_python} -m experiments.run --resume r"
    monkeypatch.setattr(shutil, "which", lambda name: str(venv_python))  # the active one
    assert resume_command(prog, "r") == "python -m experiments.run --resume r"
    assert resume_command("sciml-run", "r") == "sciml-run --resume r"


def test_console_script_is_the_library_cli_behind_a_light_module():
    tomllib = pytest.importorskip("tomllib")
    scripts = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]
    module, _, name = scripts["sciml-run"].partition(":")
    assert getattr(__import__(module, fromlist=[name]), name) is sciml_run
    # the module the command starts in imports the standard library only
    tree = ast.parse((ROOT / "sciml" / "_launch.py").read_text())
    top = {n.names[0].name for n in tree.body if isinstance(n, ast.Import)}
    top |= {n.module for n in tree.body if isinstance(n, ast.ImportFrom)}
    assert all(m.split(".")[0] in sys.stdlib_module_names | {"__future__"} for m in top), top
    assert "sciml.experiment" in inspect.getsource(sciml_run)  # imported inside, guarded


def test_ctrl_c_while_the_runner_imports_is_one_line(tmp_path):
    # Before: a 38-line traceback of whatever module was loading.
    code = (
        "import os, signal, threading\n"
        "from sciml._launch import sciml_run\n"
        "threading.Timer(0.05, os.kill, (os.getpid(), signal.SIGINT)).start()\n"
        "sciml_run()\n"
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 130, done.stderr
    assert done.stderr.splitlines() == [
        "SIGINT while starting: stopped before the run began; nothing was written."
    ]


@pytest.mark.slow
def test_outside_config_and_task_run_resume_after_sigterm(tmp_path):
    config_file = _project(tmp_path / "project")

    # in-process, through the console script's entry point
    assert main(["--config", str(config_file), "--workdir", str(tmp_path / "straight")]) == 0
    summary = json.loads((tmp_path / "straight" / "summary.json").read_text())
    assert summary["steps"] == 40

    # the runner trains exactly what `fit` trains when called by hand
    config = load_config(str(config_file))
    task = resolve_task("../tasks/regression.py", config_file.parent)
    experiment = task.build(config)
    by_hand = fit(
        experiment.model,
        experiment.loss_fn,
        experiment.batch_fn,
        optimizer=make_optimizer(config.optimizer),
        key=jax.random.key(1),
        settings=TrainSettings(steps=40, progress=False),
    )
    straight = restore_model(
        tmp_path / "straight", eqx.filter_eval_shape(lambda: task.build(config).model)
    )
    for a, b in zip(_leaves(by_hand.model), _leaves(straight), strict=True):
        np.testing.assert_array_equal(a, b)

    # a subprocess, SIGTERM after the first checkpoints, then resumed by another one
    marker = tmp_path / "paused"
    killed = tmp_path / "killed"
    proc = _cli(
        "--config",
        config_file,
        "--workdir",
        killed,
        "--config.pause_at=25",
        f"--config.marker={marker}",
        cwd=tmp_path,
        wait=False,
    )
    deadline = time.time() + 240
    while not marker.exists():
        assert proc.poll() is None, proc.stderr.read()
        assert time.time() < deadline, "the run never reached the pause"
        time.sleep(0.2)
    proc.send_signal(signal.SIGTERM)
    _, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 130, stderr
    # SIGTERM checkpointed the finished steps (SIGKILL would have left step 20)
    assert Checkpointer(killed / "checkpoints").latest_step() == 25

    # the printed resume command, pasted as it is, resumes
    lines = stderr.splitlines()
    pasted = lines[lines.index("interrupted; finished steps are checkpointed. Resume with:") + 1]
    resumed = subprocess.run(
        shlex.split(pasted), cwd=tmp_path, env=_env(), capture_output=True, text=True, timeout=300
    )
    assert resumed.returncode == 0, resumed.stderr
    assert "resuming from step 25 of 40" in resumed.stderr
    model = restore_model(killed, task.build(config).model)
    for a, b in zip(_leaves(straight), _leaves(model), strict=True):
        np.testing.assert_allclose(a, b, rtol=0, atol=1e-12)
    steps = [m["step"] for m in read_metrics(killed / "metrics.jsonl") if m["split"] == "train"]
    assert steps == [5, 10, 15, 20, 25, 30, 35, 40]
    assert load_run_config(killed).pause_at == 25  # the config travels with the checkpoints
    rebuilt, _ = load_run(killed)  # the task found again through the recorded config file
    for a, b in zip(_leaves(model), _leaves(rebuilt), strict=True):
        np.testing.assert_array_equal(a, b)


CHUNKED_TASK = '''
"""Two compiled chunks: a quick one, then one that would run for hours."""

from pathlib import Path

import jax
import jax.numpy as jnp

from sciml.training import ChunkedRun


@jax.jit
def chunk(x, repeats):
    return jax.lax.fori_loop(0, repeats, lambda i, x: jnp.tanh(x @ x), x)


def train_and_evaluate(config, workdir):
    def advance(state, step):
        if step == 1:
            Path(config.marker).write_text("second chunk")  # the test signals now
        return {"x": chunk(state["x"], 1 if step == 0 else 10**9)}, step + 1, {}

    state = {"x": jnp.full((256, 256), 1e-3)}
    ChunkedRun(Path(workdir) / "checkpoints", progress=False).run(
        state, jax.random.key(0), advance, total=2
    )
    return {}
'''

CHUNKED_CONFIG = """
from sciml.experiment import defaults


def get_config(variant=None):
    config = defaults.base_config("chunked", "chunked.py", steps=2, batch_size=1, learning_rate=1e-3)
    config.marker = ""
    return config
"""


def test_second_sigterm_exits_at_once_during_a_compiled_chunk(tmp_path):
    """A second SIGTERM gives up the chunk in progress: the process exits at
    once with 130 (an interpreter exit would wait for the compiled chunk, here
    hours) and keeps the checkpoint of the chunk before."""
    (tmp_path / "chunked.py").write_text(CHUNKED_TASK)
    (tmp_path / "config.py").write_text(CHUNKED_CONFIG)
    marker, run = tmp_path / "second", tmp_path / "run"
    proc = _cli(
        "--config", tmp_path / "config.py", "--workdir", run, f"--config.marker={marker}",
        cwd=tmp_path, wait=False,
    )  # fmt: skip
    deadline = time.time() + 240
    while not marker.exists():
        assert proc.poll() is None, proc.stderr.read()
        assert time.time() < deadline, "the run never reached its second chunk"
        time.sleep(0.2)
    time.sleep(1.0)  # inside the compiled chunk
    proc.send_signal(signal.SIGTERM)
    time.sleep(1.0)
    assert proc.poll() is None  # the first signal waits for the chunk
    proc.send_signal(signal.SIGTERM)
    try:
        _, stderr = proc.communicate(timeout=60)
    finally:
        proc.kill()
    assert proc.returncode == 130, stderr
    assert "SIGTERM received" in stderr and "--resume" in stderr
    assert Checkpointer(run / "checkpoints").latest_step() == 1


def test_resume_refuses_a_config_that_changed(tmp_path):
    config_file = _project(tmp_path / "project")
    config, workdir = parse(["--config", str(config_file), "--workdir", str(tmp_path / "run")])
    workdir.mkdir()
    (workdir / "config.json").write_text(json.dumps(json.loads(config.to_json_best_effort())))
    (workdir / "source.json").write_text(
        json.dumps({"kind": "file", "ref": str(config_file), "variant": None, "overrides": []})
    )
    assert parse(["--resume", str(workdir)])[0].optimizer.learning_rate == 1e-2
    _project(tmp_path / "project", learning_rate=3e-2)
    with pytest.raises(ConfigError, match="no longer gives"):
        parse(["--resume", str(workdir)])


def test_resume_with_more_steps_stretches_the_schedule(tmp_path, capsys):
    run = tmp_path / "run"
    argv = ["--config", QUICKSTART + ":tiny", "--workdir", str(run), "--config.train.steps=20"]
    assert main(argv) == 0
    # the run ends with its verdict on stdout (the summary is in summary.json)
    error = json.loads((run / "summary.json").read_text())["test_rel_l2"]
    first, files = capsys.readouterr().out.splitlines()
    assert first.startswith("done in ") and first.endswith(f": test rel. L2 {100 * error:.3g} %")
    assert files == f"  plots: {run / 'plots'}/, summary: {run / 'summary.json'}"
    old = json.loads((run / "config.json").read_text())
    assert old["optimizer"]["decay_steps"] == 20
    lines = (run / "metrics.jsonl").read_text()

    # a finished run run again trains nothing and logs nothing
    assert main(["--resume", str(run)]) == 0
    assert (run / "metrics.jsonl").read_text() == lines

    config, _ = parse(["--resume", str(run), "--config.train.steps=40"])
    assert config.train.steps == 40 and config.optimizer.decay_steps == 40
    fresh = load_config(QUICKSTART + ":tiny")
    with fresh.unlocked():
        fresh.train.steps = 40
    new_schedule, old_schedule = make_schedule(config.optimizer), make_schedule(old["optimizer"])
    np.testing.assert_allclose(new_schedule(30), make_schedule(fresh.optimizer)(30), rtol=1e-15)
    assert old_schedule(30) == 0.0  # the old schedule ended at step 20
    assert new_schedule(30) > 0.05 * config.optimizer.learning_rate

    capsys.readouterr()
    assert main(["--resume", str(run), "--config.train.steps=40", "--json"]) == 0
    captured = capsys.readouterr()
    assert "resuming from step 20 of 40" in captured.err
    printed = json.loads(captured.out)  # every digit (summary.json holds four)
    assert printed["steps"] == 40
    recorded = json.loads((run / "source.json").read_text())["overrides"]
    assert recorded == [["train.steps", "20"], ["train.steps", "40"]]
    records = [(m["split"], m["step"]) for m in read_metrics(run / "metrics.jsonl")]
    assert len(records) == len(set(records))  # no step logged twice
    assert records[-1] == ("eval", 40)

    # the model rebuilt from the run directory alone scores what the summary says
    from experiments.tasks.quickstart import heat_data, relative_l2

    model, config = load_run(run)
    assert config.train.steps == 40
    data = config.data
    key_test = jax.random.split(jax.random.key(config.seed), 3)[1]
    args = (data.resolution, data.n_modes, data.diffusivity, data.t_final)
    x_test, y_test = heat_data(key_test, data.n_test, *args)
    error = float(relative_l2(jax.vmap(model)(x_test), y_test))
    np.testing.assert_allclose(error, printed["test_rel_l2"], rtol=1e-12)


def _text_inside_figure(fig) -> list[str]:
    """The axes of `fig` whose drawn extent (title, labels, tick labels, legend)
    reaches outside the figure, so that saving clips it."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    canvas = FigureCanvasAgg(fig)  # a closed figure keeps no canvas of its own
    canvas.draw()
    renderer = canvas.get_renderer()
    bounds = fig.bbox
    outside = []
    for ax in fig.axes:  # everything an axis draws: title, labels, ticks, legend
        box = ax.get_tightbbox(renderer)
        if box.x0 < bounds.x0 - 1 or box.x1 > bounds.x1 + 1 or box.y0 < bounds.y0 - 1:
            outside.append(ax.get_title() or ax.get_ylabel() or repr(ax))
        elif box.y1 > bounds.y1 + 1:
            outside.append(ax.get_title() or ax.get_ylabel() or repr(ax))
    return outside


def test_loss_plot_shows_training_and_evaluation_with_names(tmp_path):
    from sciml.experiment import plot_loss

    train = [(10, 0.98), (20, 0.71), (30, 0.44), (40, 0.41), (50, 0.38)]
    evals = [(25, 0.52, 0.61), (50, 0.40, 0.47)]
    with open(tmp_path / "metrics.jsonl", "w") as f:
        for step, loss in train:
            f.write(json.dumps({"split": "train", "step": step, "loss": loss}) + "\n")
        for step, h1, l2 in evals:
            record = {"split": "eval", "step": step, "test_rel_h1": h1, "test_rel_l2": l2}
            f.write(json.dumps(record) + "\n")
    fig = plot_loss(tmp_path / "metrics.jsonl", tmp_path, run_name="darcy_fno", loss_name="h1")
    assert (tmp_path / "loss.png").is_file()
    (ax,) = fig.axes
    lines = {line.get_label(): line for line in ax.get_lines()}
    raw, h1, l2 = "training", "test relative H1 error", "test relative L2 error"
    assert set(lines) == {raw, h1, l2}  # five records: drawn as they are, not smoothed
    np.testing.assert_array_equal(lines[raw].get_xdata(), [s for s, _ in train])
    np.testing.assert_array_equal(lines[raw].get_ydata(), [v for _, v in train])
    np.testing.assert_array_equal(lines[h1].get_ydata(), [0.52, 0.40])
    assert lines[h1].get_linestyle() == "-"  # the metric of the loss
    assert lines[l2].get_linestyle() == "--"
    assert "darcy_fno" in ax.get_title() and "relative H1 error" in ax.get_ylabel()
    # Readable ticks on a narrow log range (0.38 .. 0.98): several plain labels.
    assert _text_inside_figure(fig) == []  # draws the figure, so tick labels are set
    low, high = ax.get_ylim()
    labels = [
        t.get_text()
        for t in ax.get_yticklabels()
        if t.get_text() and low <= t.get_position()[1] <= high
    ]
    assert len(labels) >= 3, labels
    for label in labels:
        float(label)  # plain numbers such as "0.4", not "4×10^{-1}" mathtext
    # No training records: nothing is written.
    (tmp_path / "empty.jsonl").write_text("")
    assert plot_loss(tmp_path / "empty.jsonl", tmp_path / "nowhere") is None
