"""The diagonal state-space layers: S4D (SISO, FFT convolution) and S5 (MIMO, scan).

Both hold one diagonal core `(Λ, B̃, C̃, D, log Δ)`: complex parameters as
real/imaginary pairs, `Re Λ = −exp(Λ_re)` (or `−softplus`), so `Re Λ < 0` by
construction. Both evaluate the same system three ways, selected by `mode`:

- `"conv"`: kernel by a Vandermonde product, FFT convolution (S4D's path);
- `"scan"`: all states by `lax.associative_scan` (S5's path);
- `"recurrent"`: one step at a time with `lax.scan` (reference, baseline);

and offer step mode for autoregressive use: `init_state()`, `step(state, u_t)`
and `scan(u, state)` (a chunk of steps from a given state, returning the final
state, so calls can be chained); `recurrent()` discretises once and returns a
`RecurrentSSM` whose `step` loops use.

Checks (the package's non-finite policy): the input's shape and dtype at
trace time; with `check_finite=True` (default) a concrete input (an eager
call) is checked for NaN/Inf on the host before anything runs, while inputs
traced under `jit`/`vmap`/`grad` are not checked, so compiled layers carry no
host callback (check a batch once, as `sciml.training.fit` does). A caller
that jits the layer and wants the check anyway builds it with
`check_finite="always"`: traced inputs then go through `eqx.error_if`, which
raises at run time under `jit` (at a measured 1.43x on a single layer's
forward+backward, within the noise on a train step: docs/benchmarks.md). An eager
`__call__` runs one compiled function per input shape and mode (not one small
computation per operation), so a script that calls a layer outside `jit`
compiles it once.
"""

from __future__ import annotations

import abc
import math

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Complex, Float, Inexact, PRNGKeyArray

from .._checks import check_choice, check_float_dtype, check_positive_finite
from ._discretize import check_discretization
from ._recurrent import (
    RecurrentSSM,
    check_finite_input,
    check_finite_option,
    check_real_input,
    check_sequence_shape,
)


MODES = ("conv", "scan", "recurrent")
REAL_TRANSFORMS = ("exp", "softplus")
C_INITS = ("lecun", "complex_normal")
MIN_DECAY = 1e-4  # smallest |Re Λ| at initialisation (as state-spaces/s4)


def _check_step_rescale(step_rescale):
    return check_positive_finite("step_rescale", step_rescale)


def _real_inverse(Lambda: np.ndarray, transform: str) -> np.ndarray:
    """Raw parameter whose transform gives `Re Λ` (clamped to `≤ −MIN_DECAY`)."""
    decay = np.maximum(-np.real(Lambda), MIN_DECAY)
    if transform == "exp":
        return np.log(decay)
    return decay + np.log(-np.expm1(-decay))  # inverse softplus, stable for large decay


def _complex_dtype(dtype) -> jnp.dtype:
    return jnp.result_type(dtype, jnp.complex64)


def _complex_normal(key: PRNGKeyArray, shape: tuple[int, ...], dtype) -> tuple[Array, Array]:
    """Real and imaginary parts of a complex standard normal (`E|z|² = 1`)."""
    re, im = jax.random.normal(key, (2, *shape), dtype) * math.sqrt(0.5)  # keeps `dtype`
    return re, im


def _check_options(
    features, init, inits, real_transform, mode, discretization, check_finite, dtype
):
    """The constructor options S4D and S5 share; returns the parameter dtype."""
    check_choice("init", init, inits)
    check_choice("real_transform", real_transform, REAL_TRANSFORMS)
    check_choice("mode", mode, MODES)
    check_discretization(discretization)
    check_finite_option(check_finite)
    if features < 1:
        raise ValueError(f"features must be positive, got {features}.")
    return check_float_dtype("dtype", dtype)


