"""Recall the first token with an S4D or S5 model (see `ssm_common`)."""

from experiments.tasks.ssm_common import sequence_experiment


def build(config):
    return sequence_experiment(config, "recall")
