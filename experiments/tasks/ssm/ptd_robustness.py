"""PTD robustness: S4D-LegS vs S4-PTD, and S5 vs S5-PTD, under noise at
S4D-LegS's top resonance.

Following the robustness experiment of Yu et al. (S4-PTD): a stack of SSM
layers (GELU between them, no `D` skip, no residual), mean pooling and a linear
read-out; only `C` (and the encoder / decoder) is trained, so every layer keeps
its initial spectrum. The models of `config.models` differ only in the layer
and its init: `s4d_legs` (S4D-LegS with `B = VᴴB_HiPPO`, the system PTD is
compared with in theory), `s4d_legs_clip` (the reference code's S4D-LegS,
`Im B` clipped to ±2, which caps the resonance spikes of the transfer
function), `s4d_ptd`, and the MIMO pair the paper also claims for: `s5_hippo`
(S5 with HiPPO-LegS's normal part, `Λ = −½ + i eig(S)`, `B̃ = V⁻¹B` for a random
`B`) and `s5_ptd` (S5-PTD: the PTD diagonalisation instead).

Data (in-process): sequences of `length` steps of a sinusoid of class-specific
frequency `f_c = c + 1` cycles per sequence with random phase plus white noise;
`n_classes` classes. These are smooth inputs, where both inits approximate
HiPPO-LegS (weak convergence).

At test time, `a · cos(ω t)` with `a ~ 0.1 U(0, 1)` (one amplitude per sample
and layer) is added to the input of every SSM layer, where `ω` is the largest
frequency `max |Im λ|` of the S4D-LegS spectrum of the layers' state size and
`t = k Δ_h` is the time of step `k` in channel `h`'s own units, so every channel
sees the noise exactly at that frequency. An S5 layer's steps belong to its
modes, not its channels: there `t = k Δ_top`, the step of its top-frequency
mode, so that mode sees the noise at its own frequency (`noise_step`). S4D-LegS has a lightly damped mode
there (`Re λ = −½`), S4-PTD does not (uniform convergence): the paper reports
that S4D's accuracy drops sharply while S4-PTD's does not.

Summary keys, for each `<model>`: `clean_accuracy`; `noisy_accuracy` and
`logit_change` (mean `‖z_noisy − z‖/‖z‖` of the logits) at `noise_amplitude`,
and the same `..._at_<a>` for every amplitude of `noise_sweep`;
`transfer_distance` (worst case to HiPPO-LegS; S4D layers only: S5's `B` is
random, not HiPPO-LegS's); plus `omega`. Plots: the
transfer-function distance to HiPPO-LegS against the state size (worst case and
smooth input), and the accuracy against the noise amplitude.
"""

from __future__ import annotations

from pathlib import Path

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import optax

from experiments.tasks.ssm.ssm_plots import plot_accuracy
from sciml.experiment import (
    ConfigError,
    Experiment,
    Task,
    check_config,
    save_figure,
    train_experiment,
)
from sciml.ssm import (
    S4D,
    S5,
    diagonal_system,
    hippo_normal_modes,
    plot_convergence,
    transfer_distance,
)


# name: (layer, its init options); an S4D's options are also `diagonal_system`'s
MODELS = {
    "s4d_legs": (S4D, {"init": "legs", "b_clip": None}),
    "s4d_legs_clip": (S4D, {"init": "legs"}),
    "s4d_ptd": (S4D, {"init": "ptd"}),
    "s5_hippo": (S5, {"init": "hippo-n"}),
    "s5_ptd": (S5, {"init": "ptd"}),
}
LABELS = {
    "s4d_legs": "S4D-LegS",
    "s4d_legs_clip": "S4D-LegS, Im B clipped to ±2",
    "s4d_ptd": "S4-PTD",
    "s5_hippo": "S5 (HiPPO-N)",
    "s5_ptd": "S5-PTD",
}


def noise_step(layer: S4D | S5) -> jax.Array:
    """The time of one step in the units the noise frequency is given in: each
    channel's own `Δ_h` for an S4D layer (`(d_model,)`); for an S5 layer, whose
    steps `Δ_p` belong to its modes, the `Δ` of the mode of largest `|Im λ|`
    (the top frequency), shared by every channel."""
    if isinstance(layer, S4D):
        return jnp.exp(layer.log_dt)
    top = jnp.argmax(jnp.abs(layer.Lambda_im))
    return jnp.exp(layer.log_dt[top])


