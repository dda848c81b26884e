"""The linear recurrence `h_t = A_t h_{t-1} + b_t`, shared by `sciml.ssm` and `sciml.pararnn`.

Structures of the step matrices (`Diagonal`, `Block(K)`, `Dense`) carry their
algebra; methods (`SequentialScan`, `AssociativeScan`, `ChunkedScan`,
`AutoScan`) choose the evaluation order; `linear_recurrence` runs forward or
backward in time and `transposed_recurrence` solves the adjoint system.
"""

from ._linear import (
    AUTO_METHODS as AUTO_METHODS,
    AbstractScanMethod as AbstractScanMethod,
    AssociativeScan as AssociativeScan,
    AutoScan as AutoScan,
    ChunkedScan as ChunkedScan,
    SequentialScan as SequentialScan,
    default_chunk_size as default_chunk_size,
    linear_recurrence as linear_recurrence,
    transposed_recurrence as transposed_recurrence,
)
from ._structure import (
    AbstractStructure as AbstractStructure,
    Block as Block,
    Dense as Dense,
    Diagonal as Diagonal,
    infer_structure as infer_structure,
)
