from ._linear import linear_recurrence as linear_recurrence
from ._newton import (
    RESULTS as RESULTS,
    NewtonDiagnostics as NewtonDiagnostics,
    newton_solve as newton_solve,
    sequential_solve as sequential_solve,
)
from ._structure import check_structure as check_structure
