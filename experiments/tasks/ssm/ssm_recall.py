"""Recall the first token with an S4D or S5 model (see `ssm_common`)."""

from experiments.tasks.ssm.ssm_common import sequence_experiment, validate_sequence_config
from sciml.experiment import Headline, train_experiment


HEADLINE = Headline("test_accuracy", "test accuracy", percent=True)
DATA_PARALLEL = True  # trains through train_experiment: `--processes N` splits its batches


def build(config):
    return sequence_experiment(config, "recall")


def train_and_evaluate(config, workdir):
    return train_experiment(build(config), config, workdir).summary


def validate_config(config):
    """Data and model sizes, checked by the runner before anything is written."""
    validate_sequence_config(config, classes=True)
