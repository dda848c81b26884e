"""Implicit neural spatial representations (INSR) for time-dependent PDEs.

The field is a neural network on one point `(d,) -> (C,)`; each time step
finds the new weights by minimising a classical integrator's residual between
the new network and the frozen previous one (Chen, Wu, Guo, Grinspun, Zheng,
"Implicit Neural Spatial Representations for Time-dependent PDEs", ICML 2023).
Per-step solvers: the paper's Adam loop, or Gauss–Newton / Levenberg–Marquardt
on the per-point residuals (optimistix).
"""

from .._monitor import AbstractMonitor as AbstractMonitor
from ._adam import AdamSolver as AdamSolver
from ._advection import (
    Advection1D as Advection1D,
    advection_exact as advection_exact,
    gaussian as gaussian,
)
from ._collocation import Collocation as Collocation
from ._constraints import (
    AbstractConstraint as AbstractConstraint,
    Clamp as Clamp,
    ExactBoundaryField as ExactBoundaryField,
    Pin as Pin,
    Roller as Roller,
)
from ._differential import (
    divergence as divergence,
    gradient as gradient,
    laplacian as laplacian,
    wall_normal as wall_normal,
)
from ._elasticity import SCENES as SCENES, Elasticity2D as Elasticity2D
from ._fourier import (
    FourierBasis as FourierBasis,
    FourierFeatureMLP as FourierFeatureMLP,
    FunctionField as FunctionField,
    PeriodicEmbedding as PeriodicEmbedding,
    fourier_features as fourier_features,
)
from ._hyperelastic import (
    arap_residual as arap_residual,
    contact_residual as contact_residual,
    elastic_residual as elastic_residual,
    energy_density as energy_density,
    inertia_residual as inertia_residual,
    polar_rotation as polar_rotation,
)
from ._incremental_potential import IncrementalPotential as IncrementalPotential
from ._integrate import (
    SaveAt as SaveAt,
    field_at as field_at,
    fit_initial as fit_initial,
    integrate as integrate,
    number_of_steps as number_of_steps,
)
from ._integrators import (
    AbstractIntegrator as AbstractIntegrator,
    AbstractPointwiseIntegrator as AbstractPointwiseIntegrator,
    AbstractResidualIntegrator as AbstractResidualIntegrator,
    ExplicitEuler as ExplicitEuler,
    ImplicitEuler as ImplicitEuler,
    Midpoint as Midpoint,
    StepObjective as StepObjective,
)
from ._least_squares import LeastSquaresSolver as LeastSquaresSolver
from ._lifting import LiftedField as LiftedField, boundary_lift as boundary_lift
from ._objective import (
    AbstractObjective as AbstractObjective,
    InitialObjective as InitialObjective,
)
from ._problem import (
    AbstractElasticProblem as AbstractElasticProblem,
    AbstractEvolutionProblem as AbstractEvolutionProblem,
    AbstractGridProblem as AbstractGridProblem,
    AbstractIncompressibleProblem as AbstractIncompressibleProblem,
    AbstractProblem as AbstractProblem,
)
from ._projection import (
    AbstractProjection as AbstractProjection,
    StrongProjection as StrongProjection,
    VariationalProjection as VariationalProjection,
)
from ._siren import SIREN as SIREN, siren_weight_bound as siren_weight_bound
from ._splitting import (
    AdvectionObjective as AdvectionObjective,
    DiffusionObjective as DiffusionObjective,
    PressureObjective as PressureObjective,
    ProjectionObjective as ProjectionObjective,
    Splitting as Splitting,
    backtrack as backtrack,
)
from ._step_solver import AbstractStepSolver as AbstractStepSolver
from ._stopping import Stopping as Stopping
from ._taylor_green import (
    TaylorGreen2D as TaylorGreen2D,
    taylor_green_pressure as taylor_green_pressure,
    taylor_green_velocity as taylor_green_velocity,
)
from ._truncated import Truncated as Truncated
