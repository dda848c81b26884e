"""Every migration guard is in `sciml/_deprecated.py`: a moved name is the
same object at its old and new homes, a removed one says what to do, and a
task module of the protocol before `Task` is told the declaration to write."""

import importlib
import types

import pytest

from sciml import _deprecated
from sciml.experiment import ConfigError
from sciml.experiment._task import task_of


@pytest.mark.parametrize("old,name", sorted(_deprecated.MOVED))
def test_a_moved_name_is_the_same_object_at_its_old_home(old, name):
    new = importlib.import_module(_deprecated.MOVED[old, name])
    assert getattr(importlib.import_module(old), name) is getattr(new, name)


def test_a_removed_name_says_what_to_do_and_when_the_message_goes():
    import sciml.training

    with pytest.raises(AttributeError, match="sigterm_as_interrupt was removed: .* 0.2.0"):
        sciml.training.sigterm_as_interrupt  # noqa: B018
    with pytest.raises(AttributeError, match="has no attribute 'nothing'"):
        sciml.training.nothing  # noqa: B018


def test_a_task_module_of_before_is_shown_its_declaration():
    module = types.ModuleType("old_task")
    module.train_and_evaluate = lambda config, workdir: {}
    assert task_of(module).train_and_evaluate is module.train_and_evaluate
    module.DATA_PARALLEL, module.validate_config = True, lambda config: None
    with pytest.raises(ConfigError) as info:
        task_of(module)
    assert "TASK = sciml.experiment.Task(train_and_evaluate, validate=validate_config, " in str(
        info.value
    )
    assert "data_parallel=True)" in str(info.value)
