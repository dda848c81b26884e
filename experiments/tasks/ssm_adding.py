"""The adding problem with an S4D or S5 model (see `ssm_common`)."""

from experiments.tasks.ssm_common import sequence_experiment
from sciml.experiment import train_experiment


def build(config):
    return sequence_experiment(config, "adding")


def train_and_evaluate(config, workdir):
    return train_experiment(build(config), config, workdir).summary
