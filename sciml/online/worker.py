"""`python -m sciml.online.worker JOB.json`: the solver process (see `_worker`).

A module of its own that the package does not import, so that running it with
`-m` executes it once, fresh.
"""

import sys

from ._worker import main


if __name__ == "__main__":
    sys.exit(main())
