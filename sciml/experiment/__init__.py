"""The experiment runner: config files or modules, task modules, run directories, resume.

A task module declares `TASK = Task(train_and_evaluate, ...)` around its
`train_and_evaluate(config, workdir) -> summary`; a
config file defines `get_config(variant) -> ml_collections.ConfigDict` whose
`task` key names the task (a dotted module path or a `.py` path relative to the
config file). `sciml-run --config FILE[:variant]` (or `python -m sciml.experiment`)
runs it; see `docs/experiments.md`.
"""

from . import defaults as defaults
from ._catalogue import About as About
from ._cli import cli as cli, main as main, parse as parse
from ._config import (
    ConfigSource as ConfigSource,
    config_json as config_json,
    load_config as load_config,
    load_source as load_source,
    source_of as source_of,
)
from ._errors import ConfigError as ConfigError
from ._overrides import apply_overrides as apply_overrides, parse_value as parse_value
from ._plots import (
    metric_words as metric_words,
    plot_loss as plot_loss,
    readable_log_ticks as readable_log_ticks,
    save_figure as save_figure,
)
from ._run import (
    check_workdir as check_workdir,
    default_workdir as default_workdir,
    main_from_config as main_from_config,
    validate as validate,
)
from ._run_dir import load_run as load_run, load_run_config as load_run_config
from ._standard import (
    Experiment as Experiment,
    Trained as Trained,
    count_params as count_params,
    fingerprint as fingerprint,
    train_experiment as train_experiment,
    train_settings as train_settings,
)
from ._statistics import (
    choose_on_grid as choose_on_grid,
    paired_difference as paired_difference,
)
from ._task import Task as Task, resolve_task as resolve_task, task_name as task_name
from ._validate import (
    build_block as build_block,
    check_choice as check_choice,
    check_config as check_config,
)
from ._verdict import Headline as Headline
