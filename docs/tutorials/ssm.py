# %% [markdown]
# # Diagonal state-space models: S4D and S5
#
# This page is executed when the documentation is built. It builds S4D and S5
# layers, checks that their three evaluation paths agree, trains both on a
# long-range memory task, and switches a trained model to step mode for
# autoregressive generation.
#
# A diagonal SSM layer maps a sequence $u_0, \dots, u_{L-1}$ of `H` features
# through $x_t = \bar\Lambda x_{t-1} + \bar B u_t$,
# $y_t = 2\,\mathrm{Re}(C x_t) + D u_t$.
# **S4D** runs `H` independent single-input systems (one per feature), **S5**
# one multi-input system over all features. Both take one sequence of shape
# `(length, features)`; batches go through `jax.vmap`.

# %%
import time

import equinox as eqx
import jax
import jax.numpy as jnp
import matplotlib.pyplot as plt
import optax

from sciml.ssm import S4D, S5, SequenceModel, ssm_labels
from sciml.training import TrainSettings, fit, make_optimizer


key = jax.random.key(0)
s4d = S4D(
    16, 32, init="legs", key=key
)  # H = 16 features, state size N = 32 (16 complex modes)
s5 = S5(16, 32, blocks=2, init="hippo-n", key=key)  # P = 32, two HiPPO-N blocks
u = jax.random.normal(jax.random.key(1), (500, 16))
for layer in (s4d, s5):
    outputs = {mode: layer(u, mode=mode) for mode in ("conv", "scan", "recurrent")}
    gap = max(float(jnp.max(jnp.abs(outputs[m] - outputs["conv"]))) for m in outputs)
    name = type(layer).__name__
    print(f"{name}: the conv, scan and recurrent paths differ by {gap:.1e}")

# %% [markdown]
# The S4D kernel $K_h[l] = 2\,\mathrm{Re}\sum_n C_{hn}\bar B_{hn}\bar\lambda_{hn}^l$
# shows the memory of each channel: channels with a small step $\Delta$
# remember longer.

# %%
K = s4d.kernel(500)[0]
fig, ax = plt.subplots(figsize=(7, 3))
order = jnp.argsort(s4d.log_dt)
for h in (order[0], order[8], order[-1]):
    ax.plot(K[h], label=f"Δ = {float(jnp.exp(s4d.log_dt[h])):.3f}")
ax.set(xlabel="lag l", ylabel="K[l]", title="S4D-LegS kernels of three channels")
ax.legend()
plt.show()

# %% [markdown]
# ## Training: recall the first token
#
# Each input is a sequence of random tokens (one-hot, 4 symbols); the label is
# the first one. The model must keep it in memory for the whole sequence while
# ignoring the other tokens; it reads out the last step. `ssm_labels` puts the
# $(\Lambda, B, \Delta)$ parameters in their own optimiser group with a smaller
# learning rate and no weight decay, as S4 and S5 are trained.

# %%
LENGTH, CLASSES = 64, 4


def recall_batch(key, n):
    tokens = jax.random.randint(key, (n, LENGTH), 0, CLASSES)
    return jax.nn.one_hot(tokens, CLASSES), tokens[:, 0]


x_test, y_test = recall_batch(jax.random.key(2), 512)


def loss_fn(model, batch, key):
    x, y = batch
    logits = jax.vmap(model)(x)
    loss = optax.softmax_cross_entropy_with_integer_labels(logits, y).mean()
    return loss, {"accuracy": jnp.mean(jnp.argmax(logits, -1) == y)}


@eqx.filter_jit
def test_accuracy(model):
    return {"accuracy": jnp.mean(jnp.argmax(jax.vmap(model)(x_test), -1) == y_test)}


def make_ssm_optimizer(ssm_learning_rate, steps=300):
    return make_optimizer(
        {
            "name": "adamw",
            "learning_rate": 1e-2,
            "weight_decay": 0.01,
            "schedule": "cosine",
            "warmup_steps": 30,
            "decay_steps": steps,
            "clip_norm": 1.0,
            "groups": {
                "ssm": {"learning_rate": ssm_learning_rate, "weight_decay": 0.0}
            },
        },
        ssm_labels,
    )


