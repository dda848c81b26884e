"""The deep conjugate direction method (DCDM) for large sparse SPD systems.

A conjugate-direction Krylov-like iteration whose search directions come from a
trained convolutional network approximating `A⁻¹` up to scale (Kaneda et al.,
"A Deep Conjugate Direction Method for Iteratively Solving Linear Systems",
ICML 2023).
"""

from ._amg import DeviceAMG as DeviceAMG
from ._baselines import (
    AbstractPreconditionerBuilder as AbstractPreconditionerBuilder,
    Identity as Identity,
    IncompleteCholesky as IncompleteCholesky,
    Jacobi as Jacobi,
    Preconditioner as Preconditioner,
    SmoothedAggregationAMG as SmoothedAggregationAMG,
    ic0_pivots as ic0_pivots,
)
from ._dataset import dataset_key as dataset_key, ritz_dataset as ritz_dataset
from ._iteration import a_norm_error as a_norm_error
from ._loss import (
    a_norm_loss as a_norm_loss,
    dcdm_loss as dcdm_loss,
    scale_free_loss as scale_free_loss,
)
from ._multilevel import MultilevelDCDMNet as MultilevelDCDMNet
from ._network import (
    DCDMNet as DCDMNet,
    avg_pool2 as avg_pool2,
    direction_fn as direction_fn,
    label_channels as label_channels,
    network_input as network_input,
    upsample2 as upsample2,
)
from ._precision import PrecisionWarning as PrecisionWarning, reachable_rtol as reachable_rtol
from ._pretrained import pretrained as pretrained, pretrained_info as pretrained_info
from ._ritz import (
    lanczos as lanczos,
    low_count as low_count,
    ritz_pairs as ritz_pairs,
    ritz_rhs as ritz_rhs,
)
from ._solve import solve as solve
from ._solver import DCDM as DCDM
from ._symmetric import SymmetricDCDMNet as SymmetricDCDMNet
