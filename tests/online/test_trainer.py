"""`train_online` end to end with local solver processes: exactly-once
delivery, faults, data-parallel steps (the suite runs on 4 CPU devices)."""

import contextlib
import json
import logging
import os
import re
import signal
import time

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from sciml.online import FIFO, ParameterSpace, Study, train_online
from sciml.training import Checkpointer, TrainSettings, read_metrics
from sciml.transport import REJECT_REASONS


N_RUNS, N_STEPS = 6, 5
PLANNED = {(r, k) for r in range(N_RUNS) for k in range(N_STEPS)}


def make_study(simulation="counter", settings=None, **kwargs):
    options = dict(n_runs=N_RUNS, concurrency=2, runs_per_job=2, n_validation=1, seed=0)
    options.update(kwargs)
    return Study(
        simulation=f"tests.online.stream_solvers.{simulation}",
        space=ParameterSpace({"a": (0.0, 1.0)}),
        n_steps=N_STEPS,
        settings={"n_steps": N_STEPS, **(settings or {})},
        **options,
    )


def loss_fn(model, batch, key):
    u = batch["u"]  # (batch, 3, 4, 4): [a, step, seed]
    pred = jax.vmap(model)(u.reshape(u.shape[0], -1))
    # each sample must carry its own run's parameters
    mismatch = jnp.max(jnp.abs(u[:, 0, 0, 0] - batch["params"][:, 0]))
    return jnp.mean((pred - u[:, 1, 0, :1]) ** 2), {"mismatch": mismatch}


def train(study, workdir, buffer=None, steps=1000, evaluate=None, launcher=None, **settings):
    model = eqx.nn.Linear(48, 1, key=jax.random.key(0))
    return train_online(
        study,
        model,
        loss_fn,
        buffer=FIFO(capacity=64) if buffer is None else buffer,
        optimizer=optax.adam(1e-2),
        batch_size=4,
        key=jax.random.key(1),
        settings=TrainSettings(
            steps=steps, workdir=workdir, progress=False, log_every=1, **settings
        ),
        launcher=launcher,
        evaluate=evaluate,
    )


def accepted_ids(workdir):
    checkpointer = Checkpointer(workdir / "checkpoints")
    try:
        return checkpointer.restore_extra().arrays["accepted"]
    finally:
        checkpointer.close()


def events(workdir):
    path = workdir / "online" / "events.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def test_every_sample_arrives_exactly_once_and_fifo_trains_on_each_once(tmp_path):
    result = train(make_study(), tmp_path)
    summary = result.summary
    ids = accepted_ids(tmp_path)
    assert len(ids) == N_RUNS * N_STEPS and {tuple(map(int, i)) for i in ids} == PLANNED
    assert summary["samples_received"] == N_RUNS * N_STEPS
    assert summary["duplicates_dropped"] == 0 and summary["messages_rejected"] == 0
    assert summary["runs_done"] == N_RUNS and summary["runs_failed"] == 0
    # FIFO: each sample read once; the last 30 mod 4 = 2 (less than a batch) dropped
    assert result.fit.ended_early and result.fit.step == 7
    assert summary["samples_trained"] == 28
    assert result.fit.metrics["mismatch"] == 0.0
    # data parallel: the step ran on all 4 devices, the model is replicated
    assert len(result.model.weight.sharding.device_set) == len(jax.devices()) == 4


def test_runs_of_a_finished_job_waiting_behind_a_full_buffer_are_not_solved_again(tmp_path):
    # The first evaluation holds training for 8 s: the FIFO of 4 fills, the
    # receiver waits, and the jobs (10 steps each, queued in the trainer's
    # socket) exit with status 0 long before their steps are taken.
    slept = []

    def evaluate(model, validation):
        if not slept:
            time.sleep(8.0)
            slept.append(True)
        return {"zero": 0.0}

    study = make_study(runs_per_job=2, timeout=30.0)
    result = train(study, tmp_path, buffer=FIFO(capacity=4), evaluate=evaluate, eval_every=1)
    ids = accepted_ids(tmp_path)
    assert len(ids) == len(PLANNED) and {tuple(map(int, i)) for i in ids} == PLANNED
    assert result.summary["jobs_started"] == 3 and result.summary["duplicates_dropped"] == 0


