"""Classical numerical PDE solvers and linear-system builders.

Data generators, ground truth and baselines for the models in `sciml`. Plain
numerical code: this package never imports `sciml`.

- `solvers.navier_stokes`: 2-D vorticity Navier–Stokes, periodic, pseudo-spectral (JAX).
- `solvers.darcy`: Darcy flow with a thresholded random coefficient (scipy).
- `solvers.heat`: 2-D heat equation, parameterised boundary/initial temperatures (JAX).
- `solvers.burgers`: 1-D viscous Burgers, periodic, pseudo-spectral (JAX).
- `solvers.poisson`: pressure-Poisson systems on voxel grids (scipy CSR + JAX matrix-free).
- `solvers.advection`: 1-D linear advection, Crank–Nicolson with upwind or central differences (INSR grid baselines).
- `solvers.mesh_fields`: P1/P2 Lagrange fields on a triangle mesh (INSR elasticity mesh baselines).
- `solvers.stepping`: the time loop the time-dependent solvers share. Their
  solvers are one-sample stepper modules (`NavierStokes`, `Heat`, `Burgers`:
  `stepper(u)` advances one field `(channels, *grid)` by `dt`), and
  `rollout` / `repeat` / `record` build trajectories; callers `vmap` and `jit`.
- `python -m solvers.generate <problem> ...`: HDF5 data sets.
"""
