"""Reaping the processes a previous trainer (or a killed process of a run)
left behind: by process id and start time, never by name, and never a
process whose id was reused; anywhere under a run directory."""

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from sciml.distributed import PROCESSES_FILE, reap_all, reap_processes, record_process, start_time


pytestmark = pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="needs /proc")


def _sleeper(path="sleep"):
    return subprocess.Popen([path, "60"], start_new_session=True)


def _stopped(proc, timeout_s=10.0):
    """Whether `proc` was ended by SIGKILL within `timeout_s`."""
    try:
        return proc.wait(timeout=timeout_s) == -9
    except subprocess.TimeoutExpired:
        return False


def test_start_time_is_read_past_a_command_name_with_spaces_and_parentheses(tmp_path):
    odd = tmp_path / "a) b (c"
    odd.symlink_to(subprocess.check_output(["which", "sleep"], text=True).strip())
    plain, strange = _sleeper(), _sleeper(str(odd))
    try:
        assert "a) b (c" in Path(f"/proc/{strange.pid}/stat").read_text()
        first, second = start_time(plain.pid), start_time(strange.pid)
        # started one after the other: the same clock tick or a few later
        # (ticks are 1/100 s; measured: 0 to 2 apart)
        assert isinstance(second, int) and 0 <= second - first < 500
        assert start_time(os.getpid()) <= first
    finally:
        for proc in (plain, strange):
            proc.kill()
            proc.wait()
    assert start_time(plain.pid) is None  # gone (reaped by wait)


def test_reap_kills_recorded_processes_only_when_id_and_start_time_match(tmp_path):
    orphan, reused, bystander = _sleeper(), _sleeper(), _sleeper()
    try:
        record_process(tmp_path, orphan.pid, job=3)
        entries = [
            # a process that got a recorded id after the recorded one ended
            {"job": 4, "pid": reused.pid, "start": start_time(reused.pid) - 1},
            {"job": 5, "pid": 2**22 + 12345, "start": 1},  # long gone
            {"job": 6, "pid": os.getpid(), "start": start_time(os.getpid())},  # ourselves
        ]
        with open(tmp_path / PROCESSES_FILE, "a") as file:
            for entry in entries:
                file.write(json.dumps(entry) + "\n")
            file.write('{"job": 7, "pid": 12')  # cut by a crash
        assert reap_processes(tmp_path) == [orphan.pid]
        assert _stopped(orphan)
        time.sleep(0.2)
        assert reused.poll() is None and bystander.poll() is None
        assert not (tmp_path / PROCESSES_FILE).exists()
        assert reap_processes(tmp_path) == []  # nothing recorded any more
    finally:
        for proc in (orphan, reused, bystander):
            proc.kill()
            proc.wait()


def test_a_stopped_orphan_is_reaped_with_its_children(tmp_path):
    # a job that started a child of its own, then was stopped (SIGSTOP)
    script = "import subprocess, sys, time; subprocess.Popen(['sleep', '60']); time.sleep(60)"
    job = subprocess.Popen([sys.executable, "-c", script], start_new_session=True)
    try:
        time.sleep(1.0)
        children = Path(f"/proc/{job.pid}/task/{job.pid}/children").read_text().split()
        assert len(children) == 1
        child = int(children[0])
        os.kill(job.pid, 19)  # SIGSTOP
        record_process(tmp_path, job.pid, job=0)
        assert reap_processes(tmp_path) == [job.pid]
        assert _stopped(job)
        deadline = time.monotonic() + 10
        while start_time(child) is not None and time.monotonic() < deadline:
            state = Path(f"/proc/{child}/stat").read_text().rsplit(")", 1)[1].split()[0]
            if state == "Z":  # killed, waiting for its (gone) parent's reaper
                break
            time.sleep(0.05)
        else:
            assert start_time(child) is None
    finally:
        job.kill()
        job.wait()


def test_every_record_under_a_run_directory_is_reaped_whoever_wrote_it(tmp_path):
    # where an online trainer process records its solver processes, and elsewhere
    folders = [tmp_path / "run" / "online" / "process-1" / "jobs", tmp_path / "run" / "x"]
    left = [_sleeper() for _ in folders]
    try:
        for folder, proc in zip(folders, left):
            folder.mkdir(parents=True)
            record_process(folder, proc.pid)
        assert sorted(reap_all(tmp_path / "run")) == sorted(p.pid for p in left)
        assert all(_stopped(p) for p in left)
        assert reap_all(tmp_path / "run") == reap_all(tmp_path / "none") == []
    finally:
        for proc in left:
            proc.kill()
            proc.wait()
