"""Runs an experiment config: `python -m experiments.run --config FILE[:variant]`.

```
python -m experiments.run --config experiments/configs/quickstart.py \
    [--config.train.steps=200 ...] [--workdir DIR] [--resume RUN_DIR]
```

A thin entry point to the library's runner, `sciml.experiment` (the same
command as `sciml-run` and `python -m sciml.experiment`); see
`docs/experiments.md`.
"""

from __future__ import annotations

from sciml._launch import exit_on_signals


with exit_on_signals():  # a Ctrl-C while the runner loads: one line, not a traceback
    from sciml.experiment import (
        ConfigError as ConfigError,
        apply_overrides as apply_overrides,
        cli as _cli,
        load_config as load_config,
        main as _main,
        main_from_config as main_from_config,
        parse as _parse,
        plot_loss as plot_loss,
        validate as validate,
    )


PROG = "python -m experiments.run"


def parse(argv: list[str]):
    """`sciml.experiment.parse` under this entry point's name."""
    return _parse(argv, prog=PROG)


def main(argv: list[str] | None = None) -> int:
    """`sciml.experiment.main` under this entry point's name."""
    return _main(argv, prog=PROG)


if __name__ == "__main__":
    _cli(prog=PROG)
