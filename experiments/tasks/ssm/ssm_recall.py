"""Recall the first token with an S4D or S5 model (see `ssm_common`)."""

from experiments.tasks.ssm.ssm_common import sequence_experiment, validate_sequence_config
from sciml.experiment import Headline, Task, train_experiment


HEADLINE = Headline("test_accuracy", "test accuracy", percent=True)


def build(config):
    return sequence_experiment(config, "recall")


def train_and_evaluate(config, workdir):
    return train_experiment(build(config), config, workdir).summary


def validate_config(config):
    """Data and model sizes, checked by the runner before anything is written."""
    validate_sequence_config(config, classes=True)


TASK = Task(
    train_and_evaluate, validate=validate_config, headline=HEADLINE, data_parallel=True, build=build
)