class RobustnessNet(eqx.Module):
    """Encoder → [SSM (D = 0) → GELU] × n_layers → mean → decoder, with input
    noise; the SSM an `S4D` or an `S5` layer."""

    encoder: eqx.nn.Linear
    layers: tuple[S4D | S5, ...]
    decoder: eqx.nn.Linear

    def __init__(self, n_classes, *, d_model, n_layers, state_size, layer=S4D, key, **ssm_kwargs):
        keys = jax.random.split(key, n_layers + 2)
        self.encoder = eqx.nn.Linear(1, d_model, key=keys[0])
        layers = []
        for k in keys[2:]:
            ssm = layer(d_model, state_size, **ssm_kwargs, key=k)
            layers.append(eqx.tree_at(lambda m: m.D, ssm, jnp.zeros_like(ssm.D)))
        self.layers = tuple(layers)
        self.decoder = eqx.nn.Linear(d_model, n_classes, key=keys[1])

    def __call__(self, x, amplitudes=None, omega=0.0):
        """`x`: `(L, 1)`; `amplitudes`: `(n_layers,)` noise amplitudes or `None`."""
        h = jax.vmap(self.encoder)(x)
        steps = jnp.arange(x.shape[0])[:, None]
        for i, layer in enumerate(self.layers):
            if amplitudes is not None:
                h = h + amplitudes[i] * jnp.cos(omega * steps * noise_step(layer))
            h = jax.nn.gelu(layer(h))
        return self.decoder(jnp.mean(h, axis=0))


FROZEN = ("Lambda_re", "Lambda_im", "B_re", "B_im", "log_dt", "D")


def freeze(model: RobustnessNet) -> RobustnessNet:
    """Stops the gradient of everything in the SSM layers but `C`."""

    def where(m):
        return [getattr(layer, name) for layer in m.layers for name in FROZEN]

    return eqx.tree_at(where, model, replace_fn=jax.lax.stop_gradient)


def sinusoids(key, n: int, length: int, n_classes: int, noise: float):
    """`(x (n, length, 1), y (n,))`: class `c` is `c + 1` cycles per sequence."""
    k_class, k_phase, k_noise = jax.random.split(key, 3)
    y = jax.random.randint(k_class, (n,), 0, n_classes)
    phase = jax.random.uniform(k_phase, (n, 1), maxval=2 * jnp.pi)
    t = jnp.arange(length) / length
    x = jnp.sin(2 * jnp.pi * (y[:, None] + 1) * t + phase)
    x = x + noise * jax.random.normal(k_noise, (n, length))
    return x[..., None], y


def top_frequency(state_size: int) -> float:
    """Largest `|Im λ|` of the S4D-LegS spectrum (325.4 for `N = 32`)."""
    return float(np.max(np.abs(hippo_normal_modes(state_size)[0].imag)))


def evaluate(model, x, y, amplitudes=None, omega=0.0, chunk=256):
    """Accuracy, and (with noise) the mean relative change of the logits."""
    correct, change = 0, 0.0
    for i in range(0, x.shape[0], chunk):
        clean = _predict(model, x[i : i + chunk], None, omega)
        logits = clean
        if amplitudes is not None:
            logits = _predict(model, x[i : i + chunk], amplitudes[i : i + chunk], omega)
            relative = jnp.linalg.norm(logits - clean, axis=-1) / jnp.linalg.norm(clean, axis=-1)
            change += float(jnp.sum(relative))
        correct += int(jnp.sum(jnp.argmax(logits, -1) == y[i : i + chunk]))
    return correct / x.shape[0], change / x.shape[0]


@eqx.filter_jit
def _predict(model, x, amplitudes, omega):
    if amplitudes is None:
        return jax.vmap(model)(x)
    return jax.vmap(lambda x, a: model(x, a, omega))(x, amplitudes)


def make_batch_fn(config):
    """Training batches of fresh sinusoids, one jitted function shared by the models."""
    data, batch_size = config.data, config.train.batch_size

    @jax.jit
    def batch_fn(step, key):
        return sinusoids(key, batch_size, data.length, data.n_classes, data.signal_noise)

    return batch_fn


