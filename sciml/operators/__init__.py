"""Neural operators: spectral convolutions, FNO / TFNO and the multi-grid MG-TFNO.

Implements the model family of Kossaifi et al., "Multi-Grid Tensorized Fourier
Neural Operator for High-Resolution PDEs" (TMLR 2024) on top of Li et al.'s
Fourier neural operator, with `neuraloperator`'s conventions and argument names.
"""

from ._fno import (
    FNO as FNO,
    TFNO as TFNO,
    FNOBlock as FNOBlock,
    JointSpectralConv as JointSpectralConv,
)
from ._layers import (
    ChannelMLP as ChannelMLP,
    GroupNorm as GroupNorm,
    InstanceNorm as InstanceNorm,
    PointwiseLinear as PointwiseLinear,
    SoftGating as SoftGating,
    gelu_exact as gelu_exact,
    grid_embedding as grid_embedding,
)
from ._losses import (
    finite_difference as finite_difference,
    h1_loss as h1_loss,
    relative_lp_loss as relative_lp_loss,
)
from ._mgtfno import MGTFNO as MGTFNO
from ._patching import (
    domain_reduction as domain_reduction,
    multigrid_patches as multigrid_patches,
    patch_padding as patch_padding,
    split_tiles as split_tiles,
    stitch_patches as stitch_patches,
    window_indices as window_indices,
)
from ._ranks import (
    cp_rank as cp_rank,
    factorized_size as factorized_size,
    tt_rank as tt_rank,
    tucker_rank as tucker_rank,
)
from ._spectral import (
    ConvOptions as ConvOptions,
    SpectralConv as SpectralConv,
    contract as contract,
    conv_options as conv_options,
    inverse_rfftn as inverse_rfftn,
    kept_shape as kept_shape,
    place_modes as place_modes,
    spectral_conv as spectral_conv,
    take_modes as take_modes,
)
from ._tensors import (
    CPTensor as CPTensor,
    DenseTensor as DenseTensor,
    JointTuckerTensor as JointTuckerTensor,
    TTTensor as TTTensor,
    TuckerTensor as TuckerTensor,
    make_tensor as make_tensor,
    reconstruct as reconstruct,
)
