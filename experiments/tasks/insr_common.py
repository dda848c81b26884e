"""What the INSR experiments share: the checks of their `field`, `solver` and
`initial` config blocks (each task's `validate_config` adds its own keys)."""

from __future__ import annotations

from sciml.experiment import check_config


FIELDS = ("siren",)
SOLVERS = ("least_squares", "adam")
SIZES = (
    "field.width",
    "field.hidden_layers",
    "solver.n_points",
    "solver.n_boundary",
    "solver.max_steps",
    "initial.max_steps",
    "eval.snapshots",
)


def validate_insr_config(config, *, positive=(), positive_numbers=(), choices=None) -> None:
    """The field and solver sizes and choices, plus a task's own keys, checked
    by the runner before anything is written."""
    check_config(
        config,
        positive=SIZES + tuple(positive),
        positive_numbers=("field.omega0", *positive_numbers),
        choices={"field.name": FIELDS, "solver.name": SOLVERS, **(choices or {})},
    )
