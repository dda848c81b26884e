"""PTD robustness: S4D-LegS vs S4-PTD under noise at S4D-LegS's top resonance.

`python -m experiments.run --config experiments/configs/ptd_robustness.py`
trains S4D-LegS (without and with the reference code's clip of `Im B`) and
S4-PTD (only `C` and the encoder / decoder learn), then reports clean and
noisy test accuracy per model (`s4d_legs.*`, `s4d_legs_clip.*`, `s4d_ptd.*`)
and plots the transfer-function distance to HiPPO-LegS against the state size. The
`tiny` variant runs in seconds for the test suite.
"""

import ml_collections


def get_config(variant: str | None = None) -> ml_collections.ConfigDict:
    config = ml_collections.ConfigDict()
    config.name = "ptd_robustness"
    config.task = "ptd_robustness"
    config.seed = 0
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

    steps = ml_collections.FieldReference(500)
    config.train = ml_collections.ConfigDict()
    config.train.steps = steps
    config.train.batch_size = 32
    config.train.log_every = 50
    config.train.eval_every = 0
    config.train.checkpoint_every = 500
    config.train.keep_checkpoints = 1
    config.train.progress = True

    config.optimizer = ml_collections.ConfigDict()
    config.optimizer.name = "adam"  # no weight decay: the frozen parameters stay put
    config.optimizer.learning_rate = 1e-2
    config.optimizer.schedule = "cosine"
    config.optimizer.warmup_steps = 50
    config.optimizer.decay_steps = steps
    config.optimizer.clip_norm = 1.0

    if variant == "tiny":
        config.plot_sizes = (4, 8)
        config.data.length = 64
        config.data.n_classes = 4
        config.data.n_test = 64
        config.model.d_model = 8
        config.model.n_layers = 2
        config.model.state_size = 8
        config.train.steps = 20
        config.train.batch_size = 8
        config.train.log_every = 10
        config.train.checkpoint_every = 20
        config.train.progress = False
        config.optimizer.warmup_steps = 2
    elif variant is not None:
        raise ValueError(f"unknown variant {variant!r}; accepted: 'tiny'")
    return config
