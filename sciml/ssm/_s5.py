"""S5: one MIMO diagonal SSM over all features, evaluated by a parallel scan."""

from __future__ import annotations

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Complex, PRNGKeyArray

from .._checks import check_choice
from ._diagonal import (
    C_INITS,
    _check_options,
    _check_step_rescale,
    _complex_dtype,
    _complex_normal,
    _DiagonalSSM,
)
from ._discretize import discrete_log_eigenvalues
from ._init import S5_INITS, log_dt_init, s5_init
from ._kernel import causal_conv_complex
from ._recurrent import RecurrentSSM
from ._scan import linear_recurrence, sequential_recurrence


class S5(_DiagonalSSM):
    r"""S5: one MIMO diagonal SSM over all `H` features, evaluated by a parallel scan.

    `x_t = Λ̄ x_{t−1} + B̄ u_t`, `y_t = c Re(C̃ x_t) + D ⊙ u_t` with `P'` complex
    modes (`P' = P/2` and `c = 2` with conjugate symmetry, else `P' = P`,
    `c = 1`), one step `Δ_p` per mode, ZOH or bilinear. The state matrix is
    block diagonal at initialisation: `blocks = J` copies of a size-`P/J`
    spectrum with eigenvectors `V`, and `B̃ = V⁻¹B`, `C̃ = CV` for random `B`,
    `C` (`lindermanlab/S5`). Unlike the reference, `Re Λ < 0` always holds (the
    real part is stored through `−exp`), so its `clip_eigs` is not needed.

    **Arguments:**

    - `features`: `H`.
    - `state_size`: `P`.
    - `blocks`: `J`, must divide `P` (and `P/J` must be even with `conj_sym`).
    - `init`: `"hippo-n"` (HiPPO-LegS's normal part; `"legs"` is a synonym),
      `"ptd"` (S5-PTD: PTD diagonalisation per block), `"lin"`, `"inv"`,
      `"real"` (S4D spectra, `V = I`).
    - `discretization`: `"zoh"` (default) or `"bilinear"`.
    - `dt_min`, `dt_max`: `log Δ ~ U[log dt_min, log dt_max]` per mode.
    - `conj_sym`: store one mode of each conjugate pair.
    - `bidirectional`: a second `C̃` reads a time-reversed scan of the same
      system (which includes `u_t`), as S5's bidirectional mode.
    - `C_init`: `"lecun"` (`C` truncated-normal with variance `1/P` for real
      and imaginary parts, then `C̃ = CV`; S5's `trunc_standard_normal`) or
      `"complex_normal"` (`C̃ ~ CN(0, 1)` directly).
    - `real_transform`, `mode` (default `"scan"`), `check_finite`, `dtype`,
      `key`: as [`S4D`][sciml.ssm.S4D].

    Parameters: `Λ (P',)`, `B̃ (P', H)` (from `B` lecun-normal `(P, H)`),
    `C̃ (directions, H, P')`, `D ~ N(0, 1)` `(H,)`, `log_dt (P',)`.
    """

    conj_sym: bool = eqx.field(static=True)
    blocks: int = eqx.field(static=True)

    def __init__(
        self,
        features: int,
        state_size: int = 64,
        *,
        blocks: int = 1,
        init: str = "hippo-n",
        discretization: str = "zoh",
        dt_min: float = 1e-3,
        dt_max: float = 1e-1,
        conj_sym: bool = True,
        bidirectional: bool = False,
        C_init: str = "lecun",
        real_transform: str = "exp",
        mode: str = "scan",
        check_finite: bool | str = True,
        dtype=None,
        key: PRNGKeyArray,
    ):
        dtype = _check_options(
            features, init, S5_INITS, real_transform, mode, discretization, check_finite, dtype
        )
        check_choice("C_init", C_init, C_INITS)
        Lambda, V, V_inv = s5_init(init, state_size, blocks, conj_sym=conj_sym)
        b_key, c_key, d_key, dt_key = jax.random.split(key, 4)
        P, modes = state_size, Lambda.shape[0]
        directions = 2 if bidirectional else 1
        lecun = jax.nn.initializers.lecun_normal(in_axis=-2, out_axis=-1, batch_axis=0)
        B = np.asarray(lecun(b_key, (1, P, features)))[0]
        B_tilde = B[:modes] if V_inv is None else V_inv @ B
        if C_init == "lecun":
            C = np.asarray(lecun(c_key, (directions * features, P, 2)))
            C = (C[..., 0] + 1j * C[..., 1]).reshape(directions, features, P)
            C_tilde = C[..., :modes] if V is None else C @ V
            C = jnp.asarray(C_tilde.real, dtype), jnp.asarray(C_tilde.imag, dtype)
        else:
            C = _complex_normal(c_key, (directions, features, modes), dtype)
        self.features, self.state_size, self.blocks = features, state_size, blocks
        self.discretization, self.real_transform, self.conj_sym = (
            discretization,
            real_transform,
            conj_sym,
        )
        self.bidirectional, self.mode, self.check_finite = bidirectional, mode, check_finite
        log_dt = log_dt_init(dt_key, (modes,), dt_min, dt_max, dtype)
        self._set_core(Lambda, B_tilde, C, d_key, log_dt, dtype)

    def _discrete(self, step_rescale) -> tuple[Array, Array]:
        """`(log λ̄ (P',), B̄ (P', H))`."""
        dt = jnp.exp(self.log_dt) * _check_step_rescale(step_rescale)
        log_Lambda_bar, gamma = discrete_log_eigenvalues(self.Lambda, dt, self.discretization)
        return log_Lambda_bar, gamma[:, None] * self.B

    def _read_out(self, states: Array, direction: int) -> Array:
        scale = 2 if self.conj_sym else 1
        return scale * (states @ self.C[direction].T).real

    def _apply(self, u: Array, mode: str, step_rescale) -> Array:
        log_Lambda_bar, B_bar = self._discrete(step_rescale)
        v = u.astype(B_bar.dtype) @ B_bar.T  # (L, P')
        if mode == "conv":

            def states_of(v):
                return causal_conv_complex(v, log_Lambda_bar)
        else:
            recurrence = linear_recurrence if mode == "scan" else sequential_recurrence

            def states_of(v):
                return recurrence(jnp.exp(log_Lambda_bar), v)

        y = self._read_out(states_of(v), 0)
        if self.bidirectional:
            y = y + self._read_out(jnp.flip(states_of(jnp.flip(v, 0)), 0), 1)
        return (y + self.D * u).astype(jnp.result_type(u.dtype, self.D.dtype))

    def recurrent(self, *, step_rescale: float = 1.0) -> RecurrentSSM:
        """The discretised layer for step mode (causal layers only)."""
        self._check_causal("recurrent")
        log_Lambda_bar, B_bar = self._discrete(step_rescale)
        scale = 2.0 if self.conj_sym else 1.0
        return RecurrentSSM(
            jnp.exp(log_Lambda_bar), B_bar, self.C[0], self.D, True, scale, self.check_finite
        )

    def init_state(self) -> Complex[Array, " modes"]:
        """Zero state `(P',)` (complex)."""
        return jnp.zeros(self.Lambda_re.shape, _complex_dtype(self.D.dtype))
