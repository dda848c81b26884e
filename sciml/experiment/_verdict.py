"""The line a run ends with: its headline number beside its baseline, the wall
time, and where the plots and the summary are.

A task module may declare its headline as a module constant,

    HEADLINE = Headline("val_rel_l2", "validation rel. L2", percent=True,
                        baseline="persistence_rel_l2", baseline_name="persistence")

and the runner then ends with

    done in 8 min 12 s: validation rel. L2 1.37 % (persistence 12.4 %)
      plots: runs/online_ns_tfno/<time>/plots/, summary: runs/online_ns_tfno/<time>/summary.json
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any


@dataclasses.dataclass(frozen=True)
class Headline:
    """A task's headline: which summary value a run is judged by, and against what.

    **Arguments:** `metric`, the summary key (a dotted path into nested
    summaries, `"eval.scene.iterations"`); `name`, its words on the terminal;
    `baseline` and `baseline_name`, the same for the value it is compared with
    (optional); `percent`, show both as percentages (relative errors).
    """

    metric: str
    name: str
    baseline: str | None = None
    baseline_name: str | None = None
    percent: bool = False

    def __post_init__(self):
        for field in ("metric", "name"):
            if not isinstance(getattr(self, field), str) or not getattr(self, field):
                raise TypeError(
                    f"`{field}` must be a non-empty string, got {getattr(self, field)!r}."
                )
        if (self.baseline is None) != (self.baseline_name is None):
            raise ValueError("give `baseline` and `baseline_name` together, or neither.")

    def describe(self, summary: dict[str, Any]) -> str | None:
        """`"validation rel. L2 1.37 % (persistence 12.4 %)"`, or None when the
        summary lacks the metric."""
        value = _lookup(summary, self.metric)
        if value is None:
            return None
        text = f"{self.name} {self._number(value)}"
        base = None if self.baseline is None else _lookup(summary, self.baseline)
        if base is not None:
            text += f" ({self.baseline_name} {self._number(base)})"
        return text

    def _number(self, value: int | float) -> str:
        return f"{100 * value:.3g} %" if self.percent else f"{value:.4g}"


def _lookup(summary: dict[str, Any], key: str) -> int | float | None:
    value: Any = summary
    for part in key.split("."):
        if not isinstance(value, dict) or part not in value:
            return None
        value = value[part]
    return value if isinstance(value, int | float) and not isinstance(value, bool) else None


def duration(seconds: float) -> str:
    """`"41 s"`, `"8 min 12 s"`, `"1 h 02 min"` (seconds below 10 with one decimal)."""
    if seconds < 10:
        return f"{seconds:.1f} s"
    seconds = int(round(seconds))
    hours, rest = divmod(seconds, 3600)
    minutes, secs = divmod(rest, 60)
    if hours:
        return f"{hours} h {minutes:02d} min"
    return f"{minutes} min {secs:02d} s" if minutes else f"{secs} s"


def verdict(
    summary: dict[str, Any], headline: Headline | None, seconds: float, workdir: str | Path
) -> str:
    """The closing lines of a run (see the module docstring)."""
    workdir = Path(workdir)
    first = f"done in {duration(seconds)}"
    described = None if headline is None else headline.describe(summary)
    if described is not None:
        first += f": {described}"
    return f"{first}\n  plots: {workdir / 'plots'}/, summary: {workdir / 'summary.json'}"
