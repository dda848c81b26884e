"""Online vs offline: the same surrogate, initialisation, optimiser and number of
steps, trained on a fixed set of M runs (offline, many epochs) or on a stream of
many more runs through a reservoir buffer (online); both scored on the same
held-out runs (the paper's comparison, Meyer et al., ICML 2023).

- default: the heat equation, `online_heat`'s MLP: M = 20 runs offline against
  a stream of up to 6000 (100 fields each), 40,000 steps of 64.
- `:navier_stokes`: the flagship's TFNO at 32² (`online_ns_tfno`): M = 40 runs
  offline against a stream of up to 1200 (16 pairs each), 1500 steps of 16.
- `:tiny`, `:navier_stokes_tiny`: seconds-long smoke runs.

`python -m experiments.run --config experiments/configs/online_vs_offline.py[:navier_stokes]`
"""

import ml_collections

from experiments.configs import online_heat, online_ns_tfno
from sciml.experiment import About, defaults


ABOUT = About(
    "the same surrogate trained offline on 20 runs and online on a stream",
    minutes=10,
    tiny_minutes=0.3,
)


def _compare(config: ml_collections.ConfigDict, problem: str, offline_runs: int):
    config.name = "online_vs_offline" if problem == "heat" else f"online_vs_offline_{problem}"
    config.task = "experiments.tasks.online.online_vs_offline"
    config.problem = problem
    config.offline = ml_collections.ConfigDict({"n_runs": offline_runs})
    return config


def get_config(variant: str | None = None) -> ml_collections.ConfigDict:
    if variant in ("navier_stokes", "navier_stokes_tiny"):
        config = _compare(online_ns_tfno.get_config(), "navier_stokes", 40)
        # Twice the flagship's runs, so that the stream outlasts the 1,500 steps
        # (the flagship's 600 runs are all in, and drained, by about step 1,200).
        config.study.n_runs = 1200
        config.study.n_validation = 8
    else:
        config = _compare(online_heat.get_config(), "heat", 20)
    return defaults.select_variant(
        config,
        variant,
        tiny=tiny,
        navier_stokes=lambda config: None,
        navier_stokes_tiny=navier_stokes_tiny,
    )


def tiny(config: ml_collections.ConfigDict) -> None:
    """`online_heat:tiny`, offline on 2 of its 8 runs."""
    online_heat.tiny(config)
    config.offline.n_runs = 2


def navier_stokes_tiny(config: ml_collections.ConfigDict) -> None:
    """`online_ns_tfno:tiny`, offline on 2 of its 8 runs."""
    online_ns_tfno.tiny(config)
    config.study.n_validation = 2
    config.offline.n_runs = 2
