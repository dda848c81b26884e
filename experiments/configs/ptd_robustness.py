"""PTD robustness: S4D-LegS vs S4-PTD, and S5 vs S5-PTD, under noise at
S4D-LegS's top resonance.

`python -m experiments.run --config experiments/configs/ptd_robustness.py`
trains S4D-LegS (without and with the reference code's clip of `Im B`),
S4-PTD, S5 (HiPPO-N) and S5-PTD (only `C` and the encoder / decoder learn),
then reports clean and noisy test accuracy per model (`s4d_legs.*`,
`s4d_legs_clip.*`, `s4d_ptd.*`, `s5_hippo.*`, `s5_ptd.*`) and plots the
transfer-function distance to HiPPO-LegS against the state size. The `tiny`
variant runs in seconds for the test suite.
"""

import ml_collections

from sciml.experiment import About, defaults


ABOUT = About(
    "S4D-LegS vs S4-PTD and S5 vs S5-PTD on noisy sinusoids, with resonant noise",
    minutes=15,
    tiny_minutes=0.2,
)


def tiny(config: ml_collections.ConfigDict) -> None:
    config.plot_sizes = (4, 8)
    config.data.length = 64
    config.data.n_classes = 4
    config.data.n_test = 64
    config.model.d_model = 8
    config.model.n_layers = 2
    config.model.state_size = 8
    defaults.shrink_training(
        config,
        steps=20,
        batch_size=8,
        log_every=10,
        eval_every=0,
        checkpoint_every=20,
        warmup_steps=2,
    )


def get_config(variant: str | None = None) -> ml_collections.ConfigDict:
    config = defaults.base_config(
        "ptd_robustness",
        "experiments.tasks.ssm.ptd_robustness",
        steps=500,
        batch_size=32,
        # no weight decay: the frozen parameters stay put
        learning_rate=1e-2,
        train={"log_every": 50, "eval_every": 0, "checkpoint_every": 500, "keep_checkpoints": 1},
        optimizer={"schedule": "cosine", "warmup_steps": 50, "clip_norm": 1.0},
    )
    config.models = ("s4d_legs", "s4d_legs_clip", "s4d_ptd", "s5_hippo", "s5_ptd")
    config.noise_amplitude = 0.1  # test-time noise a·cos(ωt), a ~ noise_amplitude·U(0, 1)
    config.noise_sweep = (0.3, 1.0)  # further amplitudes reported and plotted
    config.plot_sizes = (8, 16, 32, 64, 128)

    config.data = ml_collections.ConfigDict()
    config.data.length = 512
    config.data.n_classes = 10
    config.data.signal_noise = 2.0  # std of the white noise added to the sinusoids
    config.data.n_test = 1024

    config.model = ml_collections.ConfigDict()
    config.model.d_model = 64
    config.model.n_layers = 4
    config.model.state_size = 32  # S4D-LegS's top frequency at N = 32 is 325.4
    config.model.dt_min = 1e-3
    config.model.dt_max = 1e-1
    return defaults.select_variant(config, variant, tiny=tiny)
