"""Synthetic long-range sequence tasks and the S4D / S5 models trained on them.

Data are generated in-process from a PRNG key, so a training batch is a pure
function of `(step, key)` and the test set of the seed:

- **recall**: a sequence of `length` tokens drawn uniformly from `n_classes`
  symbols (one-hot inputs); the label is the *first* token. The other tokens
  are distractors from the same vocabulary, so the model must carry one token
  across the whole sequence and ignore everything after it. Chance accuracy is
  `1 / n_classes`.
- **adding** (Hochreiter & Schmidhuber): inputs `(value, marker)` with values
  `U(0, 1)` and two markers, one in each half of the sequence; the target is
  the sum of the two marked values. Predicting the mean 1 gives MSE 1/6.
"""

from __future__ import annotations

import equinox as eqx
import jax
import jax.numpy as jnp
import optax

from sciml.experiment import Experiment, check_config
from sciml.ssm import SequenceModel, ssm_labels


def recall_batch(key, batch: int, length: int, n_classes: int):
    """`(x, y)`: one-hot tokens `(batch, length, n_classes)` and the first tokens `(batch,)`."""
    tokens = jax.random.randint(key, (batch, length), 0, n_classes)
    return jax.nn.one_hot(tokens, n_classes), tokens[:, 0]


def adding_batch(key, batch: int, length: int):
    """`(x, y)`: `(batch, length, 2)` values and markers, and the marked sums `(batch,)`."""
    k_values, k_first, k_second = jax.random.split(key, 3)
    values = jax.random.uniform(k_values, (batch, length))
    first = jax.random.randint(k_first, (batch,), 0, length // 2)
    second = jax.random.randint(k_second, (batch,), length // 2, length)
    markers = jax.nn.one_hot(first, length) + jax.nn.one_hot(second, length)
    return jnp.stack([values, markers], axis=-1), jnp.sum(values * markers, axis=-1)


def ssm_kwargs(model_cfg) -> dict:
    """The S4D / S5 constructor arguments held in `config.model`."""
    kwargs = {
        "init": model_cfg.init,
        "discretization": model_cfg.discretization,
        "dt_min": model_cfg.dt_min,
        "dt_max": model_cfg.dt_max,
        "bidirectional": model_cfg.bidirectional,
    }
    if model_cfg.layer == "s5":
        kwargs.update(blocks=model_cfg.blocks, conj_sym=model_cfg.conj_sym)
    else:
        kwargs.update(n_ssm=model_cfg.n_ssm)
    return kwargs


def build_model(model_cfg, d_input: int, d_output: int, key) -> SequenceModel:
    return SequenceModel(
        d_input,
        d_output,
        layer=model_cfg.layer,
        d_model=model_cfg.d_model,
        n_layers=model_cfg.n_layers,
        state_size=model_cfg.state_size,
        pooling=model_cfg.pooling,
        activation=model_cfg.activation or None,
        dropout=model_cfg.dropout,
        prenorm=model_cfg.prenorm,
        norm=model_cfg.norm,
        ssm_kwargs=ssm_kwargs(model_cfg),
        key=key,
    )


def batched_apply(model, x, chunk: int = 256):
    """`vmap(model)` over `x` in chunks of `chunk` sequences (bounded memory)."""
    outputs = [jax.vmap(model)(x[i : i + chunk]) for i in range(0, x.shape[0], chunk)]
    return jnp.concatenate(outputs)


def sequence_experiment(config, kind: str) -> Experiment:
    """The standard-loop experiment of the recall (`kind="recall"`) or adding task."""
    data = config.data
    key_test, key_model = jax.random.split(jax.random.key(config.seed))
    if kind == "recall":

        def make(key, n):
            return recall_batch(key, n, data.length, data.n_classes)

        d_input = d_output = data.n_classes
    else:

        def make(key, n):
            return adding_batch(key, n, data.length)

        d_input, d_output = 2, 1
    x_test, y_test = make(key_test, data.n_test)
    model = build_model(config.model, d_input, d_output, key_model)
    batch_size = config.train.batch_size

    @jax.jit
    def batch_fn(step, key):
        return make(key, batch_size)

    def metrics(out, y):
        if kind == "recall":
            loss = optax.softmax_cross_entropy_with_integer_labels(out, y).mean()
            return loss, {"accuracy": jnp.mean(jnp.argmax(out, -1) == y)}
        mse = jnp.mean((out[:, 0] - y) ** 2)
        return mse, {"mse": mse}

    def loss_fn(model, batch, key):
        x, y = batch
        keys = jax.random.split(key, x.shape[0])
        return metrics(jax.vmap(lambda x, k: model(x, key=k))(x, keys), y)

    @eqx.filter_jit
    def evaluate(model):
        loss, aux = metrics(batched_apply(model, x_test), y_test)
        return {f"test_{k}": v for k, v in {"loss": loss, **aux}.items()}

    return Experiment(
        model=model,
        loss_fn=loss_fn,
        batch_fn=batch_fn,
        evaluate=evaluate,
        label_fn=ssm_labels,
    )


def validate_sequence_config(config, *, classes: bool) -> None:
    """The data and model sizes of an S4D / S5 config, checked by the runner
    before anything is written (its tasks' `validate_config`)."""
    check_config(
        config,
        positive=(
            ("data.length", "data.n_test", "model.d_model", "model.state_size", "model.n_layers")
            + (("data.n_classes",) if classes else ())
        ),
        positive_numbers=("model.dt_min", "model.dt_max"),
        choices={"model.layer": ("s4d", "s5"), "model.discretization": ("zoh", "bilinear")},
    )