def loss_fn(model, batch, key):
    """Cross-entropy with everything in the SSM layers but `C` frozen."""
    x, y = batch
    logits = jax.vmap(freeze(model))(x)
    loss = optax.softmax_cross_entropy_with_integer_labels(logits, y).mean()
    return loss, {"accuracy": jnp.mean(jnp.argmax(logits, -1) == y)}


def train_model(config, workdir: Path, name: str, batch_fn, *, key_model, key_train):
    """Builds model `name` (its init from `MODELS`) and trains it."""
    model_cfg = config.model
    layer, options = MODELS[name]
    model = RobustnessNet(
        config.data.n_classes,
        d_model=model_cfg.d_model,
        n_layers=model_cfg.n_layers,
        state_size=model_cfg.state_size,
        layer=layer,
        dt_min=model_cfg.dt_min,
        dt_max=model_cfg.dt_max,
        key=key_model,
        **options,
    )
    return train_experiment(
        Experiment(model, loss_fn, batch_fn),
        config,
        workdir / "checkpoints" / name,
        key=key_train,
        tag={"model": name},
        description=name,
        plots=False,
    )


def noise_results(config, name: str, model, test, unit, omega: float, sweep) -> tuple[dict, list]:
    """Summary entries of model `name` clean and at each noise amplitude, and its accuracies."""
    x, y = test
    results, accuracies = {}, []
    results[f"{name}.clean_accuracy"], _ = evaluate(model, x, y)
    for amplitude in sweep:
        acc, change = evaluate(model, x, y, amplitude * unit, omega)
        accuracies.append(acc)
        results[f"{name}.noisy_accuracy_at_{amplitude:g}"] = acc
        results[f"{name}.logit_change_at_{amplitude:g}"] = change
        if amplitude == config.noise_amplitude:
            results[f"{name}.noisy_accuracy"] = acc
            results[f"{name}.logit_change"] = change
    return results, accuracies


def train_and_evaluate(config, workdir) -> dict:
    workdir = Path(workdir)
    data, state_size = config.data, config.model.state_size
    key_test, key_noise, key_model, key_train = jax.random.split(jax.random.key(config.seed), 4)
    test = sinusoids(key_test, data.n_test, data.length, data.n_classes, data.signal_noise)
    omega = top_frequency(state_size)
    # one U(0, 1) draw per test sample and layer, scaled by each amplitude
    unit = jax.random.uniform(key_noise, (data.n_test, config.model.n_layers))
    sweep = sorted({float(config.noise_amplitude), *map(float, config.noise_sweep)})
    batch_fn = make_batch_fn(config)

    summary = {"omega": omega, "state_size": state_size}
    curves, clean = {}, {}
    for name in config.models:
        layer, options = MODELS[name]
        trained = train_model(
            config, workdir, name, batch_fn, key_model=key_model, key_train=key_train
        )
        results, curves[name] = noise_results(config, name, trained.model, test, unit, omega, sweep)
        summary.update(results)
        clean[name] = results[f"{name}.clean_accuracy"]
        summary[f"{name}.final_loss"] = trained.summary["final_loss"]
        summary[f"{name}.n_params"] = trained.summary["n_params"]
        if layer is S4D:  # S5's B is random, not HiPPO-LegS's: no distance to it
            summary[f"{name}.transfer_distance"] = transfer_distance(
                *diagonal_system(state_size, **options)
            )

    plot_dir = workdir / "plots"
    save_figure(plot_convergence(tuple(config.plot_sizes)), plot_dir / "transfer_distance.png")
    accuracy = plot_accuracy(sweep, curves, clean, omega, labels=LABELS)
    save_figure(accuracy, plot_dir / "accuracy.png")
    return summary


def validate_config(config) -> None:
    """Models, data and model sizes, checked by the runner before anything is written."""
    models = tuple(config.models)
    if not models or len(set(models)) != len(models) or not set(models) <= set(MODELS):
        raise ConfigError(
            f"config.models must be distinct names of {tuple(MODELS)}, got {models!r}."
        )
    check_config(
        config,
        positive=(
            "data.length", "data.n_classes", "data.n_test", "model.d_model", "model.n_layers",
            "model.state_size", "plot_sizes",
        ),
        positive_numbers=("model.dt_min", "model.dt_max"),
    )  # fmt: skip


TASK = Task(train_and_evaluate, validate=validate_config, data_parallel=True)
