"""A throwaway single-node Slurm cluster for the Slurm launcher's tests.

`SlurmCluster` installs Debian's `slurm-wlm` and `munge` when Slurm's commands
are missing, then starts, all inside one temporary directory, a private
`munged` (its own key and socket: a system MUNGE is left alone), `slurmctld`
and `slurmd` on this machine (free ports, no accounting, `proctrack/linuxproc`,
`task/none`), and waits until `sinfo` shows the node idle. The node declares
`CPUS` CPUs, more than the machine has (`SlurmdParameters=config_overrides`),
so that a trainer job of several tasks and its solver jobs run side by side. `stop()` cancels the
cluster's jobs, stops the three daemons by their pid files and removes the
directory. Clients reach the cluster through `SLURM_CONF` (`cluster.env`).

`Unavailable` says why a cluster cannot be had here (not root, no apt, the
install or the start-up failed): the tests skip with that message.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from pathlib import Path


DAEMONS = ("sbatch", "squeue", "sinfo", "scontrol", "scancel", "slurmctld", "slurmd", "munged")
INSTALL_TIMEOUT = 900
CPUS = 8  # the node's CPUs as Slurm counts them (the machine may have fewer)


class Unavailable(Exception):
    """A Slurm cluster cannot be started on this machine (the message says why)."""


def _tail(path: Path, lines: int = 15) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"


def install() -> None:
    """`apt-get install slurm-wlm munge` when Slurm's programs are missing."""
    if all(shutil.which(c) for c in DAEMONS):
        return
    if os.geteuid() != 0:
        raise Unavailable("Slurm is not installed and installing it needs root.")
    if shutil.which("apt-get") is None:
        raise Unavailable("Slurm is not installed and there is no apt-get to install it.")
    done = _apt("install", "-y", "-qq", "slurm-wlm", "munge")
    if done.returncode != 0:  # perhaps a stale package list: update, then once more
        _apt("update", "-qq")
        done = _apt("install", "-y", "-qq", "slurm-wlm", "munge")
    if done.returncode != 0:
        raise Unavailable(f"installing slurm-wlm and munge failed: {done.stderr.strip()[-800:]}")
    missing = [c for c in DAEMONS if shutil.which(c) is None]
    if missing:
        raise Unavailable(f"slurm-wlm installed, but {', '.join(missing)} not on PATH.")


