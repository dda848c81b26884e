"""The optimiser S4 and S5 train with: the `(Λ, B, Δ)` parameters of every
S4D / S5 layer in their own group (labelled by `sciml.ssm.ssm_labels`)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import optax

from ..ssm import ssm_labels
from ..ssm._models import SSM_GROUP
from ._optim import make_optimizer


def ssm_optimizer(
    config: Mapping[str, Any] | None = None,
    *,
    ssm_learning_rate: float = 1e-3,
) -> optax.GradientTransformation:
    """`sciml.training.make_optimizer` with the `(Λ, B, Δ)` group of S4 / S5.

    The group `"ssm"` (see [`ssm_labels`][sciml.ssm.ssm_labels]) gets
    `ssm_learning_rate` and no weight decay, unless `config["groups"]["ssm"]`
    already sets them; everything else follows `config` (e.g. AdamW with
    weight decay, cosine schedule).

    **Returns:** an `optax.GradientTransformation`.
    """
    cfg = dict(config.to_dict() if hasattr(config, "to_dict") else (config or {}))
    groups = {k: dict(v) for k, v in dict(cfg.get("groups", {})).items()}
    groups[SSM_GROUP] = {
        "learning_rate": ssm_learning_rate,
        "weight_decay": 0.0,
        **groups.get(SSM_GROUP, {}),
    }
    cfg["groups"] = groups
    return make_optimizer(cfg, ssm_labels)
