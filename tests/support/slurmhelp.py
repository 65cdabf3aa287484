"""A real one-node Slurm cluster on 127.0.0.1 for the tests (scripts/start_slurm.sh), and helpers to follow jobs.

The cluster runs as root (munge, slurmd); tests skip only where Slurm is not installed or we are not root.
With slurmdbd and MariaDB installed it keeps accounting too, so `sacct` works (~2.5 s instead of ~0.7 s).
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
START = REPO / "scripts" / "start_slurm.sh"
STOP = REPO / "scripts" / "stop_slurm.sh"


@dataclass(frozen=True)
class SlurmCluster:
    folder: Path
    conf: str
    accounting: bool
    gpus: int

    def env(self) -> dict[str, str]:
        """What a process needs to talk to this cluster."""
        return {"SLURM_CONF": self.conf}

    def run(self, *argv: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(list(argv), capture_output=True, text=True, env={**os.environ, **self.env()},
                              timeout=60)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def why_unavailable() -> str | None:
    """Why this machine cannot run the test cluster, or None when it can."""
    if not Path("/usr/sbin/slurmctld").exists() or not Path("/usr/sbin/slurmd").exists():
        return "Slurm (slurm-wlm) is not installed; `make test` installs it as root"
    if not Path("/usr/sbin/munged").exists():
        return "munge is not installed"
    if os.geteuid() != 0:
        return "the test Slurm cluster runs its daemons as root"
    return None


@contextmanager
def slurm_cluster(gpus: int = 4) -> Iterator[SlurmCluster]:
    """Start a throwaway cluster in a temp folder on free loopback ports; stop it and remove the folder after."""
    folder = Path(tempfile.mkdtemp(prefix="gpuplan-slurm-"))
    accounting = bool(shutil.which("slurmdbd") or Path("/usr/sbin/slurmdbd").exists()) and bool(
        shutil.which("mariadbd") or Path("/usr/sbin/mariadbd").exists())
    env = {**os.environ, "SLURM_TEST_DIR": str(folder), "SLURMCTLD_PORT": str(_free_port()),
           "SLURMD_PORT": str(_free_port()), "SLURM_GPUS": str(gpus), "WITH_ACCT": "1" if accounting else "0",
           "SLURMDBD_PORT": str(_free_port()), "MARIADB_PORT": str(_free_port())}
    try:
        proc = subprocess.run(["bash", str(START)], capture_output=True, text=True, env=env, timeout=120)
        if proc.returncode != 0:
            raise RuntimeError(f"start_slurm.sh failed:\n{proc.stdout}\n{proc.stderr}")
        yield SlurmCluster(folder=folder, conf=str(folder / "slurm.conf"), accounting=accounting, gpus=gpus)
    finally:
        subprocess.run(["bash", str(STOP)], capture_output=True, env=env, timeout=60)
        shutil.rmtree(folder, ignore_errors=True)


def wait_for(predicate, timeout: float = 40.0, interval: float = 0.25):  # type: ignore[no-untyped-def]
    """Poll `predicate` until it returns something truthy; the last value on timeout is an AssertionError."""
    deadline = time.monotonic() + timeout
    value = None
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout} s; last value: {value!r}")
