"""Newton-parallel evaluation and training of nonlinear RNNs (ParaRNN, DEER, ELK).

A recurrence `h_t = f(h_{t-1}, x_t)` is solved for the whole trajectory at once
by Newton's method; each Newton step is a linear recurrence solved in parallel
over time, and gradients come from one reverse linear recurrence
(implicit-function theorem). Cells declare the structure of `∂f/∂h`
(diagonal, `K × K` blocks of diagonals, dense), which fixes the cost of a step.
"""

from ._cells import (
    GRU as GRU,
    LSTM as LSTM,
    AbstractCell as AbstractCell,
    ParaGRU as ParaGRU,
    ParaLSTM as ParaLSTM,
)
from ._elk import kalman_filter_means as kalman_filter_means
from ._layers import (
    RNN as RNN,
    RNNBlock as RNNBlock,
    RNNModel as RNNModel,
    choose_mode as choose_mode,
    make_cell as make_cell,
)
from ._linear import (
    default_chunk_size as default_chunk_size,
    default_method as default_method,
    linear_recurrence as linear_recurrence,
)
from ._newton import (
    RESULTS as RESULTS,
    NewtonDiagnostics as NewtonDiagnostics,
    default_tolerance as default_tolerance,
    newton_solve as newton_solve,
    sequential_solve as sequential_solve,
)
from ._structure import check_structure as check_structure
