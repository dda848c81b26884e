"""S4D: `H` independent SISO diagonal SSMs, evaluated by FFT convolution."""

from __future__ import annotations

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Complex, Float, PRNGKeyArray

from ._diagonal import (
    _check_options,
    _check_step_rescale,
    _complex_dtype,
    _complex_normal,
    _DiagonalSSM,
)
from ._discretize import discrete_log_eigenvalues
from ._init import S4D_INITS, _check_even, log_dt_init, s4d_init
from ._kernel import causal_conv, vandermonde_kernel
from ._recurrent import RecurrentSSM
from ._scan import linear_recurrence, sequential_recurrence


class S4D(_DiagonalSSM):
    r"""S4D: `H` independent SISO diagonal SSMs, evaluated by FFT convolution.

    Channel `h` with input `u_h` computes `x' = Λx + B u_h`, `y_h = 2Re(C_h x) +
    D_h u_h` with `N/2` complex modes (conjugate symmetry: state size `N`), ZOH
    or bilinear discretisation with its own step `Δ_h`, and the kernel
    `K_h[l] = 2 Re Σ_n C_{hn} B̄_{hn} λ̄_{hn}^l`. `n_ssm` copies of `(Λ, B)` are
    shared across the channels (channel `h` uses copy `h mod n_ssm`), as in
    `state-spaces/s4`.

    **Arguments:**

    - `features`: number of channels `H`.
    - `state_size`: `N` (even); `N/2` complex modes are stored.
    - `init`: `"legs"` (S4D-LegS; `"hippo-n"` is a synonym), `"lin"`, `"inv"`,
      `"real"`, `"ptd"` (S4-PTD), or `"diag"` (half the copies Inv, half Lin;
      needs an even `n_ssm`).
    - `discretization`: `"zoh"` (default) or `"bilinear"`.
    - `dt_min`, `dt_max`: `log Δ ~ U[log dt_min, log dt_max]` per channel.
    - `n_ssm`: number of independent `(Λ, B)` copies; must divide `features`.
    - `bidirectional`: add an anti-causal kernel (second `C`) that sees the
      strictly future inputs, as S4's bidirectional mode.
    - `real_transform`: `"exp"` (`Re Λ = −exp(θ)`) or `"softplus"`.
    - `b_scale`, `b_clip`: S4D-LegS's `B = b_scale VᴴB_HiPPO` with `Im B`
      clipped to `±b_clip` (reference `1`, `2`; `0.5`, `None` converges to
      HiPPO-LegS). Ignored by other inits.
    - `mode`: default evaluation path, `"conv"`, `"scan"` or `"recurrent"`.
    - `check_finite`: `True` (default): raise a `ValueError` naming `u` when a
      concrete input (an eager call) holds NaN or Inf; inputs traced under
      `jit`, `vmap` or `grad` are not checked (no check in compiled code:
      check a batch once before the compiled step, as `sciml.training.fit`
      does). `"always"`: check traced inputs too, with an `eqx.error_if` in
      the compiled layer, so a jitted call on NaN/Inf raises (an
      `EquinoxRuntimeError` naming `u`); this is how a jitted caller gets the
      check, at a cost (see the module docs). `False`: no check.
    - `dtype`: real floating parameter dtype (default: JAX's default float);
      a `TypeError` otherwise. `float64` needs `jax_enable_x64` (without it:
      a warning, and float32).
    - `key`: PRNG key (for `C`, `D`, `log Δ`).

    Parameters: `C ~ CN(0, 1)` `(directions, H, N/2)`, `D ~ N(0, 1)` `(H,)`,
    `log_dt (H,)`, `Λ, B`: `(n_ssm, N/2)`.
    """

    n_ssm: int = eqx.field(static=True)

    def __init__(
        self,
        features: int,
        state_size: int = 64,
        *,
        init: str = "legs",
        discretization: str = "zoh",
        dt_min: float = 1e-3,
        dt_max: float = 1e-1,
        n_ssm: int = 1,
        bidirectional: bool = False,
        real_transform: str = "exp",
        b_scale: float = 1.0,
        b_clip: float | None = 2.0,
        mode: str = "conv",
        check_finite: bool | str = True,
        dtype=None,
        key: PRNGKeyArray,
    ):
        dtype = _check_options(
            features, init, S4D_INITS, real_transform, mode, discretization, check_finite, dtype
        )
        _check_even(state_size, "state_size")
        if n_ssm < 1 or features % n_ssm:
            raise ValueError(f"n_ssm={n_ssm} must be a positive divisor of features={features}.")
        if init == "diag" and n_ssm % 2:
            raise ValueError(
                f"init='diag' gives half the (Λ, B) copies S4D-Inv and half S4D-Lin, so it needs "
                f"an even n_ssm; got n_ssm={n_ssm}."
            )
        copies = []
        for i in range(n_ssm):
            name = ("inv" if i < n_ssm // 2 else "lin") if init == "diag" else init
            copies.append(s4d_init(name, state_size, b_scale=b_scale, b_clip=b_clip))
        Lambda = np.stack([c[0] for c in copies])
        B = np.stack([c[1] for c in copies])
        c_key, d_key, dt_key = jax.random.split(key, 3)
        directions = 2 if bidirectional else 1
        modes = state_size // 2
        self.features, self.state_size, self.n_ssm = features, state_size, n_ssm
        self.discretization, self.real_transform = discretization, real_transform
        self.bidirectional, self.mode, self.check_finite = bidirectional, mode, check_finite
        C = _complex_normal(c_key, (directions, features, modes), dtype)
        log_dt = log_dt_init(dt_key, (features,), dt_min, dt_max, dtype)
        self._set_core(Lambda, B, C, d_key, log_dt, dtype)

    def _discrete(self, step_rescale) -> tuple[Array, Array]:
        """`(log λ̄, B̄)` per channel, each `(H, N/2)`."""
        reps = (self.features // self.n_ssm, 1)
        Lambda, B = jnp.tile(self.Lambda, reps), jnp.tile(self.B, reps)
        dt = jnp.exp(self.log_dt) * _check_step_rescale(step_rescale)
        log_Lambda_bar, gamma = discrete_log_eigenvalues(Lambda, dt[:, None], self.discretization)
        return log_Lambda_bar, gamma * B

    def kernel(
        self, length: int, *, step_rescale: float = 1.0
    ) -> Float[Array, "directions features length"]:
        """The real convolution kernel `K[d, h, l] = 2 Re Σ_n C_{dhn} B̄_{hn} λ̄_{hn}^l`."""
        log_Lambda_bar, B_bar = self._discrete(step_rescale)
        K = vandermonde_kernel(log_Lambda_bar, self.C * B_bar, length)
        return 2 * K.real

    def _apply(self, u: Array, mode: str, step_rescale) -> Array:
        if mode == "conv":
            K = self.kernel(u.shape[0], step_rescale=step_rescale)
            y = causal_conv(u, K[0], K[1] if self.bidirectional else None)
        else:
            recurrence = linear_recurrence if mode == "scan" else sequential_recurrence
            log_Lambda_bar, B_bar = self._discrete(step_rescale)
            Lambda_bar, v = jnp.exp(log_Lambda_bar), u[:, :, None] * B_bar
            C = self.C
            y = 2 * jnp.sum(C[0] * recurrence(Lambda_bar, v), -1).real
            if self.bidirectional:
                future = recurrence(Lambda_bar, v, reverse=True)
                future = jnp.concatenate([future[1:], jnp.zeros_like(future[:1])])
                y = y + 2 * jnp.sum(C[1] * future, -1).real
        return (y + self.D * u).astype(jnp.result_type(u.dtype, self.D.dtype))

    def recurrent(self, *, step_rescale: float = 1.0) -> RecurrentSSM:
        """The discretised layer for step mode (causal layers only)."""
        self._check_causal("recurrent")
        log_Lambda_bar, B_bar = self._discrete(step_rescale)
        return RecurrentSSM(
            jnp.exp(log_Lambda_bar), B_bar, self.C[0], self.D, False, 2.0, self.check_finite
        )

    def init_state(self) -> Complex[Array, "features modes"]:
        """Zero state `(H, N/2)` (complex)."""
        return jnp.zeros((self.features, self.state_size // 2), _complex_dtype(self.D.dtype))
