"""Type aliases shared across sciml's annotations (checked at run time in tests)."""

from __future__ import annotations


# A real number given in Python: runtime type checkers do not treat `int` as a
# `float` (PEP 484's numeric tower is a static-checker convention), so a ratio
# or tolerance that a user may write as `2` is annotated with this alias.
Real = float | int
