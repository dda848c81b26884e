"""Solver runs as streams of time steps, for online training.

An online study (`sciml.online`) names a function of this shape by its dotted
path and runs it in solver processes beside the trainer:

```python
def stream(params: dict[str, float], *, seed: int, **settings) -> Iterator[dict[str, np.ndarray]]
```

Each call is one run: `params` are the sampled parameters of the run, `seed`
its random seed (the same seed gives the same run, so a restarted run re-sends
identical steps), `settings` the fixed keyword arguments of the study. It yields
one dict of named numpy fields per time step, always the same names, shapes and
dtypes; the study sends step `k` as sample `(run, k)`.

The functions compile their stepper once per process and parameter set and
yield numpy arrays (what crosses the wire), not JAX arrays.
"""

from __future__ import annotations

from collections.abc import Iterator

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from ._grid import check_choice, check_positive, check_resolution
from .heat import ExplicitEuler, Heat, initial_field
from .navier_stokes import NavierStokes, random_vorticity
from .stepping import repeat


__all__ = ["HEAT_PARAMS", "heat_fields", "navier_stokes_pairs"]

#: The parameters of a heat run: initial temperature, then the four sides.
HEAT_PARAMS = ("T0", "T_left", "T_right", "T_bottom", "T_top")


@eqx.filter_jit
def _advance(stepper, w):
    return stepper(w)


def _substeps(interval: float, dt: float) -> int:
    check_positive("interval", interval)
    check_positive("dt", dt)
    substeps = round(interval / dt)
    if substeps < 1 or abs(substeps * dt - interval) > 1e-9 * interval:
        raise ValueError(f"`interval` ({interval}) must be a whole multiple of `dt` ({dt}).")
    return substeps


def navier_stokes_pairs(
    params: dict[str, float],
    *,
    seed: int,
    resolution: int = 64,
    n_steps: int = 20,
    interval: float = 0.25,
    dt: float = 5e-3,
    dtype: str = "float32",
) -> Iterator[dict[str, np.ndarray]]:
    """Vorticity pairs `(ω(t_k), ω(t_k + interval))` of one 2-D Navier–Stokes run.

    The periodic unit square with the FNO forcing, viscosity `params["viscosity"]`,
    the initial vorticity a Gaussian random field (the FNO benchmark's
    covariance) drawn from `seed`; `t_k = k · interval`. A surrogate trained on
    these pairs learns the flow map over `interval` for a range of viscosities.

    **Arguments:**

    - `params`: `{"viscosity": ν}` with ν > 0.
    - `seed`: the initial field's seed (an int >= 0).
    - `resolution`: grid size `s` (even).
    - `n_steps`: the number of pairs (time steps of the stream).
    - `interval`: time between the two fields of a pair; a multiple of `dt`.
    - `dt`: the solver's time step.
    - `dtype`: the fields' dtype, `"float32"` or `"float64"`.

    **Yields:** `n_steps` dicts `{"w": (1, s, s), "w_next": (1, s, s)}`.
    """
    viscosity = params["viscosity"]
    check_positive("params['viscosity']", viscosity)
    check_resolution(resolution)
    substeps = _substeps(interval, dt)
    check_choice("dtype", dtype, ("float32", "float64"))
    jdtype = jnp.dtype(dtype)
    stepper = repeat(NavierStokes(resolution, viscosity=viscosity, dt=dt, dtype=jdtype), substeps)
    w = random_vorticity(jax.random.key(int(seed)), 1, resolution, dtype=jdtype)
    w = np.asarray(w)
    for _ in range(int(n_steps)):
        w_next = np.asarray(_advance(stepper, jnp.asarray(w)))
        yield {"w": w, "w_next": w_next}
        w = w_next


def heat_fields(
    params: dict[str, float],
    *,
    seed: int,
    resolution: int = 32,
    n_steps: int = 100,
    interval: float = 1e-3,
    dt: float = 2.5e-4,
    diffusivity: float = 1.0,
    dtype: str = "float32",
) -> Iterator[dict[str, np.ndarray]]:
    r"""Temperature fields `T(t_k)` of one 2-D heat-equation run, `t_k = k · interval`.

    The online-learning paper's heat use case (Meyer et al., ICML 2023):
    $\partial_t T = \kappa \Delta T$ on the unit square with constant Dirichlet
    temperatures on the four sides and a constant initial temperature inside,
    explicit (forward) Euler in time and the 5-point Laplacian on the node grid
    `x_i = i/(s−1)` ([`Heat`][solvers.heat.Heat] with
    [`ExplicitEuler`][solvers.heat.ExplicitEuler]; corners hold the mean of their
    two sides). The five parameters are the surrogate's inputs, with `t`.

    **Arguments:**

    - `params`: `{"T0", "T_left", "T_right", "T_bottom", "T_top": float}`
      (finite): the initial temperature inside and the temperatures of the
      sides `x = 0`, `x = 1`, `y = 0`, `y = 1` (`x` along axis 0).
    - `seed`: unused (a run is a function of its parameters); accepted for the
      stream contract.
    - `resolution`: nodes per side `s` (boundary included), `>= 3`.
    - `n_steps`: the number of fields yielded.
    - `interval`: time between two yielded fields; a multiple of `dt`.
    - `dt`: the solver's time step; needs `r = κ dt (s−1)² <= 1/4` (stability
      of the explicit scheme).
    - `diffusivity`: κ > 0.
    - `dtype`: the fields' dtype, `"float32"` or `"float64"`.

    **Yields:** `n_steps` dicts `{"t": (1,), "temperature": (1, s, s)}` for
    `k = 1 … n_steps` (the initial field, a function of the parameters alone,
    is not yielded).
    """
    if not isinstance(params, dict) or set(params) != set(HEAT_PARAMS):
        raise ValueError(
            f"`params` must be a dict with exactly the keys {HEAT_PARAMS}, got "
            f"{sorted(params) if isinstance(params, dict) else params!r}."
        )
    for name in HEAT_PARAMS:
        value = params[name]
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not np.isfinite(value):
            raise ValueError(f"params[{name!r}] must be a finite number, got {value!r}.")
    check_resolution(resolution, periodic=False)
    check_positive("diffusivity", diffusivity)
    substeps = _substeps(interval, dt)
    r = diffusivity * dt * (resolution - 1) ** 2
    if r > 0.25 * (1 + 1e-12):
        raise ValueError(
            f"`dt` ({dt}) is too large for the explicit scheme: r = diffusivity*dt*(resolution-1)^2 "
            f"= {r:.4g} > 1/4; use dt <= {0.25 / (diffusivity * (resolution - 1) ** 2):.4g}."
        )
    check_choice("dtype", dtype, ("float32", "float64"))
    jdtype = jnp.dtype(dtype)
    stepper = repeat(
        Heat(resolution, diffusivity=diffusivity, dt=dt, scheme=ExplicitEuler(), dtype=jdtype),
        substeps,
    )
    theta = jnp.asarray([params[name] for name in HEAT_PARAMS], jdtype)
    field = initial_field(theta, resolution)[None]
    for k in range(1, int(n_steps) + 1):
        field = _advance(stepper, field)
        t = np.asarray([k * interval], dtype)
        yield {"t": t, "temperature": np.asarray(field)}
