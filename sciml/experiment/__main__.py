"""`python -m sciml.experiment ...`: the same command as `sciml-run`."""

import sys

from sciml.experiment import main


if __name__ == "__main__":
    sys.exit(main(prog="python -m sciml.experiment"))
