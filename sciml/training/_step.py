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


def _check_loss_output(out: Any) -> None:
    """Trace-time check of what `loss_fn` returns: `(scalar loss, dict of scalars)`."""
    if not (isinstance(out, tuple) and len(out) == 2):
        raise TypeError(
            "`loss_fn` must return a pair `(loss, aux)` with a scalar `loss` and a dict "
            f"`aux` of scalars (`{{}}` when there is nothing to log), got {_describe(out)}; "
            "return `loss, {}` instead of a bare loss."
        )
    loss, aux = out
    if jnp.shape(loss) != () or not jnp.issubdtype(jnp.result_type(loss), jnp.floating):
        raise TypeError(
            f"`loss_fn` must return a real scalar loss, got {_describe(loss)}; reduce it "
            'with `jnp.mean` (or `reduction="mean"`).'
        )
    if not isinstance(aux, dict):
        raise TypeError(f"`loss_fn`'s `aux` must be a dict of scalars, got {_describe(aux)}.")
    for name, value in aux.items():
        if jnp.shape(value) != ():
            raise TypeError(
                f"`loss_fn`'s `aux[{name!r}]` must be a scalar, got {_describe(value)}."
            )


def _describe(x: Any) -> str:
    if hasattr(x, "shape") and hasattr(x, "dtype"):
        return f"an array of shape {tuple(x.shape)} and dtype {x.dtype}"
    if isinstance(x, tuple):
        return f"a tuple of {len(x)} items"
    return f"{type(x).__name__} {x!r}" if not isinstance(x, dict) else "a dict"


def batch_is_finite(batch: Any) -> jax.Array:
    """True when every floating-point (or complex) array in `batch` is finite."""
    flags = [jnp.all(jnp.isfinite(x)) for x in jax.tree.leaves(batch) if eqx.is_inexact_array(x)]
    return jnp.all(jnp.stack(flags)) if flags else jnp.asarray(True)


@functools.lru_cache(maxsize=64)
def make_train_step(
    loss_fn: LossFn, optimizer: optax.GradientTransformation, *, check_batch: bool = True
) -> Callable:
    """Returns `step(model, opt_state, batch, key) -> (model, opt_state, loss, aux)`.

    The step is compiled with `eqx.filter_jit`. `loss_fn(model, batch, key)` must
    return `(loss, aux)` with a scalar `loss` and a dict `aux` of scalars (a
    `TypeError` at trace time says so otherwise). The returned `aux` also holds
    `grad_norm`, the global norm of the gradient, and `finite`, true when both
    the loss and the gradient are finite (the training loop uses it as its NaN
    guard); with `check_batch` also `batch_finite`, true when every
    floating-point array of the batch is finite (one reduction over the batch
    on the device, read by the loop when it reads the loss, so no extra
    synchronisation). Steps are cached per `(loss_fn, optimizer, check_batch)`,
    so calling `fit` again (to resume, say) does not compile again.
    """

    def checked_loss(model, batch, key):
        out = loss_fn(model, batch, key)
        _check_loss_output(out)
        return out

    @eqx.filter_jit
    def step(model, opt_state, batch, key):
        (loss, aux), grads = eqx.filter_value_and_grad(checked_loss, has_aux=True)(
            model, batch, key
        )
        params = trainable(model)
        updates, opt_state = optimizer.update(grads, opt_state, params)
        model = eqx.apply_updates(model, updates)
        grad_norm = optax.tree.norm(grads)
        aux = dict(aux)
        aux["grad_norm"] = grad_norm
        aux["finite"] = jnp.isfinite(loss) & jnp.isfinite(grad_norm)
        if check_batch:
            aux["batch_finite"] = batch_is_finite(batch)
        return model, opt_state, loss, aux

    return step
