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
host callback (check a batch once, as `sciml.training.fit` does). An eager
`__call__` runs one compiled function per input shape and mode (not one small
computation per operation), so a script that calls a layer outside `jit`
compiles it once.
"""

from __future__ import annotations

import abc

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Complex, Float, Inexact, PRNGKeyArray

from .._checks import check_choice, check_finite, check_positive_finite, default_float_dtype
from ._discretize import check_discretization, discrete_log_eigenvalues
from ._init import S4D_INITS, S5_INITS, _check_even, log_dt_init, s4d_init, s5_init
from ._kernel import causal_conv, causal_conv_complex, vandermonde_kernel
from ._scan import linear_recurrence, sequential_recurrence


MODES = ("conv", "scan", "recurrent")
REAL_TRANSFORMS = ("exp", "softplus")
C_INITS = ("lecun", "complex_normal")
MIN_DECAY = 1e-4  # smallest |Re Λ| at initialisation (as state-spaces/s4)


# Inputs are annotated `Inexact` (not `Float`) so that a complex input reaches
# `check_real_input` and its message, also under runtime type checking.

# A pytree of labels built from a model is itself a (callable) Equinox module, so
# optax.multi_transform calls it on the parameters as if it were a function.
_LABELS_HINT = (
    "If this came from optax (multi_transform / masked): a tree of labels made from an "
    "Equinox model is itself callable, so optax calls it like a function; pass the "
    "function `ssm_labels` (not `ssm_labels(params)`) as `param_labels`."
)


def check_real_input(owner: str, name: str, u) -> Array:
    """`u` as an array, or a `TypeError` naming `name` if it is not a real array."""
    if isinstance(u, eqx.Module):
        raise TypeError(
            f"{owner}: `{name}` must be an array, got a {type(u).__name__} module. {_LABELS_HINT}"
        )
    u = jnp.asarray(u)
    if jnp.issubdtype(u.dtype, jnp.complexfloating):
        raise TypeError(
            f"{owner}: `{name}` must be real, got dtype {u.dtype}. The layers map real "
            "sequences to real sequences (outputs are `c Re(C x) + D u`); pass the real and "
            "imaginary parts as separate features, e.g. `jnp.concatenate([u.real, u.imag], -1)`."
        )
    return u


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
    re, im = jax.random.normal(key, (2, *shape), dtype) * np.sqrt(0.5)
    return re, im


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
    check_finite: bool = eqx.field(static=True)

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

    def _check_input(self, u: Array) -> Array:
        name = type(self).__name__
        u = check_real_input(name, "u", u)
        if u.ndim != 2 or u.shape[-1] != self.features:
            raise ValueError(
                f"{name}: input must have shape (length, features) with "
                f"features={self.features}, got shape {u.shape}."
            )
        if self.check_finite:
            check_finite("u", u)
        return u

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


class RecurrentSSM(eqx.Module):
    """A discretised S4D or S5 layer for step mode: `(Λ̄, B̄, C, D)` computed once.

    Made by [`S4D.recurrent`][sciml.ssm.S4D.recurrent] or
    [`S5.recurrent`][sciml.ssm.S5.recurrent], so that autoregressive loops do not
    discretise again at every token. `step` and `init_state` are those of the
    layer; `__call__` runs the recurrence over a whole sequence. `check_finite`
    is the layer's: a concrete (eager) input holding NaN or Inf raises
    `ValueError`; traced inputs are not checked.
    """

    Lambda_bar: Complex[Array, "..."]
    B_bar: Complex[Array, "..."]
    C: Complex[Array, "features modes"]
    D: Float[Array, " features"]
    mimo: bool = eqx.field(static=True)
    scale: float = eqx.field(static=True)
    check_finite: bool = eqx.field(static=True)

    def _check_sequence(self, u) -> Array:
        u = check_real_input("RecurrentSSM", "u", u)
        features = self.D.shape[0]
        if u.ndim != 2 or u.shape[-1] != features:
            raise ValueError(
                f"RecurrentSSM: `u` must have shape (length, {features}), got {u.shape}."
            )
        if self.check_finite:
            check_finite("u", u)
        return u

    def init_state(self) -> Complex[Array, "..."]:
        """Zero state: `(H, N/2)` (S4D) or `(P',)` (S5), complex."""
        return jnp.zeros(self.Lambda_bar.shape, self.Lambda_bar.dtype)

    def step(
        self, state: Complex[Array, "..."], u_t: Inexact[Array, " features"]
    ) -> tuple[Complex[Array, "..."], Float[Array, " features"]]:
        """`x ← Λ̄x + B̄u_t`, `y_t = c Re(Cx) + Du_t`. Returns `(state, y_t)`."""
        features = self.D.shape[0]
        u_t = check_real_input("RecurrentSSM.step", "u_t", u_t)
        if u_t.shape != (features,):
            raise ValueError(f"`u_t` must have shape ({features},), got {u_t.shape}.")
        if self.check_finite:
            check_finite("u_t", u_t)
        if self.mimo:
            state = self.Lambda_bar * state + self.B_bar @ u_t.astype(self.B_bar.dtype)
            y = (self.C @ state).real
        else:
            state = self.Lambda_bar * state + self.B_bar * u_t[:, None]
            y = jnp.sum(self.C * state, -1).real
        return state, self.scale * y + self.D * u_t

    def _inputs(self, u: Array) -> Array:
        """`B̄u_t` for every step: `(L, P')` (S5) or `(L, H, N/2)` (S4D)."""
        if self.mimo:
            return u.astype(self.B_bar.dtype) @ self.B_bar.T
        return u[:, :, None] * self.B_bar

    def _outputs(self, states: Array, u: Array) -> Array:
        """`c Re(C x_t) + D u_t` for every step."""
        if self.mimo:
            y = (states @ self.C.T).real
        else:
            y = jnp.sum(self.C * states, -1).real
        return self.scale * y + self.D * u

    def scan(
        self, u: Inexact[Array, "length features"], state: Complex[Array, "..."] | None = None
    ) -> tuple[Float[Array, "length features"], Complex[Array, "..."]]:
        """`L` steps from `state` (zero if `None`) by a parallel scan; returns
        `(y, final_state)`, the same as `L` calls of `step`."""
        u = self._check_sequence(u)
        states = linear_recurrence(self.Lambda_bar, self._inputs(u), state)
        return self._outputs(states, u), states[-1]

    def __call__(self, u: Inexact[Array, "length features"]) -> Float[Array, "length features"]:
        """The recurrence over a sequence `(L, H)` from the zero state (`lax.scan`)."""
        u = self._check_sequence(u)
        return self._outputs(sequential_recurrence(self.Lambda_bar, self._inputs(u)), u)


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
    - `check_finite`: raise a `ValueError` naming `u` when a concrete input
      (an eager call) holds NaN or Inf. Inputs traced under `jit`, `vmap` or
      `grad` are never checked (no host callback in compiled code): check a
      batch once before the compiled step, as `sciml.training.fit` does.
    - `dtype`: parameter dtype (default: JAX's default float).
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
        check_finite: bool = True,
        dtype=None,
        key: PRNGKeyArray,
    ):
        check_choice("init", init, S4D_INITS)
        check_choice("real_transform", real_transform, REAL_TRANSFORMS)
        check_choice("mode", mode, MODES)
        check_discretization(discretization)
        if features < 1:
            raise ValueError(f"features must be positive, got {features}.")
        _check_even(state_size, "state_size")
        if n_ssm < 1 or features % n_ssm:
            raise ValueError(f"n_ssm={n_ssm} must be a positive divisor of features={features}.")
        if init == "diag" and n_ssm % 2:
            raise ValueError(
                f"init='diag' gives half the (Λ, B) copies S4D-Inv and half S4D-Lin, so it needs "
                f"an even n_ssm; got n_ssm={n_ssm}."
            )
        dtype = default_float_dtype(dtype)
        copies = []
        for i in range(n_ssm):
            name = ("inv" if i < n_ssm // 2 else "lin") if init == "diag" else init
            copies.append(s4d_init(name, state_size, b_scale=b_scale, b_clip=b_clip))
        Lambda = np.stack([c[0] for c in copies])
        B = np.stack([c[1] for c in copies])
        c_key, d_key, dt_key = jax.random.split(key, 3)
        directions = 2 if bidirectional else 1
        modes = state_size // 2
        self.Lambda_re = jnp.asarray(_real_inverse(Lambda, real_transform), dtype)
        self.Lambda_im = jnp.asarray(Lambda.imag, dtype)
        self.B_re, self.B_im = jnp.asarray(B.real, dtype), jnp.asarray(B.imag, dtype)
        self.C_re, self.C_im = _complex_normal(c_key, (directions, features, modes), dtype)
        self.D = jax.random.normal(d_key, (features,), dtype)
        self.log_dt = log_dt_init(dt_key, (features,), dt_min, dt_max, dtype)
        self.features, self.state_size, self.n_ssm = features, state_size, n_ssm
        self.discretization, self.real_transform = discretization, real_transform
        self.bidirectional, self.mode = bidirectional, mode
        self.check_finite = check_finite

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

    def __call__(
        self,
        u: Inexact[Array, "length features"],
        *,
        mode: str | None = None,
        step_rescale: float = 1.0,
    ) -> Float[Array, "length features"]:
        """Applies the layer to one sequence `u` of shape `(L, H)`; returns `(L, H)`.

        `mode` overrides the layer's default path; `step_rescale` multiplies
        every `Δ` (zero-shot change of sampling rate).
        """
        u = self._check_input(u)
        mode = self._check_mode(mode)
        _check_step_rescale(step_rescale)
        return _apply(self, u, mode, step_rescale)

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
        check_finite: bool = True,
        dtype=None,
        key: PRNGKeyArray,
    ):
        check_choice("init", init, S5_INITS)
        check_choice("real_transform", real_transform, REAL_TRANSFORMS)
        check_choice("C_init", C_init, C_INITS)
        check_choice("mode", mode, MODES)
        check_discretization(discretization)
        if features < 1:
            raise ValueError(f"features must be positive, got {features}.")
        Lambda, V, V_inv = s5_init(init, state_size, blocks, conj_sym=conj_sym)
        dtype = default_float_dtype(dtype)
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
            C_re, C_im = jnp.asarray(C_tilde.real, dtype), jnp.asarray(C_tilde.imag, dtype)
        else:
            C_re, C_im = _complex_normal(c_key, (directions, features, modes), dtype)
        self.Lambda_re = jnp.asarray(_real_inverse(Lambda, real_transform), dtype)
        self.Lambda_im = jnp.asarray(Lambda.imag, dtype)
        self.B_re, self.B_im = jnp.asarray(B_tilde.real, dtype), jnp.asarray(B_tilde.imag, dtype)
        self.C_re, self.C_im = C_re, C_im
        self.D = jax.random.normal(d_key, (features,), dtype)
        self.log_dt = log_dt_init(dt_key, (modes,), dt_min, dt_max, dtype)
        self.features, self.state_size, self.blocks = features, state_size, blocks
        self.discretization, self.real_transform = discretization, real_transform
        self.bidirectional, self.mode, self.conj_sym = bidirectional, mode, conj_sym
        self.check_finite = check_finite

    def _discrete(self, step_rescale) -> tuple[Array, Array]:
        """`(log λ̄ (P',), B̄ (P', H))`."""
        dt = jnp.exp(self.log_dt) * _check_step_rescale(step_rescale)
        log_Lambda_bar, gamma = discrete_log_eigenvalues(self.Lambda, dt, self.discretization)
        return log_Lambda_bar, gamma[:, None] * self.B

    def _read_out(self, states: Array, direction: int) -> Array:
        scale = 2 if self.conj_sym else 1
        return scale * (states @ self.C[direction].T).real

    def __call__(
        self,
        u: Inexact[Array, "length features"],
        *,
        mode: str | None = None,
        step_rescale: float = 1.0,
    ) -> Float[Array, "length features"]:
        """Applies the layer to one sequence `u` of shape `(L, H)`; returns `(L, H)`.

        `mode` overrides the layer's default path; `step_rescale` multiplies
        every `Δ` (S5's zero-shot change of sampling rate).
        """
        u = self._check_input(u)
        mode = self._check_mode(mode)
        _check_step_rescale(step_rescale)
        return _apply(self, u, mode, step_rescale)

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
