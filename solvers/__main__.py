"""`python -m solvers` is `python -m solvers.generate`."""

import sys

from .generate import main


sys.exit(main())
