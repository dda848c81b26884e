"""Newton-parallel evaluation and training of nonlinear RNNs (ParaRNN, DEER, ELK).

A recurrence `h_t = f(h_{t-1}, x_t)` is solved for the whole trajectory at once
by Newton's method; each Newton step is a linear recurrence
([`sciml.recurrence`][sciml.recurrence]) solved in parallel over time, and
gradients come from one transposed linear recurrence (implicit-function
theorem). Cells declare the structure of `∂f/∂h` (`Diagonal()`, `Block(K)`,
`Dense()`), which fixes the cost of a step. The solver is a module:
`solve_recurrence(cell, h0, xs, Fallback(Newton(), Sequential()))` returns a
[`Solution`][sciml.solution.Solution].
"""

from ..recurrence import (
    AssociativeScan as AssociativeScan,
    AutoScan as AutoScan,
    Block as Block,
    ChunkedScan as ChunkedScan,
    Dense as Dense,
    Diagonal as Diagonal,
    SequentialScan as SequentialScan,
    default_chunk_size as default_chunk_size,
    linear_recurrence as linear_recurrence,
    transposed_recurrence as transposed_recurrence,
)
from ..solution import RESULTS as RESULTS, Solution as Solution
from ._auto import CROSSOVERS as CROSSOVERS, Auto as Auto
from ._cells import (
    GRU as GRU,
    LSTM as LSTM,
    AbstractCell as AbstractCell,
    ParaGRU as ParaGRU,
    ParaLSTM as ParaLSTM,
    declared_structure as declared_structure,
)
from ._damped import DampedNewton as DampedNewton
from ._elk import kalman_filter_means as kalman_filter_means
from ._fallback import Fallback as Fallback
from ._layers import (
    RNN as RNN,
    RNNBlock as RNNBlock,
    RNNModel as RNNModel,
    make_cell as make_cell,
)
from ._newton import Newton as Newton
from ._sequential import Sequential as Sequential
from ._solve import solve_recurrence as solve_recurrence
from ._solvers import (
    AbstractSolver as AbstractSolver,
    default_tolerance as default_tolerance,
    sequential_solve as sequential_solve,
)
from ._structure import check_structure as check_structure