class _DiagonalSSM(eqx.Module):
    """The diagonal core shared by S4D and S5."""

    Lambda_re: Float[Array, "..."]
    Lambda_im: Float[Array, "..."]
    B_re: Float[Array, "..."]
    B_im: Float[Array, "..."]
    C_re: Float[Array, "directions features modes"]
    C_im: Float[Array, "directions features modes"]
    D: Float[Array, " features"]
    log_dt: Float[Array, "..."]
    features: int = eqx.field(static=True)
    state_size: int = eqx.field(static=True)
    discretization: str = eqx.field(static=True)
    real_transform: str = eqx.field(static=True)
    bidirectional: bool = eqx.field(static=True)
    mode: str = eqx.field(static=True)
    check_finite: bool | str = eqx.field(static=True)

    # names of the (Λ, B, Δ) parameters: the optimiser's "ssm" group
    ssm_parameters = ("Lambda_re", "Lambda_im", "B_re", "B_im", "log_dt")

    @property
    def Lambda(self) -> Complex[Array, "..."]:
        """Continuous eigenvalues, `Re Λ < 0`."""
        if self.real_transform == "exp":
            re = -jnp.exp(self.Lambda_re)
        else:
            re = -jax.nn.softplus(self.Lambda_re)
        return jax.lax.complex(re, self.Lambda_im)

    @property
    def B(self) -> Complex[Array, "..."]:
        return jax.lax.complex(self.B_re, self.B_im)

    @property
    def C(self) -> Complex[Array, "directions features modes"]:
        return jax.lax.complex(self.C_re, self.C_im)

    def _set_core(self, Lambda, B, C: tuple[Array, Array], D_key, log_dt, dtype) -> None:
        """Stores `Λ` (through the inverse of `real_transform`, which must be set),
        `B` and `C = (C_re, C_im)` as real pairs in `dtype`, `D ~ N(0, 1)`, `log_dt`."""
        self.Lambda_re = jnp.asarray(_real_inverse(Lambda, self.real_transform), dtype)
        self.Lambda_im = jnp.asarray(Lambda.imag, dtype)
        self.B_re, self.B_im = jnp.asarray(B.real, dtype), jnp.asarray(B.imag, dtype)
        self.C_re, self.C_im = C
        self.D = jax.random.normal(D_key, (self.features,), dtype)
        self.log_dt = log_dt

    def __call__(
        self,
        u: Inexact[Array, "length features"],
        *,
        mode: str | None = None,
        step_rescale: float = 1.0,
    ) -> Float[Array, "length features"]:
        """Applies the layer to one sequence `u` of shape `(L, H)`; returns `(L, H)`.

        A transposed input `(H, L)` is refused (a `ValueError` that says so),
        except when `L == H`: a square input cannot be told apart.

        `mode` overrides the layer's default path; `step_rescale` multiplies
        every `Δ` (zero-shot change of sampling rate, as S5's).
        """
        u = self._check_input(u)
        mode = self._check_mode(mode)
        _check_step_rescale(step_rescale)
        return _apply(self, u, mode, step_rescale)

    def _check_input(self, u: Array) -> Array:
        name = type(self).__name__
        u = check_real_input(name, "u", u)
        check_sequence_shape(name, "u", u, self.features)
        return check_finite_input(name, "u", u, self.check_finite)

    def _check_mode(self, mode: str | None) -> str:
        mode = self.mode if mode is None else mode
        check_choice("mode", mode, MODES)
        return mode

    @abc.abstractmethod
    def recurrent(self, *, step_rescale: float = 1.0) -> RecurrentSSM:
        """The discretised layer for step mode (causal layers only)."""

    def step(
        self,
        state: Complex[Array, "..."],
        u_t: Inexact[Array, " features"],
        *,
        step_rescale: float = 1.0,
    ) -> tuple[Complex[Array, "..."], Float[Array, " features"]]:
        """One recurrent step: `x ← Λ̄x + B̄u_t`, `y_t = c Re(C̃x) + Du_t`. Returns `(state, y_t)`.

        Discretises on every call; loops should step
        [`recurrent()`][sciml.ssm.S5.recurrent] instead.
        """
        return self.recurrent(step_rescale=step_rescale).step(state, u_t)

    def scan(
        self,
        u: Inexact[Array, "length features"],
        state: Complex[Array, "..."] | None = None,
        *,
        step_rescale: float = 1.0,
    ) -> tuple[Float[Array, "length features"], Complex[Array, "..."]]:
        """`L` recurrent steps from `state` (zero if `None`) by a parallel scan.

        **Returns:** `(y, final_state)`: the same outputs as `L` calls of
        `step`, so sequences can be processed in chunks.
        """
        self._check_causal("scan")
        u = self._check_input(u)
        return self.recurrent(step_rescale=step_rescale).scan(u, state)

    def _check_causal(self, what: str) -> None:
        if self.bidirectional:
            raise ValueError(
                f"{type(self).__name__}.{what}: a bidirectional layer sees future inputs and has "
                "no recurrent state; build it with bidirectional=False."
            )


@eqx.filter_jit
def _apply(layer: _DiagonalSSM, u: Array, mode: str, step_rescale) -> Array:
    """The checked call of a layer, compiled: an eager call compiles once per
    shape, mode and `step_rescale` instead of dispatching (and compiling) every
    operation; under an outer `jit` it is inlined."""
    return layer._apply(u, mode, step_rescale)
