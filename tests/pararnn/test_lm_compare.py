"""The language-model comparison (`char_lm_compare`): the Transformer block
written out, every model causal, the reading, a diverged sweep rate, and the
tiny config end to end."""

import json
import math
from pathlib import Path

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from experiments import run
from experiments.tasks.pararnn import lm_compare
from experiments.tasks.pararnn.transformer import TransformerBlock
from sciml.training import NonFiniteLossError


CONFIG = str(Path(__file__).parents[2] / "experiments" / "configs" / "char_lm_compare.py")


def test_a_block_is_masked_softmax_attention_and_an_mlp_written_out():
    # the block against numpy: layer norm, softmax(q kᵀ / √d) v per head with
    # the causal mask, the output projection, then the tanh-GELU MLP, each on
    # the residual stream, from the layer's own weights
    block = TransformerBlock(8, 2, 2, key=jax.random.key(1))
    h = np.random.default_rng(0).normal(size=(5, 8))

    def norm(x, layer):  # eqx.nn.LayerNorm: eps 1e-5, biased variance
        x = (x - x.mean(-1, keepdims=True)) / np.sqrt(x.var(-1, keepdims=True) + 1e-5)
        return x * np.asarray(layer.weight) + np.asarray(layer.bias)

    def linear(x, layer, cols=slice(None)):
        bias = 0.0 if layer.bias is None else np.asarray(layer.bias)[cols]
        return x @ np.asarray(layer.weight).T[:, cols] + bias

    att, x = block.attention, norm(h, block.attention_norm)
    heads = []
    for cols in (slice(0, 4), slice(4, 8)):
        q, k, v = (linear(x, p, cols) for p in (att.query_proj, att.key_proj, att.value_proj))
        scores = q @ k.T / math.sqrt(4)
        scores[np.triu_indices(5, 1)] = -np.inf
        weights = np.exp(scores - scores.max(axis=1, keepdims=True))
        heads.append((weights / weights.sum(axis=1, keepdims=True)) @ v)
    h = h + linear(np.concatenate(heads, axis=1), att.output_proj)
    z = linear(norm(h, block.mlp_norm), block.mlp_in)
    gelu = 0.5 * z * (1 + np.tanh(math.sqrt(2 / math.pi) * (z + 0.044715 * z**3)))
    expected = h + linear(gelu, block.mlp_out)
    # float64 round-off (measured 9e-16); the mask on the wrong side misses by ~0.5
    got = eqx.filter_jit(block)(jnp.asarray(np.random.default_rng(0).normal(size=(5, 8))))
    np.testing.assert_allclose(got, expected, atol=1e-12)


def test_the_reading_and_a_diverged_sweep_rate(tmp_path, monkeypatch):
    verdict = lm_compare.verdict
    assert verdict({"mean": 0.049}, 0.05) == verdict({"mean": -0.05}, 0.05) == "comparable"
    assert verdict({"mean": 0.051}, 0.05) == "worse"
    assert verdict({"mean": -0.051}, 0.05) == "better"

    def diverges(config, family, train, windows, folder):
        raise NonFiniteLossError("Non-finite loss or gradient at step 530 (loss=nan)")

    monkeypatch.setattr(lm_compare, "train_one", diverges)
    (tmp_path / "run").mkdir()
    row = lm_compare.sweep_one(None, "paragru", None, None, tmp_path / "run")
    assert row["val_bpc"] == math.inf and "step 530" in row["diverged"]
    # recorded, so that a resumed sweep does not train that rate again
    assert json.loads((tmp_path / "run" / "result.json").read_text()) == row


def test_every_family_maps_bytes_to_causal_logits():
    # each model of the comparison at the tiny sizes: logits for every byte,
    # and position t blind to the bytes after it (a Newton-solved recurrence,
    # attention, an S5 scan)
    config = run.load_config(CONFIG + ":tiny")
    tokens = jnp.asarray(np.random.default_rng(0).integers(0, 256, (2, 16)))
    tokens = tokens.at[1, :10].set(tokens[0, :10])  # the same first 10 bytes
    for family in lm_compare.FAMILIES:
        model = lm_compare.build_model(config, family, jax.random.key(0))
        if family == "transformer":  # positions embedded up to data.seq_len
            with pytest.raises(ValueError, match="max_length=32"):
                model(jnp.zeros(33, int))
        logits = jax.jit(jax.vmap(model))(tokens)
        assert logits.shape == (2, 16, 256), family
        # float64: the solve and scan orders match up to round-off (measured
        # <= 4e-15); the bytes after position 9 move the later logits by ~0.1
        np.testing.assert_allclose(logits[0, :10], logits[1, :10], atol=1e-10, err_msg=family)
        assert np.max(np.abs(logits[0, 10:] - logits[1, 10:])) > 1e-4, family


@pytest.mark.slow
def test_tiny_config_compares_models_paired_by_seed(tmp_path):
    # two of the four models keep it to four short trainings (each family's
    # forward pass is checked above)
    config = run.load_config(CONFIG + ":tiny")
    with config.unlocked():
        config.models = ("paragru", "transformer")
    summary = run.main_from_config(config, tmp_path)
    for family in config.models:
        for seed in config.seeds:
            # 10 steps from uniform over 256 bytes (8 bits): every model moves off it
            assert 5.0 < summary[f"{family}/seed{seed}.val_bpc"] < 8.5, (family, seed)
        if family != config.baseline:
            bpc = [summary[f"{f}/seed{s}.val_bpc"] for f in (family, "transformer") for s in (0, 1)]
            mean = (bpc[0] + bpc[1] - bpc[2] - bpc[3]) / 2  # model − Transformer, by seed
            np.testing.assert_allclose(summary[f"paired/{family}.val_bpc.mean"], mean, rtol=1e-12)
            assert summary[f"paired/{family}.verdict"] in ("comparable", "better", "worse")
    # the seeds differ (initialisation and batch order)
    assert summary["paragru/seed0.val_bpc"] != summary["paragru/seed1.val_bpc"]
    assert "| causal Transformer |" in (tmp_path / "table.md").read_text()
    assert (tmp_path / "plots" / "lm_compare.png").stat().st_size > 10_000
