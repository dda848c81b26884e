"""Navier–Stokes stepping: the JAX stepper module against plain numpy.

Both run the same scheme (pseudo-spectral vorticity form, 2/3 dealiasing,
Crank–Nicolson viscous term, Heun advection and forcing;
`solvers.navier_stokes.NavierStokes`) on a batch of trajectories in float32, in
the same process. JAX: `jax.jit(jax.vmap(repeat(stepper, n)))` (the final field,
as the numpy loop) and `jax.jit(jax.vmap(rollout(stepper, n)))` (every field of
the trajectory, one inverse FFT more per step). Reported: time steps per second
for the whole batch and the ratios jax / numpy. Also checks that both give the
same fields.

usage: python -m benchmarks.solvers [--quick] [--batch 32] [--resolutions 64 256]
"""

from __future__ import annotations

import argparse

import jax
import jax.numpy as jnp
import numpy as np

from benchmarks._common import emit, environment, time_fn
from solvers import navier_stokes as ns
from solvers.stepping import repeat, rollout


class NumpyNavierStokes:
    """The scheme of `solvers.navier_stokes` in plain numpy, batched over axis 0."""

    def __init__(self, s: int, viscosity: float, dt: float, dtype=np.float32):
        kx = np.fft.fftfreq(s) * s
        ky = np.fft.rfftfreq(s) * s
        cdtype = np.result_type(dtype, np.complex64)
        self.s, self.dt = s, dtype(dt)
        self.ikx = (2j * np.pi * kx[:, None] * np.ones_like(ky)).astype(cdtype)
        self.iky = (2j * np.pi * np.ones_like(kx)[:, None] * ky).astype(cdtype)
        lap = 4 * np.pi**2 * (kx[:, None] ** 2 + ky[None, :] ** 2)
        self.inv_lap = np.where(lap == 0, 0, 1 / np.where(lap == 0, 1, lap)).astype(dtype)
        self.mask = ((3 * np.abs(kx)[:, None] < s) & (3 * np.abs(ky)[None, :] < s)).astype(dtype)
        self.lhs = (1 + 0.5 * dt * viscosity * lap).astype(dtype)
        self.rhs = (1 - 0.5 * dt * viscosity * lap).astype(dtype)
        x = np.arange(s) / s
        phase = 2 * np.pi * (x[:, None] + x[None, :])
        forcing = 0.1 * (np.sin(phase) + np.cos(phase))
        self.f_hat = np.fft.rfft2(forcing).astype(cdtype)

    def nonlinear(self, w_hat):
        s = self.s
        psi = w_hat * self.inv_lap
        u = np.fft.irfft2(self.iky * psi, s=(s, s))
        v = -np.fft.irfft2(self.ikx * psi, s=(s, s))
        wx = np.fft.irfft2(self.ikx * w_hat, s=(s, s))
        wy = np.fft.irfft2(self.iky * w_hat, s=(s, s))
        return np.fft.rfft2(u * wx + v * wy) * self.mask

    def advance(self, w, n_steps: int):
        w_hat = np.fft.rfft2(w)
        dt = self.dt
        for _ in range(n_steps):
            n0 = self.nonlinear(w_hat)
            base = self.rhs * w_hat + dt * self.f_hat
            tilde = (base - dt * n0) / self.lhs
            n1 = self.nonlinear(tilde)
            w_hat = (base - 0.5 * dt * (n0 + n1)) / self.lhs
        return np.fft.irfft2(w_hat, s=(self.s, self.s))


def bench(resolution: int, batch: int, jax_steps: int, numpy_steps: int) -> dict:
    viscosity, dt = 1e-3, 1e-3
    w0 = ns.random_vorticity(jax.random.key(0), batch, resolution, dtype=jnp.float32)[:, None]
    w0_np = np.asarray(w0[:, 0])
    stepper = ns.NavierStokes(resolution, viscosity=viscosity, dt=dt, dtype=jnp.float32)
    reference = NumpyNavierStokes(resolution, viscosity, dt)

    check_j = np.asarray(jax.jit(jax.vmap(repeat(stepper, 10)))(w0)[:, 0])
    check_n = reference.advance(w0_np, 10)
    max_diff = float(np.abs(check_j - check_n).max() / np.abs(check_n).max())

    final = jax.jit(jax.vmap(repeat(stepper, jax_steps)))
    trajectory = jax.jit(jax.vmap(rollout(stepper, jax_steps)))
    t_jax = time_fn(final, w0, repeats=3)
    t_roll = time_fn(trajectory, w0, repeats=3)
    t_np = time_fn(lambda w: reference.advance(w, numpy_steps), w0_np, warmup=1, repeats=3)
    jax_rate = jax_steps / t_jax["median_s"]
    roll_rate = jax_steps / t_roll["median_s"]
    np_rate = numpy_steps / t_np["median_s"]
    return {
        "benchmark": "navier_stokes_steps",
        "resolution": resolution,
        "batch": batch,
        "dtype": "float32",
        "jax_steps_per_s": jax_rate,
        "jax_rollout_steps_per_s": roll_rate,
        "numpy_steps_per_s": np_rate,
        "ratio_jax_over_numpy": jax_rate / np_rate,
        "ratio_jax_rollout_over_numpy": roll_rate / np_rate,
        "jax_compile_s": t_jax["compile_s"],
        "max_rel_diff_after_10_steps": max_diff,
        **environment(),
    }


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small sizes (32², 64², batch 8)")
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--resolutions", type=int, nargs="+", default=[64, 256])
    args = parser.parse_args(argv)
    resolutions, batch = ([32, 64], 8) if args.quick else (args.resolutions, args.batch)
    for s in resolutions:
        heavy = s * s * batch > 64 * 64 * 32
        emit(bench(s, batch, jax_steps=20 if heavy else 100, numpy_steps=2 if heavy else 10))


if __name__ == "__main__":
    main()
