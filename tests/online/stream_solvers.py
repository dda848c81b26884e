"""Solver functions for the online tests (numpy only: solver processes start fast).

Each yields fields whose values say which run and step they belong to, so a
test can check that every sample arrived intact and was paired with its run's
parameters.
"""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import zmq

from sciml.online._launch import SolverJob
from sciml.online._wire import encode_open


def counter(params, *, seed, n_steps, size=4):
    """Step k of a run: `u = [a, k, seed mod 1000]` broadcast over a `size²` grid."""
    for k in range(n_steps):
        u = np.empty((3, size, size), np.float32)
        u[0], u[1], u[2] = params["a"], k, seed % 1000
        yield {"u": u}


def crash_once(params, *, seed, n_steps, marker_dir, crash_after, mode="kill", size=4):
    """`counter`, but the first attempt of a run with `a < 0.5` dies after step
    `crash_after` (SIGKILL, or SIGSTOP: a hang); a marker file remembers the
    attempt."""
    marker = Path(marker_dir) / f"seed-{seed}"
    # only in a solver process (validation runs are solved in the trainer's)
    in_worker = "SCIML_ONLINE_SECRET" in os.environ
    first = in_worker and params["a"] < 0.5 and not marker.exists()
    for k, fields in enumerate(counter(params, seed=seed, n_steps=n_steps, size=size)):
        yield fields
        if first and k == crash_after:
            marker.touch()
            time.sleep(0.5)  # let the sent steps leave the socket first
            os.kill(os.getpid(), signal.SIGKILL if mode == "kill" else signal.SIGSTOP)


def always_crash(params, *, seed, n_steps, size=4):
    """Runs with `a < 0.5` raise after their first step, at every attempt."""
    for k, fields in enumerate(counter(params, seed=seed, n_steps=n_steps, size=size)):
        if params["a"] < 0.5 and k == 1:
            raise RuntimeError("this solver always fails on these parameters")
        yield fields


def slow_counter(params, *, seed, n_steps, delay, size=4):
    """`counter` with `delay` seconds of work before each step (so a test can
    stop the trainer part-way through a study)."""
    for fields in counter(params, seed=seed, n_steps=n_steps, size=size):
        time.sleep(delay)
        yield fields


def diverging(params, *, seed, n_steps, at_step, size=4):
    """`counter`, but in a solver process a run with `a < 0.5` diverges at
    step `at_step`, at every attempt: that step holds NaN, later ones +inf."""
    in_worker = "SCIML_ONLINE_SECRET" in os.environ
    for k, fields in enumerate(counter(params, seed=seed, n_steps=n_steps, size=size)):
        if in_worker and params["a"] < 0.5 and k >= at_step:
            fields["u"][1] = np.nan if k == at_step else np.inf
        yield fields


def hang_replaying_open(params, *, seed, n_steps, marker_dir, replay_for, size=4):
    """`counter`, but the first run of the study with `a < 0.5` (one only: an
    exclusive marker file) hangs after step 1 (SIGSTOP), and before that starts
    a process that replays the run's open message, bit for bit, every 0.1 s for
    `replay_for` seconds (its pid and start time go to `replayer.json`)."""
    in_worker = "SCIML_ONLINE_SECRET" in os.environ
    first = False
    if in_worker and params["a"] < 0.5:
        try:
            os.close(os.open(Path(marker_dir) / "hung", os.O_CREAT | os.O_EXCL))
            first = True
        except FileExistsError:
            pass
    for k, fields in enumerate(counter(params, seed=seed, n_steps=n_steps, size=size)):
        yield fields
        if first and k == 1:
            job = SolverJob.from_json(json.loads(Path(sys.argv[1]).read_text()))
            (spec,) = [r for r in job.runs if r.seed == seed]
            secret = bytes.fromhex(os.environ["SCIML_ONLINE_SECRET"])
            frames = encode_open(secret, spec.run, spec.attempt, spec.params)
            command = [sys.executable, "-m", __name__, job.address, str(replay_for)]
            command += [frame.hex() for frame in frames]
            replayer = subprocess.Popen(command, start_new_session=True)
            record = {"pid": replayer.pid, "start": time.time()}
            (Path(marker_dir) / "replayer.json").write_text(json.dumps(record))
            time.sleep(0.5)  # let the sent steps leave the socket first
            os.kill(os.getpid(), signal.SIGSTOP)


def _replay(address: str, seconds: float, frames: list[bytes]) -> None:
    """Sends `frames` to `address` every 0.1 s for `seconds`."""
    context = zmq.Context()
    socket = context.socket(zmq.PUSH)
    socket.connect(address)
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        socket.send_multipart(frames)
        time.sleep(0.1)
    socket.close(linger=0)
    context.term()


if __name__ == "__main__":
    _replay(sys.argv[1], float(sys.argv[2]), [bytes.fromhex(f) for f in sys.argv[3:]])