def _apt(*args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    try:
        return subprocess.run(
            ["apt-get", *args], env=env, capture_output=True, text=True, timeout=INSTALL_TIMEOUT
        )
    except subprocess.TimeoutExpired:
        raise Unavailable(f"`apt-get {' '.join(args)}` took over {INSTALL_TIMEOUT} s.") from None


def _free_ports(n: int) -> list[int]:
    sockets = [socket.socket() for _ in range(n)]
    try:
        for s in sockets:
            s.bind(("127.0.0.1", 0))
        return [s.getsockname()[1] for s in sockets]
    finally:
        for s in sockets:
            s.close()


class SlurmCluster:
    """One node (this machine, `CPUS` CPUs) in one default partition `debug`."""

    def __init__(self):
        self.root = Path(tempfile.mkdtemp(prefix="sciml-slurm-"))
        self.conf = self.root / "slurm.conf"
        self.env = {**os.environ, "SLURM_CONF": str(self.conf)}
        self.host = socket.gethostname().split(".")[0]
        self.pid_files = [self.root / f"{d}.pid" for d in ("slurmd", "slurmctld", "munged")]
        self.started_in: float | None = None

    def __enter__(self) -> SlurmCluster:
        try:
            self.start()
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(self, *exc) -> None:
        self.stop()

    def _start_munge(self) -> Path:
        self.root.chmod(0o755)  # munged wants its socket's directory reachable by all
        keys = self.root / "munge-key"
        keys.mkdir(mode=0o700)
        key = keys / "munge.key"
        key.write_bytes(os.urandom(1024))
        key.chmod(0o400)
        munge_socket = self.root / "munge.socket"
        command = [
            "munged",
            f"--key-file={key}",
            f"--socket={munge_socket}",
            f"--pid-file={self.root / 'munged.pid'}",
            f"--log-file={self.root / 'munged.log'}",
            f"--seed-file={self.root / 'munged.seed'}",
        ]
        done = subprocess.run(command, capture_output=True, text=True, timeout=30)
        if done.returncode != 0:
            raise Unavailable(f"munged did not start: {done.stderr.strip()}")
        return munge_socket

    def _write_conf(self, munge_socket: Path) -> None:
        ctld_port, slurmd_port = _free_ports(2)
        for name in ("state", "spool"):
            (self.root / name).mkdir()
        r = self.root
        self.conf.write_text(
            f"""ClusterName=sciml-test
SlurmctldHost={self.host}(127.0.0.1)
SlurmctldPort={ctld_port}
SlurmdPort={slurmd_port}
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket={munge_socket}
SlurmUser=root
SlurmdUser=root
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
SlurmdParameters=config_overrides
StateSaveLocation={r}/state
SlurmdSpoolDir={r}/spool
SlurmctldPidFile={r}/slurmctld.pid
SlurmdPidFile={r}/slurmd.pid
SlurmctldLogFile={r}/slurmctld.log
SlurmdLogFile={r}/slurmd.log
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
MpiDefault=none
ReturnToService=2
SchedulerParameters=sched_interval=1
KillWait=2
MinJobAge=300
NodeName={self.host} NodeAddr=127.0.0.1 CPUs={CPUS} RealMemory=20000 State=UNKNOWN
PartitionName=debug Nodes={self.host} Default=YES MaxTime=INFINITE State=UP
"""
        )

    def start(self, timeout: float = 60.0) -> None:
        """Starts munged, slurmctld and slurmd; waits until the node is idle."""
        if os.geteuid() != 0:
            raise Unavailable("starting a Slurm test cluster needs root (SlurmdUser=root).")
        install()
        begin = time.perf_counter()
        self._write_conf(self._start_munge())
        for daemon in ("slurmctld", "slurmd"):
            done = subprocess.run(
                [daemon, "-f", str(self.conf)],
                env=self.env,
                capture_output=True,
                text=True,
                timeout=60,
            )
            if done.returncode != 0:
                log = _tail(self.root / f"{daemon}.log")
                raise Unavailable(f"{daemon} did not start: {done.stderr.strip()}\n{log}")
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            done = self.run("sinfo", "-h", "-o", "%t", check=False)
            if done.stdout.strip() == "idle":
                self.started_in = time.perf_counter() - begin
                return
            time.sleep(0.2)
        raise Unavailable(
            f"the Slurm node did not become idle within {timeout:.0f} s "
            f"(sinfo: {done.stdout.strip()!r} {done.stderr.strip()!r}); slurmd.log:\n"
            + _tail(self.root / "slurmd.log")
        )

    def run(self, *args: str, check: bool = True) -> subprocess.CompletedProcess:
        """A Slurm command against this cluster."""
        return subprocess.run(
            args, env=self.env, capture_output=True, text=True, timeout=30, check=check
        )

    def jobs(self) -> list[str]:
        """Ids of the jobs still queued or running."""
        return self.run("squeue", "-h", "-o", "%i", check=False).stdout.split()

    def wait_empty(self, timeout: float = 15.0) -> list[str]:
        """Waits until no job is queued, running or completing; returns those left."""
        deadline = time.monotonic() + timeout
        while (jobs := self.jobs()) and time.monotonic() < deadline:
            time.sleep(0.2)
        return jobs

    def stop(self) -> None:
        """Cancels every job, stops the daemons by their pid files, removes the files."""
        if self.conf.exists() and (self.root / "slurmctld.pid").exists():
            try:
                jobs = self.jobs()
                if jobs:
                    self.run("scancel", *jobs, check=False)
                    self.wait_empty()
            except (OSError, subprocess.SubprocessError):
                pass
        for pid_file in self.pid_files:
            _stop(pid_file)
        shutil.rmtree(self.root, ignore_errors=True)


def _stop(pid_file: Path, timeout: float = 10.0) -> None:
    """SIGTERM to the pid in `pid_file`, SIGKILL if still alive after `timeout`."""
    try:
        pid = int(pid_file.read_text().strip())
    except (OSError, ValueError):
        return
    try:
        os.kill(pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not _alive(pid):
            return
        time.sleep(0.1)
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def _alive(pid: int) -> bool:
    """Whether `pid` runs (a zombie, ended but not yet reaped, does not)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rpartition(")")[2].split()[0] != "Z"
