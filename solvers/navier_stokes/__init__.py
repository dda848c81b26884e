r"""2-D incompressible Navier–Stokes in vorticity form on the periodic unit square.

$$\partial_t \omega + u\cdot\nabla\omega = \nu\Delta\omega + f, \qquad
u = (\partial_y\psi, -\partial_x\psi), \qquad -\Delta\psi = \omega,$$

the setting of the FNO Navier–Stokes benchmark (Li et al., ICLR 2021). Space is
pseudo-spectral on the grid `x_i = i/s` (`s` even), with the nonlinear term
dealiased by the 2/3 rule (Fourier modes with `3|k_j| >= s` are removed from
`u·∇ω`, so for a field band-limited to the kept modes the product is exact).
Time stepping is semi-implicit: Crank–Nicolson for the viscous term and Heun's
method (explicit trapezoid) for advection and forcing, second order in `dt`:

$$\tilde\omega = \frac{(1 - \tfrac{\nu dt}{2}|k|^2)\hat\omega^n + dt(\hat f - \hat N(\omega^n))}
{1 + \tfrac{\nu dt}{2}|k|^2},\quad
\hat\omega^{n+1} = \frac{(1 - \tfrac{\nu dt}{2}|k|^2)\hat\omega^n
+ dt(\hat f - \tfrac12(\hat N(\omega^n) + \hat N(\tilde\omega)))}{1 + \tfrac{\nu dt}{2}|k|^2}$$

with `|k|² = 4π²(k_x² + k_y²)` and `N(ω) = u·∇ω`. Arrays are indexed
`w[i, j] = ω(x_i, y_j)` (x along axis 0). The default forcing is
`0.1 (sin 2π(x+y) + cos 2π(x+y))`; the initial vorticity is a Gaussian random
field with covariance `7^{3/2}(−Δ + 49 I)^{−2.5}` ([`random_vorticity`][solvers.navier_stokes.random_vorticity]).

Everything is JAX. The solver is the one-sample stepper module
[`NavierStokes`][solvers.navier_stokes.NavierStokes]: `stepper(w)` advances one
field `(1, s, s)` by `dt`; trajectories come from `solvers.stepping`'s `rollout`,
`repeat` and `record`, batches from `jax.vmap`, compilation from the caller's
`jax.jit`. `solve`, `advance` and `make_dataset` are batched, jit-compiled
conveniences over it that take `(s, s)` or `(..., s, s)` and run in float32 or
float64 (the dtype of `w0`).

**Nesting of grids.** The grid `x_i = i/s` at resolution `s` is every second
point of the grid at `2s`, and the random initial field is the same function at
every resolution (band-wise noise, see `solvers._grf`), so
`make_dataset(n, 2s, seed=q)["outputs"][..., ::2, ::2]` equals
`make_dataset(n, s, seed=q)["outputs"]` up to the spatial discretisation error
of the coarse grid.
"""

from __future__ import annotations

from ._data import (
    SHARED_KEYS as SHARED_KEYS,
    make_dataset as make_dataset,
    random_vorticity as random_vorticity,
)
from ._diagnostics import (
    enstrophy as enstrophy,
    kinetic_energy as kinetic_energy,
    palinstrophy as palinstrophy,
)
from ._exact import (
    taylor_green as taylor_green,
)
from ._params import (
    NSParams as NSParams,
    default_forcing as default_forcing,
)
from ._stepper import (
    NavierStokes as NavierStokes,
    advance as advance,
    advective_cfl as advective_cfl,
    solve as solve,
)


__all__ = [
    "NSParams",
    "NavierStokes",
    "SHARED_KEYS",
    "advance",
    "advective_cfl",
    "default_forcing",
    "enstrophy",
    "kinetic_energy",
    "make_dataset",
    "palinstrophy",
    "random_vorticity",
    "solve",
    "taylor_green",
]
