"""`python -m sciml.experiment ...`: the same command as `sciml-run`."""

from sciml.experiment import cli


if __name__ == "__main__":
    cli(prog="python -m sciml.experiment")
