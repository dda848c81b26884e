"""Optimiser construction from a config mapping (optax)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import jax
import ml_collections
import optax

from ._settings import OptimizerSettings, field_defaults


# A plain mapping or an `ml_collections.ConfigDict` (which is not a `Mapping`).
ConfigLike = Mapping[str, Any] | ml_collections.ConfigDict


#: The optimiser's keys and defaults, read from `OptimizerSettings` (written there only).
DEFAULTS: dict[str, Any] = field_defaults(OptimizerSettings)
DEFAULT_GROUP = "__default__"


def _as_dict(config: ConfigLike | None) -> dict[str, Any]:
    if config is None:
        return {}
    if isinstance(config, ml_collections.ConfigDict):
        return config.to_dict()
    return dict(config)


def optimizer_settings(config: OptimizerSettings | ConfigLike | None) -> OptimizerSettings:
    """`config` as an [`OptimizerSettings`][sciml.training.OptimizerSettings]
    (checked there); a key it does not set takes the class's default.

    **Raises:** `ValueError` naming an unknown key or a wrong value.
    """
    if isinstance(config, OptimizerSettings):
        return config
    values = _as_dict(config)
    unknown = sorted(set(values) - set(DEFAULTS))
    if unknown:
        raise ValueError(f"Unknown optimizer keys {unknown}; accepted keys: {sorted(DEFAULTS)}.")
    groups = {label: _as_dict(group) for label, group in _as_dict(values.get("groups")).items()}
    if isinstance(values.get("boundaries"), list):  # a config saved as JSON holds a list
        values["boundaries"] = tuple(values["boundaries"])
    return OptimizerSettings(**{**values, "groups": groups})


def make_schedule(config: OptimizerSettings | ConfigLike) -> optax.Schedule:
    """Learning-rate schedule: linear warm-up from 0, then constant, cosine or step.

    **Arguments:** an `OptimizerSettings` or a mapping with `learning_rate`, `schedule` (one of
    `"constant"`, `"cosine"`, `"step"`), `warmup_steps`, and for `"cosine"`
    `decay_steps` (steps after warm-up over which the rate falls to
    `end_factor * learning_rate`), for `"step"` `boundaries` (steps after warm-up
    at which the rate is multiplied by `decay_factor`).

    Every rate the schedule gives is >= 0: `learning_rate` must be positive,
    `end_factor` in `[0, 1]` and `decay_factor` in `(0, 1]`; anything else
    raises a `ValueError` naming the key.
    """
    settings = optimizer_settings(config)
    lr, warmup = float(settings.learning_rate), int(settings.warmup_steps)
    if settings.schedule == "constant":
        main = optax.constant_schedule(lr)
    elif settings.schedule == "cosine":
        main = optax.cosine_decay_schedule(lr, settings.decay_steps, alpha=settings.end_factor)
    else:  # "step"
        boundaries = {int(b): settings.decay_factor for b in settings.boundaries}
        main = optax.piecewise_constant_schedule(lr, boundaries)
    if warmup == 0:
        return main
    return optax.join_schedules([optax.linear_schedule(0.0, lr, warmup), main], [warmup])


def _base_optimizer(settings: OptimizerSettings) -> optax.GradientTransformation:
    schedule = make_schedule(settings)
    wd, b1, b2, eps = settings.weight_decay, settings.b1, settings.b2, settings.eps
    if settings.name == "adamw":
        return optax.adamw(schedule, b1=b1, b2=b2, eps=eps, weight_decay=wd)
    if settings.name == "adam":
        return optax.adam(schedule, b1=b1, b2=b2, eps=eps)
    sgd = optax.sgd(schedule, momentum=settings.momentum or None, nesterov=settings.nesterov)
    return optax.chain(optax.add_decayed_weights(wd), sgd) if wd > 0 else sgd


def make_optimizer(
    config: OptimizerSettings | ConfigLike | None = None,
    label_fn: Callable[[Any], Any] | None = None,
) -> optax.GradientTransformation:
    """Builds an optax optimiser from a config mapping.

    **Arguments:**

    - `config`: an [`OptimizerSettings`][sciml.training.OptimizerSettings], or
      a dict or `ml_collections.ConfigDict` with any of its fields as keys
      (`name`, `learning_rate`, `weight_decay`, `b1`, `b2`, `eps`, `momentum`,
      `nesterov`, the schedule keys of
      [`make_schedule`][sciml.training.make_schedule], `clip_norm`, `groups`);
      a key it does not set takes the `OptimizerSettings` default, so
      `make_optimizer({"learning_rate": 1e-3})` is a constant-rate Adam.
    - `label_fn`: maps the parameter pytree to a pytree of string labels with the
      same structure. `groups = {label: {"learning_rate": ..., "weight_decay": ...}}`
      overrides those keys (also `schedule`, `warmup_steps`, `end_factor`) for
      the parameters with that label; parameters whose label is not in `groups`
      use the top-level settings.

    Each value is checked before anything is built, by `OptimizerSettings`:
    a bad value raises a one-line `ValueError` naming the key
    (`optimizer.<key>`) and the accepted range.

    **Returns:** an `optax.GradientTransformation`. Pass it the parameters (e.g.
    `eqx.filter(model, eqx.is_inexact_array)`) in `update` for weight decay.
    """
    if config is not None and not isinstance(
        config, Mapping | ml_collections.ConfigDict | OptimizerSettings
    ):
        raise TypeError(
            "`config` must be an `OptimizerSettings`, or a dict or `ml_collections.ConfigDict` "
            "of optimizer settings "
            f"(e.g. {{'learning_rate': 1e-3}}), got {type(config).__name__}."
        )
    settings = optimizer_settings(config)
    if settings.groups and label_fn is None:
        raise ValueError("optimizer.groups needs a label_fn that labels the parameters.")
    if not settings.groups:
        tx = _base_optimizer(settings)
    else:
        transforms = {DEFAULT_GROUP: _base_optimizer(settings)}
        for label in settings.groups:
            transforms[label] = _base_optimizer(settings.group(label))

        def labels(params):
            return jax.tree_util.tree_map(
                lambda lab: lab if lab in settings.groups else DEFAULT_GROUP, label_fn(params)
            )

        tx = optax.multi_transform(transforms, labels)
    clip = settings.clip_norm
    return optax.chain(optax.clip_by_global_norm(clip), tx) if clip > 0 else tx