@pytest.mark.slow
def test_a_killed_solver_is_resubmitted_and_its_resent_steps_dropped(tmp_path):
    settings = {"marker_dir": str(tmp_path), "crash_after": 2, "mode": "kill"}
    result = train(make_study("crash_once", settings, runs_per_job=1), tmp_path / "run")
    ids = accepted_ids(tmp_path / "run")
    assert len(ids) == len(PLANNED) and {tuple(map(int, i)) for i in ids} == PLANNED
    crashed = [e for e in events(tmp_path / "run") if e["event"] == "job_failed"]
    assert crashed and all(e["exit"] == -9 for e in crashed)
    # each killed run re-sent steps 0, 1, 2 after its restart: all dropped
    assert result.summary["duplicates_dropped"] == 3 * len(crashed)
    assert result.summary["runs_done"] == N_RUNS and result.summary["runs_failed"] == 0


@pytest.mark.slow
def test_a_hung_solver_is_detected_by_its_timeout_and_resubmitted(tmp_path):
    settings = {"marker_dir": str(tmp_path), "crash_after": 1, "mode": "stop"}
    study = make_study("crash_once", settings, runs_per_job=1, timeout=3.0)
    result = train(study, tmp_path / "run")
    ids = accepted_ids(tmp_path / "run")
    assert {tuple(map(int, i)) for i in ids} == PLANNED and len(ids) == len(PLANNED)
    hung = [e for e in events(tmp_path / "run") if e["event"] == "job_failed"]
    assert hung and all(e["exit"] == "timeout" for e in hung)
    assert result.summary["jobs_hung"] == len(hung)
    assert result.summary["duplicates_dropped"] == 2 * len(hung)


def test_a_replayed_open_does_not_keep_a_hung_run_alive(tmp_path):
    # the hung run's open message is replayed every 0.1 s for 60 s; the study's
    # timeout is 2 s: the job must be declared hung long before the replays end
    settings = {"marker_dir": str(tmp_path), "replay_for": 60.0}
    study = make_study("hang_replaying_open", settings, runs_per_job=1, timeout=2.0)
    try:
        result = train(study, tmp_path / "run")
    finally:
        replayer = json.loads((tmp_path / "replayer.json").read_text())
        with contextlib.suppress(ProcessLookupError):
            os.kill(replayer["pid"], signal.SIGKILL)
    (hung,) = [e for e in events(tmp_path / "run") if e["event"] == "job_failed"]
    assert hung["exit"] == "timeout" and result.summary["jobs_hung"] == 1
    assert hung["time"] - replayer["start"] < 30.0  # measured: about 3 s
    # the replays arrived and were dropped (2 of the duplicates are re-sent steps)
    assert result.summary["duplicates_dropped"] > 2 + 5
    ids = accepted_ids(tmp_path / "run")
    assert {tuple(map(int, i)) for i in ids} == PLANNED and len(ids) == len(PLANNED)


def test_every_rejection_reason_is_counted_in_the_summary_and_metrics_and_warned_about(
    tmp_path, caplog
):
    study = make_study("hostile", {"marker_dir": str(tmp_path)}, runs_per_job=1)
    with caplog.at_level(logging.WARNING, logger="sciml.transport._receiver"):
        result = train(study, tmp_path / "run")
    summary = result.summary
    rejections = summary["rejections"]
    # one forged message per reason; the retired attempt's later steps and close
    # are usually of an unknown run, and its resubmission re-sends steps 0 and 1
    # as duplicates (which messages of two sockets arrive first is up to ZeroMQ)
    assert set(rejections) == set(REJECT_REASONS) | {"duplicate"}
    assert rejections["unknown_run"] >= 1 and rejections["duplicate"] >= 1
    exact = {r: n for r, n in rejections.items() if r not in ("unknown_run", "duplicate")}
    assert exact == dict.fromkeys(exact, 1)
    assert summary["messages_rejected"] == sum(rejections.values()) - rejections["duplicate"]
    assert summary["duplicates_dropped"] == rejections["duplicate"]
    assert summary["runs_done"] == N_RUNS
    last = [r for r in read_metrics(tmp_path / "run" / "metrics.jsonl") if r["split"] == "train"]
    assert all(last[-1][f"rejected_{reason}"] >= 1 for reason in REJECT_REASONS)
    # rate-limited warning lines that, together, report every rejection
    lines = [r.getMessage() for r in caplog.records if "rejected" in r.getMessage()]
    assert 1 <= len(lines) <= 3, lines
    reported = sum(int(re.match(r"rejected (\d+) messages", line)[1]) for line in lines)
    assert reported == summary["messages_rejected"]
    assert all(any(f"{reason}: " in line for line in lines) for reason in REJECT_REASONS)


