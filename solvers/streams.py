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
from .navier_stokes import NavierStokes, random_vorticity
from .stepping import repeat


__all__ = ["navier_stokes_pairs"]


@eqx.filter_jit
def _advance(stepper, w):
    return stepper(w)


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
    check_positive("interval", interval)
    check_positive("dt", dt)
    substeps = round(interval / dt)
    if substeps < 1 or abs(substeps * dt - interval) > 1e-9 * interval:
        raise ValueError(f"`interval` ({interval}) must be a whole multiple of `dt` ({dt}).")
    check_choice("dtype", dtype, ("float32", "float64"))
    jdtype = jnp.dtype(dtype)
    stepper = repeat(NavierStokes(resolution, viscosity=viscosity, dt=dt, dtype=jdtype), substeps)
    w = random_vorticity(jax.random.key(int(seed)), 1, resolution, dtype=jdtype)
    w = np.asarray(w)
    for _ in range(int(n_steps)):
        w_next = np.asarray(_advance(stepper, jnp.asarray(w)))
        yield {"w": w, "w_next": w_next}
        w = w_next
