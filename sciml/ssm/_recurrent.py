"""`RecurrentSSM`: a discretised S4D or S5 layer for step mode, and the input
checks the layers share: a real array (complex inputs get a message that says
how to pass them) of the layer's shape, and the `check_finite` option."""

from __future__ import annotations

import equinox as eqx
import jax
import jax.numpy as jnp
from jaxtyping import Array, Complex, Float, Inexact

from .._checks import check_choice, check_finite
from ._scan import linear_recurrence, sequential_recurrence


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


# `check_finite`: True checks concrete (eager) inputs on the host, False nothing,
# "always" also traced inputs, with an `eqx.error_if` compiled into the layer.
FINITE_CHECKS = (True, False, "always")


def check_finite_option(value) -> bool | str:
    """The `check_finite` option, checked at construction."""
    if not (isinstance(value, bool) or value == "always"):
        check_choice("check_finite", value, FINITE_CHECKS)  # raises, naming the choices
    return value


def check_sequence_shape(owner: str, name: str, u: Array, features: int) -> None:
    """`u` of shape `(length, features)`; a transposed input gets a hint."""
    if u.ndim == 2 and u.shape[-1] == features:
        return
    hint = ""
    if u.ndim == 2 and u.shape[0] == features:
        hint = f" It looks transposed, (features, length): pass `{name}.T`."
    raise ValueError(
        f"{owner}: input must have shape (length, features) with features={features}, got "
        f"shape {u.shape} for `{name}`.{hint}"
    )


def check_finite_input(owner: str, name: str, u: Array, check: bool | str) -> Array:
    """`u`, checked for NaN/Inf as `check` (the layer's `check_finite`) says: a
    concrete `u` on the host when `check` is set; a traced one only with
    `check="always"`, by `eqx.error_if` (which raises under `jit` too)."""
    if not check:
        return u
    if isinstance(u, jax.core.Tracer):
        if check != "always":
            return u
        return eqx.error_if(
            u,
            ~jnp.all(jnp.isfinite(u)),
            f"{owner}: `{name}` must be finite, got NaN or Inf "
            "(checked in compiled code: check_finite='always').",
        )
    return check_finite(name, u)


class RecurrentSSM(eqx.Module):
    """A discretised S4D or S5 layer for step mode: `(Λ̄, B̄, C, D)` computed once.

    Made by [`S4D.recurrent`][sciml.ssm.S4D.recurrent] or
    [`S5.recurrent`][sciml.ssm.S5.recurrent], so that autoregressive loops do not
    discretise again at every token. `step` and `init_state` are those of the
    layer; `__call__` runs the recurrence over a whole sequence. `check_finite`
    is the layer's: with `True` a concrete (eager) input holding NaN or Inf
    raises `ValueError` and traced inputs are not checked; with `"always"`
    traced inputs are checked too (see [`S4D`][sciml.ssm.S4D]).
    """

    Lambda_bar: Complex[Array, "..."]
    B_bar: Complex[Array, "..."]
    C: Complex[Array, "features modes"]
    D: Float[Array, " features"]
    mimo: bool = eqx.field(static=True)
    scale: float = eqx.field(static=True)
    check_finite: bool | str = eqx.field(static=True)

    def _check_sequence(self, u) -> Array:
        u = check_real_input("RecurrentSSM", "u", u)
        check_sequence_shape("RecurrentSSM", "u", u, self.D.shape[0])
        return check_finite_input("RecurrentSSM", "u", u, self.check_finite)

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
        u_t = check_finite_input("RecurrentSSM.step", "u_t", u_t, self.check_finite)
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
