"""Diagonal state-space layers: S4D, S5 and their PTD initialisation.

Implements Gu, Gupta, Goel, Ré, "On the Parameterization and Initialization of
Diagonal State Space Models" (S4D, NeurIPS 2022); Smith, Warrington, Linderman,
"Simplified State Space Layers for Sequence Modeling" (S5, ICLR 2023); and Yu,
Nigmetov, Morozov, Mahoney, Erichson, "Robustifying State-space Models for Long
Sequences via Approximate Diagonalization" (S4-PTD / S5-PTD, ICLR 2024), on top
of HiPPO-LegS (Gu et al., NeurIPS 2020).
"""

from ._diagonal import MODES as MODES
from ._discretize import (
    DISCRETIZATIONS as DISCRETIZATIONS,
    discrete_log_eigenvalues as discrete_log_eigenvalues,
    discretize as discretize,
)
from ._hippo import (
    hippo_legs as hippo_legs,
    hippo_normal_eig as hippo_normal_eig,
    hippo_normal_modes as hippo_normal_modes,
    hippo_nplr as hippo_nplr,
)
from ._init import (
    S4D_INITS as S4D_INITS,
    S5_INITS as S5_INITS,
    s4d_init as s4d_init,
    s4d_inv as s4d_inv,
    s4d_legs as s4d_legs,
    s4d_lin as s4d_lin,
    s4d_ptd as s4d_ptd,
    s4d_real as s4d_real,
    s5_init as s5_init,
)
from ._kernel import (
    causal_conv as causal_conv,
    causal_conv_complex as causal_conv_complex,
    vandermonde_kernel as vandermonde_kernel,
)
from ._models import (
    SequenceBlock as SequenceBlock,
    SequenceModel as SequenceModel,
    ssm_labels as ssm_labels,
)
from ._plot import (
    convergence_table as convergence_table,
    diagonal_system as diagonal_system,
    plot_convergence as plot_convergence,
)
from ._ptd import (
    TransferTarget as TransferTarget,
    legs_transfer_target as legs_transfer_target,
    optimize_perturbation as optimize_perturbation,
    ptd_eig as ptd_eig,
    ptd_frequencies as ptd_frequencies,
    ptd_objective as ptd_objective,
    ptd_perturbation as ptd_perturbation,
    shipped_ptd_sizes as shipped_ptd_sizes,
    transfer_errors as transfer_errors,
)
from ._recurrent import RecurrentSSM as RecurrentSSM
from ._s4d import S4D as S4D
from ._s5 import S5 as S5
from ._scan import (
    linear_recurrence as linear_recurrence,
    sequential_recurrence as sequential_recurrence,
)
from ._transfer import (
    diagonal_transfer as diagonal_transfer,
    hippo_transfer as hippo_transfer,
    smooth_input_distance as smooth_input_distance,
    transfer_distance as transfer_distance,
)
