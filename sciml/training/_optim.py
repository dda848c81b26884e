"""Optimiser construction from a config mapping (optax)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import jax
import ml_collections
import optax

from .._checks import check_choice


# A plain mapping or an `ml_collections.ConfigDict` (which is not a `Mapping`).
ConfigLike = Mapping[str, Any] | ml_collections.ConfigDict


DEFAULTS: dict[str, Any] = {
    "name": "adam",
    "learning_rate": 1e-3,
    "weight_decay": 0.0,
    "b1": 0.9,
    "b2": 0.999,
    "eps": 1e-8,
    "momentum": 0.9,
    "nesterov": False,
    "schedule": "constant",
    "warmup_steps": 0,
    "decay_steps": 1000,
    "end_factor": 0.0,
    "boundaries": (),
    "decay_factor": 0.1,
    "clip_norm": 0.0,
    "groups": {},
}
OPTIMIZERS = ("adam", "adamw", "sgd")
SCHEDULES = ("constant", "cosine", "step")
GROUP_KEYS = ("learning_rate", "weight_decay", "schedule", "warmup_steps", "end_factor")
DEFAULT_GROUP = "__default__"


def _as_dict(config: ConfigLike | None) -> dict[str, Any]:
    if config is None:
        return {}
    if hasattr(config, "to_dict"):  # ml_collections.ConfigDict
        config = config.to_dict()
    return dict(config)


def make_schedule(config: ConfigLike) -> optax.Schedule:
    """Learning-rate schedule: linear warm-up from 0, then constant, cosine or step.

    **Arguments:** a mapping with `learning_rate`, `schedule` (one of
    `"constant"`, `"cosine"`, `"step"`), `warmup_steps`, and for `"cosine"`
    `decay_steps` (steps after warm-up over which the rate falls to
    `end_factor * learning_rate`), for `"step"` `boundaries` (steps after warm-up
    at which the rate is multiplied by `decay_factor`).
    """
    cfg = {**DEFAULTS, **_as_dict(config)}
    lr, kind, warmup = float(cfg["learning_rate"]), cfg["schedule"], int(cfg["warmup_steps"])
    if lr <= 0:
        raise ValueError(f"optimizer.learning_rate must be positive, got {lr}.")
    if warmup < 0:
        raise ValueError(f"optimizer.warmup_steps must be >= 0, got {warmup}.")
    check_choice("optimizer.schedule", kind, SCHEDULES)
    if kind == "constant":
        main = optax.constant_schedule(lr)
    elif kind == "cosine":
        if int(cfg["decay_steps"]) <= 0:
            raise ValueError(f"optimizer.decay_steps must be positive, got {cfg['decay_steps']}.")
        main = optax.cosine_decay_schedule(lr, int(cfg["decay_steps"]), alpha=cfg["end_factor"])
    else:  # "step"
        boundaries = [int(b) for b in cfg["boundaries"]]
        if sorted(boundaries) != boundaries or any(b <= 0 for b in boundaries):
            raise ValueError(
                f"optimizer.boundaries must be increasing positive steps, got {boundaries}."
            )
        main = optax.piecewise_constant_schedule(
            lr, {b: float(cfg["decay_factor"]) for b in boundaries}
        )
    if warmup == 0:
        return main
    return optax.join_schedules([optax.linear_schedule(0.0, lr, warmup), main], [warmup])


def _base_optimizer(cfg: Mapping[str, Any]) -> optax.GradientTransformation:
    name, wd = cfg["name"], float(cfg["weight_decay"])
    check_choice("optimizer.name", name, OPTIMIZERS)
    schedule = make_schedule(cfg)
    if wd < 0:
        raise ValueError(f"optimizer.weight_decay must be >= 0, got {wd}.")
    if name == "adamw":
        return optax.adamw(schedule, b1=cfg["b1"], b2=cfg["b2"], eps=cfg["eps"], weight_decay=wd)
    if name == "adam":
        if wd > 0:
            raise ValueError(
                "optimizer.weight_decay > 0 needs name='adamw' (decoupled decay) or 'sgd'; "
                f"got name='adam' with weight_decay={wd}."
            )
        return optax.adam(schedule, b1=cfg["b1"], b2=cfg["b2"], eps=cfg["eps"])
    momentum = float(cfg["momentum"]) or None  # "sgd"
    sgd = optax.sgd(schedule, momentum=momentum, nesterov=bool(cfg["nesterov"]))
    return optax.chain(optax.add_decayed_weights(wd), sgd) if wd > 0 else sgd


def make_optimizer(
    config: ConfigLike | None = None,
    label_fn: Callable[[Any], Any] | None = None,
) -> optax.GradientTransformation:
    """Builds an optax optimiser from a config mapping.

    **Arguments:**

    - `config`: a dict or `ml_collections.ConfigDict` with any of the keys
      `name` (`"adam"`, `"adamw"`, `"sgd"`), `learning_rate`, `weight_decay`,
      `b1`, `b2`, `eps`, `momentum`, `nesterov`, the schedule keys of
      [`make_schedule`][sciml.training.make_schedule], `clip_norm` (global-norm
      clipping; 0 turns it off) and `groups`.
    - `label_fn`: maps the parameter pytree to a pytree of string labels with the
      same structure. `groups = {label: {"learning_rate": ..., "weight_decay": ...}}`
      overrides those keys (also `schedule`, `warmup_steps`, `end_factor`) for
      the parameters with that label; parameters whose label is not in `groups`
      use the top-level settings.

    **Returns:** an `optax.GradientTransformation`. Pass it the parameters (e.g.
    `eqx.filter(model, eqx.is_inexact_array)`) in `update` for weight decay.
    """
    cfg = {**DEFAULTS, **_as_dict(config)}
    unknown = sorted(set(cfg) - set(DEFAULTS))
    if unknown:
        raise ValueError(f"Unknown optimizer keys {unknown}; accepted keys: {sorted(DEFAULTS)}.")
    groups = {k: _as_dict(v) for k, v in _as_dict(cfg["groups"]).items()}
    if groups and label_fn is None:
        raise ValueError("optimizer.groups needs a label_fn that labels the parameters.")
    for label, overrides in groups.items():
        bad = sorted(set(overrides) - set(GROUP_KEYS))
        if bad:
            raise ValueError(
                f"optimizer.groups.{label} has unknown keys {bad}; accepted: {list(GROUP_KEYS)}."
            )
    if not groups:
        tx = _base_optimizer(cfg)
    else:
        transforms = {DEFAULT_GROUP: _base_optimizer(cfg)}
        for label, overrides in groups.items():
            transforms[label] = _base_optimizer({**cfg, **overrides})

        def labels(params):
            return jax.tree_util.tree_map(
                lambda lab: lab if lab in groups else DEFAULT_GROUP, label_fn(params)
            )

        tx = optax.multi_transform(transforms, labels)
    clip = float(cfg["clip_norm"])
    if clip < 0:
        raise ValueError(f"optimizer.clip_norm must be >= 0, got {clip}.")
    return optax.chain(optax.clip_by_global_norm(clip), tx) if clip > 0 else tx
