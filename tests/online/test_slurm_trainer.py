"""The trainer as a Slurm job step of 2 tasks beside its solver jobs: the
`sbatch` example of docs/slurm.md, submitted to the test cluster
(`slurm_cluster.py`; skipped, with the reason, where it cannot start)."""

import json
import re
import subprocess
import time
from pathlib import Path

import pytest

from experiments import run
from sciml.online._slurm import parse_scontrol


# One worker runs the Slurm modules under pytest-xdist, one cluster at a time.
pytestmark = pytest.mark.xdist_group("slurm_cluster")

ROOT = Path(__file__).resolve().parents[2]
CONFIG = ROOT / "experiments" / "configs" / "online_heat.py"


def docs_example() -> str:
    """The script in the fenced block after the page's example marker."""
    page = (ROOT / "docs" / "slurm.md").read_text()
    after = page[page.index("<!-- slurm-example:") :]
    return re.search(r"^```bash\n(.*?)^```", after, re.DOTALL | re.MULTILINE).group(1)


def for_the_test_cluster(script: str, tmp_path: Path) -> str:
    """The changes the page lists: no GPU partition or GPUs, one CPU per task, the
    log and run directory in `tmp_path`, the checkout, `:tiny`, the solver
    jobs in the cluster's partition `debug`."""
    lines = script.splitlines(keepends=True)
    dropped = [line for line in lines if line.startswith(("#SBATCH --partition", "#SBATCH --gres"))]
    assert len(dropped) == 2, dropped
    script = "".join(line for line in lines if line not in dropped)
    for old, new in [
        ("--cpus-per-task=4", "--cpus-per-task=1"),
        ("--output=trainer-%j.log", f"--output={tmp_path}/trainer-%j.log"),
        ('cd "$HOME/sciml"', f'cd "{ROOT}"'),
        ("online_heat.py \\", "online_heat.py:tiny \\"),
        ('"runs/online_heat-$SLURM_JOB_ID"', f'"{tmp_path}/run"'),
        ("--config.launcher.partition=cpu", "--config.launcher.partition=debug"),
    ]:
        assert script.count(old) == 1, f"docs/slurm.md's example no longer has {old!r}"
        script = script.replace(old, new)
    return script


@pytest.mark.slow
def test_the_docs_example_trains_on_2_processes_beside_their_solver_jobs(cluster, tmp_path):
    script = tmp_path / "trainer.sh"
    script.write_text(for_the_test_cluster(docs_example(), tmp_path))
    # the job gets this environment (sbatch's --export=ALL) but, as a user's
    # shell, one CPU device per process: without the suite's XLA_FLAGS
    env = {k: v for k, v in cluster.env.items() if k != "XLA_FLAGS"}
    submit = ["sbatch", "--parsable", str(script)]
    job = subprocess.run(submit, env=env, capture_output=True, text=True, check=True).stdout.strip()
    deadline = time.monotonic() + 600
    while job in cluster.jobs() and time.monotonic() < deadline:
        time.sleep(1.0)
    log = tmp_path / f"trainer-{job}.log"
    output = log.read_text() if log.exists() else "(no log)"
    state = parse_scontrol(cluster.run("scontrol", "show", "job", job).stdout)
    assert state == ("COMPLETED", "0:0"), output[-4000:]
    assert cluster.wait_empty(timeout=10.0) == [], "solver jobs left in the queue"
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    study = run.load_config(f"{CONFIG}:tiny").study
    # every planned sample accepted once, by one of the 2 processes; each
    # process's runs in one Slurm job of its own (tiny: 4 runs each, 4 per job)
    assert summary["processes"] == 2
    assert summary["samples_received"] == study.n_runs * study.n_steps
    assert summary["duplicates_dropped"] == 0 and summary["messages_rejected"] == 0
    assert summary["runs_done"] == study.n_runs and summary["runs_failed"] == 0
    assert summary["jobs_started"] == 2 and summary["jobs_failed"] == 0
    # ... and the two processes' jobs ran different runs (as their specs say)
    specs = sorted((tmp_path / "run" / "online").glob("process-*/jobs/job-*.json"))
    seeds = [r["seed"] for spec in specs for r in json.loads(spec.read_text())["runs"]]
    assert len(specs) == 2 and len(set(seeds)) == len(seeds) == study.n_runs
