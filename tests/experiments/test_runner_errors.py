"""Mistakes in a config file, its `get_config`, a task module or a run
directory's files: each ends the runner with one `error:` line naming the file
(and the line in it), exit status 2 and no traceback. Before, each of these
printed a Python traceback (a corrupt `config.json` a `JSONDecodeError` from
the standard library)."""

from pathlib import Path

import pytest

from sciml.experiment import main, parse


ROOT = Path(__file__).resolve().parents[2]
QUICKSTART = str(ROOT / "experiments" / "configs" / "quickstart.py")


def error_line(argv, capsys) -> str:
    """The one line `main(argv)` prints, after checking the status and that it is alone."""
    capsys.readouterr()
    assert main([str(arg) for arg in argv]) == 2
    err = capsys.readouterr().err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), err
    return lines[0]


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


# configs that build the quickstart config, to call get_config in other shapes
FROM_QUICKSTART = f"from sciml.experiment import load_config\n\nQUICKSTART = {QUICKSTART!r}\n"


def test_a_config_file_with_a_syntax_error(tmp_path, capsys):
    config = write(tmp_path / "x.py", "import ml_collections\n\ndef get_config(variant=None)\n")
    line = error_line(["--config", config], capsys)
    assert line.startswith(f"error: --config: {config}: SyntaxError at line 3: "), line


def test_a_config_module_with_a_syntax_error(tmp_path, capsys, monkeypatch):
    write(tmp_path / "myconfigs" / "__init__.py", "")
    write(tmp_path / "myconfigs" / "broken.py", "x = 1\ny = (\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    line = error_line(["--config", "myconfigs.broken"], capsys)
    assert line.startswith("error: --config: myconfigs.broken: SyntaxError at line 2"), line


def test_a_config_file_whose_import_fails(tmp_path, capsys):
    config = write(tmp_path / "x.py", "import ml_collections\nimport no_such_module_xyz\n")
    assert error_line(["--config", config], capsys) == (
        f"error: --config: {config}: ModuleNotFoundError at line 2: "
        "No module named 'no_such_module_xyz'"
    )


def test_a_get_config_that_raises_names_the_line(tmp_path, capsys):
    config = write(tmp_path / "x.py", "def get_config(variant=None):\n    return undefined + 1\n")
    assert error_line(["--config", config], capsys) == (
        f"error: --config: {config}: get_config raised NameError at line 2: "
        "name 'undefined' is not defined"
    )


def test_a_get_config_that_fails_without_a_variant_says_to_give_one(tmp_path, capsys):
    config = write(
        tmp_path / "x.py", "def get_config(variant=None):\n    return {'a': 1}[variant]\n"
    )
    line = error_line(["--config", config], capsys)
    assert "get_config(None) raised KeyError at line 2: None; if it needs a variant" in line
    assert f"give --config {config}:<variant>" in line


def test_get_config_without_an_argument(tmp_path, capsys):
    config = write(
        tmp_path / "x.py",
        FROM_QUICKSTART + "\ndef get_config():\n    return load_config(QUICKSTART)\n",
    )
    # called as get_config() when no variant is given, as ml_collections does
    assert parse(["--config", str(config)])[0].name == "quickstart"
    assert error_line(["--config", f"{config}:tiny"], capsys) == (
        f"error: --config: {config}: get_config() takes no variant, got 'tiny'; drop ':tiny' "
        "(or give get_config a `variant` argument)."
    )


def test_get_config_that_requires_a_variant(tmp_path, capsys):
    config = write(
        tmp_path / "x.py",
        FROM_QUICKSTART
        + "\ndef get_config(variant):\n    return load_config(QUICKSTART + ':' + variant)\n",
    )
    assert parse(["--config", f"{config}:tiny"])[0].train.steps == 300
    assert error_line(["--config", config], capsys) == (
        f"error: --config: {config}: get_config needs a variant (its argument has no "
        f"default); give --config {config}:<variant>."
    )


def test_a_task_file_with_a_syntax_error(tmp_path, capsys):
    task = write(tmp_path / "task.py", "def train_and_evaluate(config, workdir)\n    pass\n")
    line = error_line(["--config", QUICKSTART, f"--config.task={task}"], capsys)
    assert line.startswith(f"error: config key 'task': {task}: SyntaxError at line 1: "), line


@pytest.mark.parametrize(
    "name, text, expected",
    [
        (
            "config.json",
            '{"name": "quickstart",',
            "config.json is not valid JSON (line 1, column 23",
        ),
        ("config.json", "[1, 2]", "config.json holds a JSON list, not an object"),
        ("source.json", '{"kind": "file"', "source.json is not valid JSON (line 1, column 16"),
        ("source.json", '{"kind": "file"}', "source.json is not a config source (KeyError('ref'))"),
    ],
)
def test_a_corrupt_run_file_on_resume(tmp_path, capsys, name, text, expected):
    run = tmp_path / "run"
    write(run / "config.json", "{}")
    write(run / name, text)
    line = error_line(["--resume", run], capsys)
    assert line.startswith(f"error: {run / name}"), line
    assert expected in line
    assert "restore it" in line  # and what to do about it
    if name == "config.json":  # the same file met through --workdir
        line = error_line(["--config", QUICKSTART, "--workdir", run], capsys)
        assert expected in line and "load_run_config" in line
