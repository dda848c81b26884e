"""Solver functions for the online tests (numpy only: solver processes start fast).

Each yields fields whose values say which run and step they belong to, so a
test can check that every sample arrived intact and was paired with its run's
parameters.
"""

import hmac
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import zmq

from sciml.transport import SECRET_ENV, RunSpec, SolverJob, new_secret, secret_from_env
from sciml.transport._sockets import secure_client_socket
from sciml.transport._wire import encode_data, encode_open


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
    in_worker = SECRET_ENV in os.environ
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
    in_worker = SECRET_ENV in os.environ
    for k, fields in enumerate(counter(params, seed=seed, n_steps=n_steps, size=size)):
        if in_worker and params["a"] < 0.5 and k >= at_step:
            fields["u"][1] = np.nan if k == at_step else np.inf
        yield fields


def nan_above(params, *, seed, n_steps, threshold, at_step, size=4):
    """`counter`, but a run with `a > threshold` diverges at step `at_step`
    (NaN there, +inf after), in any process: validation runs too."""
    for k, fields in enumerate(counter(params, seed=seed, n_steps=n_steps, size=size)):
        if params["a"] > threshold and k >= at_step:
            fields["u"][1] = np.nan if k == at_step else np.inf
        yield fields


def hang_replaying_open(params, *, seed, n_steps, marker_dir, replay_for, size=4):
    """`counter`, but the first run of the study with `a < 0.5` (one only: an
    exclusive marker file) hangs after step 1 (SIGSTOP), and before that starts
    a process that replays the run's open message, bit for bit, every 0.1 s for
    `replay_for` seconds (its pid and start time go to `replayer.json`)."""
    first = params["a"] < 0.5 and _first_in_a_worker(Path(marker_dir) / "hung")
    for k, fields in enumerate(counter(params, seed=seed, n_steps=n_steps, size=size)):
        yield fields
        if first and k == 1:
            job, spec, secret = _job_run(seed)
            opening = encode_open(secret, spec.run, spec.attempt, spec.params)
            command = [sys.executable, "-m", __name__, job.address, str(replay_for)]
            command += [opening.hex()]
            replayer = subprocess.Popen(command, start_new_session=True)
            record = {"pid": replayer.pid, "start": time.time()}
            (Path(marker_dir) / "replayer.json").write_text(json.dumps(record))
            time.sleep(0.5)  # let the sent steps leave the socket first
            os.kill(os.getpid(), signal.SIGSTOP)


def _first_in_a_worker(marker: Path) -> bool:
    """True in a solver process the first time it is asked (across processes:
    creates `marker` exclusively); False in the trainer's (validation runs)."""
    if SECRET_ENV not in os.environ:
        return False
    try:
        os.close(os.open(marker, os.O_CREAT | os.O_EXCL))
    except FileExistsError:
        return False
    return True


def _job_run(seed: int) -> tuple[SolverJob, RunSpec, bytes]:
    """In a solver process: the job, the spec of the run seeded `seed`, the secret."""
    job = SolverJob.from_json(json.loads(Path(sys.argv[1]).read_text()))
    (spec,) = [r for r in job.runs if r.seed == seed]
    return job, spec, secret_from_env()


def hostile(params, *, seed, n_steps, marker_dir, size=4):
    """`counter`, but the first run of the study (an exclusive marker file)
    sends, after its step 1, one message for each reason to reject one from
    its own socket: a forged MAC, a message in 2 frames, a longer payload, a wrong dtype, a
    wrong shape, a step out of range, an unknown run, a replay of its step 0
    and, last, its step 2 with a NaN (which retires this attempt)."""
    first = _first_in_a_worker(Path(marker_dir) / "hostile")
    steps = list(counter(params, seed=seed, n_steps=n_steps, size=size))
    for k, fields in enumerate(steps):
        yield fields
        if first and k == 1:
            time.sleep(1.0)  # steps 0 and 1 arrive first
            job, spec, secret = _job_run(seed)
            run, attempt, u = spec.run, spec.attempt, steps[2]["u"]
            good = encode_data(secret, run, attempt, 2, {"u": u})
            longer = good[:-32] + bytes(8)  # prefix, header, payload and 8 bytes more
            longer += hmac.new(secret, longer, "sha256").digest()
            nan = u.copy()
            nan[0, 0, 0] = np.nan
            messages = [
                encode_data(new_secret(), run, attempt, 2, {"u": u}),
                [good[:40], good[40:]],
                longer,
                encode_data(secret, run, attempt, 2, {"u": u.view(np.int32)}),
                encode_data(secret, run, attempt, 2, {"u": u.reshape(3, 16)}),
                encode_data(secret, run, attempt, n_steps, {"u": u}),
                encode_data(secret, 10_000, 0, 2, {"u": u}),
                encode_data(secret, run, attempt, 0, steps[0]),
                encode_data(secret, run, attempt, 2, {"u": nan}),
            ]
            _send(job.address, messages)
            time.sleep(1.0)  # and are handled before this run's step 2 is sent


def _send(address: str, messages: list[bytes | list[bytes]], every: float = 0.0) -> None:
    """Sends `messages` (a list of frames is sent as one multipart message) to
    `address` from a socket of its own, `every` seconds apart, and waits until
    they were delivered."""
    context = zmq.Context()
    socket = context.socket(zmq.PUSH)
    secure_client_socket(socket, secret_from_env(), address)
    socket.connect(address)
    for message in messages:
        socket.send_multipart(message if isinstance(message, list) else [message])
        time.sleep(every)
    socket.close(linger=10000)
    context.term()


if __name__ == "__main__":
    # a replayer started by `hang_replaying_open`: ADDRESS SECONDS MESSAGE (hex)
    message = bytes.fromhex(sys.argv[3])
    _send(sys.argv[1], [message] * round(float(sys.argv[2]) / 0.1), every=0.1)