# S4D-Lin with S4's (Λ, B, Δ) learning rate; S5 (HiPPO-N) learns faster with a
# larger one
setups = {"s4d": ({"init": "lin"}, 1e-3), "s5": ({"init": "hippo-n"}, 1e-2)}
trained = {}
for layer, (ssm_kwargs, ssm_learning_rate) in setups.items():
    model = SequenceModel(
        CLASSES,
        CLASSES,
        layer=layer,
        d_model=32,
        n_layers=2,
        state_size=32,
        pooling="last",
        ssm_kwargs=ssm_kwargs,
        key=jax.random.key(3),
    )
    start = time.perf_counter()
    result = fit(
        model,
        loss_fn,
        jax.jit(lambda step, key: recall_batch(key, 32)),
        optimizer=make_ssm_optimizer(ssm_learning_rate),
        key=jax.random.key(4),
        settings=TrainSettings(steps=300, progress=False),
        eval_fn=test_accuracy,
    )
    trained[layer] = result.model
    print(
        f"{layer}: test accuracy {result.metrics['eval_accuracy']:.3f}",
        f"(chance {1 / CLASSES})",
        f"after {result.step} steps, {time.perf_counter() - start:.0f} s",
    )

# %% [markdown]
# ## Step mode
#
# A causal model can also run one token at a time with an explicit state:
# `init_state()` and `step(state, x_t)`. Its per-token read-out equals the
# sequence model's output at that position, so the last one is the
# classification above, bit for bit up to round-off.

# %%
model = trained["s4d"]
step = eqx.filter_jit(model.step)
state = model.init_state()
for t in range(LENGTH):
    state, logits = step(state, x_test[0, t])
print("step mode:", logits, "\nfull call:", model(x_test[0]))

# %% [markdown]
# ## Generation
#
# For autoregressive generation, train a model with one output per step
# (`pooling="none"`) to predict the next token. The sequences count modulo 8
# with a stride of 1, 2 or 3 that the model has to infer from the context:
# $x_t = (a + s t) \bmod 8$. Then feed a prompt through `step` and keep
# feeding the model's own predictions.

# %%
VOCAB, CONTEXT = 8, 24


def counting_batch(key, n):
    k_start, k_stride = jax.random.split(key)
    start = jax.random.randint(k_start, (n, 1), 0, VOCAB)
    stride = jax.random.randint(k_stride, (n, 1), 1, 4)
    tokens = (start + stride * jnp.arange(CONTEXT + 1)) % VOCAB
    return jax.nn.one_hot(tokens[:, :-1], VOCAB), tokens[:, 1:]


def next_token_loss(model, batch, key):
    x, y = batch
    logits = jax.vmap(model)(x)
    return optax.softmax_cross_entropy_with_integer_labels(logits, y).mean(), {}


generator = SequenceModel(
    VOCAB,
    VOCAB,
    layer="s5",
    d_model=32,
    n_layers=2,
    state_size=16,
    pooling="none",
    key=jax.random.key(5),
)
generator = fit(
    generator,
    next_token_loss,
    jax.jit(lambda step, key: counting_batch(key, 32)),
    optimizer=make_ssm_optimizer(1e-2),
    key=jax.random.key(6),
    settings=TrainSettings(steps=300, progress=False),
).model


@eqx.filter_jit
def generate(model, prompt, n_new):
    """Feeds `prompt` token by token, then `n_new` greedy predictions."""
    model = model.recurrent()  # discretise every layer once, not at every token
    state = model.init_state()
    for token in prompt[:-1]:
        state, _ = model.step(state, jax.nn.one_hot(token, VOCAB))

    def body(carry, _):
        state, token = carry
        state, logits = model.step(state, jax.nn.one_hot(token, VOCAB))
        token = jnp.argmax(logits)
        return (state, token), token

    _, new = jax.lax.scan(body, (state, prompt[-1]), None, length=n_new)
    return new


for stride in (1, 2, 3):
    prompt = (5 + stride * jnp.arange(4)) % VOCAB
    continuation = generate(generator, prompt, 12).tolist()
    print(f"stride {stride}: prompt {prompt.tolist()} → {continuation}")
