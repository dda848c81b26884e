"""Optimiser construction from a config mapping (optax)."""

from __future__ import annotations

import math
import numbers
from collections.abc import Callable, Mapping
from typing import Any

import jax
import ml_collections
import optax

from .._checks import check_choice, check_int, check_real, is_int
from ._settings import OptimizerSettings, field_defaults


# A plain mapping or an `ml_collections.ConfigDict` (which is not a `Mapping`).
ConfigLike = Mapping[str, Any] | ml_collections.ConfigDict


#: The optimiser's keys and defaults, read from `OptimizerSettings` (written there only).
DEFAULTS: dict[str, Any] = field_defaults(OptimizerSettings)
OPTIMIZERS = ("adam", "adamw", "sgd")
SCHEDULES = ("constant", "cosine", "step")
GROUP_KEYS = ("learning_rate", "weight_decay", "schedule", "warmup_steps", "end_factor")
DEFAULT_GROUP = "__default__"


def _as_dict(config: ConfigLike | OptimizerSettings | None) -> dict[str, Any]:
    if config is None:
        return {}
    if isinstance(config, OptimizerSettings):
        return {name: getattr(config, name) for name in DEFAULTS}
    if hasattr(config, "to_dict"):  # ml_collections.ConfigDict
        config = config.to_dict()
    return dict(config)


def _real(cfg: Mapping[str, Any], name: str, lo: float, hi: float, *, closed_hi: bool = True):
    """`cfg[name]` as a float in `[lo, hi]` (or `[lo, hi)`), else a one-line error."""
    value = cfg[name]
    interval = f"[{lo:g}, {hi:g}{']' if closed_hi else ')'}"
    interval = interval.replace("inf]", "inf)")
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise ValueError(f"`optimizer.{name}` must be a number in {interval}, got {value!r}.")
    value = float(value)
    inside = lo <= value and (value <= hi if closed_hi else value < hi)
    if not (inside and math.isfinite(value)):
        raise ValueError(f"`optimizer.{name}` must be a number in {interval}, got {value!r}.")
    return value


def _count(cfg: Mapping[str, Any], name: str, lo: int) -> int:
    return check_int(f"optimizer.{name}", cfg[name], minimum=lo)


def _positive_lr(cfg: Mapping[str, Any]) -> float:
    return check_real("optimizer.learning_rate", cfg["learning_rate"], positive=True)


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
    cfg = {**DEFAULTS, **_as_dict(config)}
    kind = check_choice("optimizer.schedule", cfg["schedule"], SCHEDULES)
    lr, warmup = _positive_lr(cfg), _count(cfg, "warmup_steps", 0)
    if kind == "constant":
        main = optax.constant_schedule(lr)
    elif kind == "cosine":
        decay_steps = _count(cfg, "decay_steps", 1)
        end_factor = _real(cfg, "end_factor", 0.0, 1.0)
        main = optax.cosine_decay_schedule(lr, decay_steps, alpha=end_factor)
    else:  # "step"
        decay_factor = _real(cfg, "decay_factor", 0.0, 1.0)
        if decay_factor == 0.0:
            raise ValueError("`optimizer.decay_factor` must be in (0, 1], got 0.0.")
        boundaries = cfg["boundaries"]
        if not all(is_int(b) for b in boundaries):
            raise ValueError(
                f"`optimizer.boundaries` must be increasing positive integer steps, got {boundaries!r}."
            )
        boundaries = [int(b) for b in boundaries]
        if sorted(set(boundaries)) != boundaries or any(b <= 0 for b in boundaries):
            raise ValueError(
                f"`optimizer.boundaries` must be increasing positive steps, got {boundaries}."
            )
        main = optax.piecewise_constant_schedule(lr, {b: decay_factor for b in boundaries})
    if warmup == 0:
        return main
    return optax.join_schedules([optax.linear_schedule(0.0, lr, warmup), main], [warmup])


def _base_optimizer(cfg: Mapping[str, Any]) -> optax.GradientTransformation:
    name = check_choice("optimizer.name", cfg["name"], OPTIMIZERS)
    schedule = make_schedule(cfg)
    wd = _real(cfg, "weight_decay", 0.0, math.inf)
    if name in ("adam", "adamw"):
        b1 = _real(cfg, "b1", 0.0, 1.0, closed_hi=False)
        b2 = _real(cfg, "b2", 0.0, 1.0, closed_hi=False)
        eps = _real(cfg, "eps", 0.0, math.inf)
    if name == "adamw":
        return optax.adamw(schedule, b1=b1, b2=b2, eps=eps, weight_decay=wd)
    if name == "adam":
        if wd > 0:
            raise ValueError(
                "optimizer.weight_decay > 0 needs name='adamw' (decoupled decay) or 'sgd'; "
                f"got name='adam' with weight_decay={wd}."
            )
        return optax.adam(schedule, b1=b1, b2=b2, eps=eps)
    momentum = _real(cfg, "momentum", 0.0, 1.0, closed_hi=False) or None  # "sgd"
    if not isinstance(cfg["nesterov"], bool):
        raise ValueError(f"`optimizer.nesterov` must be True or False, got {cfg['nesterov']!r}.")
    sgd = optax.sgd(schedule, momentum=momentum, nesterov=cfg["nesterov"])
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

    Each value is checked before anything is built: numbers must be numbers
    (not strings), `b1`, `b2` and `momentum` in `[0, 1)`, `eps`,
    `weight_decay` and `clip_norm` >= 0; a bad value raises a one-line
    `ValueError` naming the key (`optimizer.<key>`) and the accepted range.

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
    clip = _real(cfg, "clip_norm", 0.0, math.inf)
    return optax.chain(optax.clip_by_global_norm(clip), tx) if clip > 0 else tx
