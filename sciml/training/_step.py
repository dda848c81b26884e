"""The jitted training step shared by every trainer."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import equinox as eqx
import jax
import jax.numpy as jnp
import optax


LossFn = Callable[[eqx.Module, Any, jax.Array], tuple[jax.Array, dict[str, jax.Array]]]


def trainable(model: Any) -> Any:
    """The trainable part of a model: its floating-point (and complex) arrays."""
    return eqx.filter(model, eqx.is_inexact_array)


def init_opt_state(optimizer: optax.GradientTransformation, model: Any) -> optax.OptState:
    """Optimiser state for the trainable arrays of `model`."""
    return optimizer.init(trainable(model))


@functools.lru_cache(maxsize=64)
def make_train_step(loss_fn: LossFn, optimizer: optax.GradientTransformation) -> Callable:
    """Returns `step(model, opt_state, batch, key) -> (model, opt_state, loss, aux)`.

    The step is compiled with `eqx.filter_jit`. `loss_fn(model, batch, key)` must
    return `(loss, aux)` with a scalar `loss` and a dict `aux` of scalars. The
    returned `aux` also holds `grad_norm`, the global norm of the gradient, and
    `finite`, true when both the loss and the gradient are finite (the training
    loop uses it as its NaN guard). Steps are cached per `(loss_fn, optimizer)`,
    so calling `fit` again (to resume, say) does not compile again.
    """

    @eqx.filter_jit
    def step(model, opt_state, batch, key):
        (loss, aux), grads = eqx.filter_value_and_grad(loss_fn, has_aux=True)(model, batch, key)
        params = trainable(model)
        updates, opt_state = optimizer.update(grads, opt_state, params)
        model = eqx.apply_updates(model, updates)
        grad_norm = optax.tree.norm(grads)
        aux = dict(aux)
        aux["grad_norm"] = grad_norm
        aux["finite"] = jnp.isfinite(loss) & jnp.isfinite(grad_norm)
        return model, opt_state, loss, aux

    return step