@pytest.mark.slow
def test_a_run_that_always_fails_is_redrawn_after_max_attempts(tmp_path):
    study = make_study("always_crash", runs_per_job=1, max_attempts=2)
    result = train(study, tmp_path)
    summary = result.summary
    failed = summary["failed_runs"]
    assert failed and summary["runs_failed"] == len(failed)
    assert all(f["params"]["a"] < 0.5 and f["attempts"] == 2 for f in failed)
    assert all(f["replaced_by"] is not None for f in failed)
    # the study still completes n_runs runs, all with parameters the solver accepts
    assert summary["runs_done"] == N_RUNS


def test_a_diverging_run_is_failed_and_redrawn_and_no_checkpoint_holds_a_non_finite_value(
    tmp_path,
):
    study = make_study("diverging", {"at_step": 2}, runs_per_job=2, max_attempts=2)
    result = train(study, tmp_path, checkpoint_every=1, keep_checkpoints=1000)
    summary = result.summary
    failed = summary["failed_runs"]
    # each run with a < 0.5 sent NaN at step 2 in both attempts: retired twice, redrawn
    assert failed and summary["runs_failed"] == len(failed)
    for run in failed:
        assert run["params"]["a"] < 0.5 and run["attempts"] == 2
        assert run["non_finite_attempts"] == [0, 1] and run["replaced_by"] is not None
    assert summary["runs_done"] == N_RUNS  # training went on to the planned runs
    diverged = [e for e in events(tmp_path) if e["event"] == "run_non_finite"]
    assert sorted((e["run"], e["attempt"]) for e in diverged) == sorted(
        (f["run"], a) for f in failed for a in (0, 1)
    )
    assert all(e["step"] == 2 for e in diverged)
    # a failed run's steps before the divergence were accepted; none after
    ids = {tuple(map(int, i)) for i in accepted_ids(tmp_path)}
    failed_ids = {(r, k) for r, k in ids if r in {f["run"] for f in failed}}
    assert failed_ids == {(f["run"], k) for f in failed for k in (0, 1)}
    assert summary["samples_received"] == N_RUNS * N_STEPS + 2 * len(failed)
    assert result.fit.ended_early and np.isfinite(result.fit.metrics["loss"])
    checkpointer = Checkpointer(tmp_path / "checkpoints")
    try:
        steps = checkpointer.all_steps()
        assert len(steps) == result.fit.step
        for step in steps:
            arrays = checkpointer.restore_extra(step).arrays
            buffer = [x for name, x in arrays.items() if name.startswith("buffer/")]
            assert buffer and all(np.isfinite(x).all() for x in buffer), step
    finally:
        checkpointer.close()


def test_bad_batch_size_for_the_devices_is_refused(tmp_path):
    with pytest.raises(ValueError, match="multiple of the number of devices"):
        train_online(
            make_study(),
            eqx.nn.Linear(48, 1, key=jax.random.key(0)),
            loss_fn,
            buffer=FIFO(capacity=8),
            optimizer=optax.adam(1e-2),
            batch_size=3,
            key=jax.random.key(1),
            settings=TrainSettings(steps=1, workdir=tmp_path),
        )
    assert not np.any([p.name == "checkpoints" for p in tmp_path.iterdir()])


def test_an_old_keyword_call_shows_the_new_one():
    # refused before anything starts: no study, buffer or solver is needed
    new_call = re.escape("`train_online(..., settings=TrainSettings(steps=5, workdir='run'))`")
    with pytest.raises(TypeError, match=new_call):
        train_online(None, None, None, steps=5, workdir="run")


@pytest.mark.skipif(not os.path.exists("/proc/self/stat"), reason="reaping reads /proc")
def test_a_resumed_run_directory_reaps_the_solvers_its_previous_trainer_recorded(tmp_path):
    """A solver process of a previous trainer (here a stand-in: a stopped
    `sleep` recorded in the jobs directory by id and start time) is killed
    before the new trainer starts its own; the new ones are recorded."""
    import subprocess

    from sciml.distributed import PROCESSES_FILE, record_process, start_time

    jobs = tmp_path / "online" / "jobs"
    jobs.mkdir(parents=True)
    orphan = subprocess.Popen(["sleep", "120"], start_new_session=True)
    try:
        os.kill(orphan.pid, signal.SIGSTOP)
        record_process(jobs, orphan.pid, job=0)
        result = train(make_study(), tmp_path)
        assert orphan.wait(timeout=10) == -signal.SIGKILL
    finally:
        orphan.kill()
        orphan.wait()
    (reaped,) = [e for e in events(tmp_path) if e["event"] == "orphans_reaped"]
    assert reaped["pids"] == [orphan.pid]
    recorded = [json.loads(line) for line in (jobs / PROCESSES_FILE).read_text().splitlines()]
    assert len(recorded) == result.summary["jobs_started"] >= 1
    assert all(start_time(entry["pid"]) != entry["start"] for entry in recorded)  # all ended
    assert result.summary["runs_done"] == N_RUNS


def val_mse(model, data):
    u = data["u"]
    pred = jax.vmap(model)(u.reshape(u.shape[0], -1))
    return {"mse": float(jnp.mean((pred - u[:, 1, 0, :1]) ** 2))}


def test_diverging_validation_runs_are_redrawn_and_diverged_runs_are_named(tmp_path):
    """Runs with a > 0.5 send NaN from step 1, validation runs too (seed 5:
    validation draw 0 has a = 0.80 and is replaced by draw 2; training runs
    0, 1, 2 have a = 0.81, 0.81, 0.52)."""
    settings = {"threshold": 0.5, "at_step": 1}
    study = make_study("nan_above", settings, n_validation=2, max_attempts=2, seed=5)
    result = train(study, tmp_path, evaluate=val_mse)
    summary = result.summary
    # the validation draws, from the study's validation sampler directly
    a = study.validation_params(4)[0][:, 0]
    assert a[0] > 0.5 and a[1] <= 0.5 and a[2] <= 0.5
    assert summary["validation_runs_diverged"] == 1
    (record,) = summary["validation_diverged_runs"]
    assert record["run"] == 0 and record["replaced_by"] == 2
    assert record["params"]["a"] == a[0] and record["non_finite_step"] == 1
    np.testing.assert_array_equal(
        result.validation["params"][:, 0], np.repeat(a[[2, 1]].astype(np.float32), N_STEPS)
    )
    assert all(np.isfinite(x).all() for x in result.validation.values())
    assert np.isfinite(result.fit.metrics["eval_mse"])
    # training: every run with a > 0.5 diverged (at each attempt: failed and
    # redrawn); exactly those are named, with their first non-finite step
    diverged, failed = summary["diverged_runs"], summary["failed_runs"]
    drawn = study.sampler.draw(study.space, N_RUNS + summary["runs_failed"])[:, 0]
    assert {d["run"] for d in diverged} == {r for r, x in enumerate(drawn) if x > 0.5}
    assert {0, 1, 2} <= {d["run"] for d in diverged}
    assert summary["runs_diverged"] == len(diverged) == summary["runs_failed"] == len(failed)
    for run in diverged:
        assert run["params"]["a"] == drawn[run["run"]] and run["non_finite_step"] == 1
        assert run["non_finite_attempts"] == [0, 1] and run["state"] == "failed"
    assert summary["runs_done"] == N_RUNS and summary["rejections"]["non_finite"] >= 2 * len(failed)


def test_a_study_whose_validation_runs_all_diverge_stops_before_training(tmp_path):
    study = make_study(
        "nan_above", {"threshold": -1.0, "at_step": 2}, n_validation=2, max_attempts=3
    )
    a = study.validation_params(4)[0][:, 0]
    with pytest.raises(RuntimeError, match="before training") as info:
        train(study, tmp_path, evaluate=val_mse)
    message = str(info.value)
    # validation run 0 got draws 0, then 2 and 3 (draw 1 is validation run 1's)
    for draw in (0, 2, 3):
        assert f"draw {draw} (parameters {{'a': {float(a[draw])!r}}}" in message, message
    assert "validation run 0" in message and "non-finite from step 2" in message
    assert not (tmp_path / "checkpoints").exists() and not (tmp_path / "online").exists()
