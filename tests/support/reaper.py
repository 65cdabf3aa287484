"""End every process a test's boot script left behind.

The boot script starts the job under `setsid` (its own session and process group, so a notice's SIGTERM reaches the
whole job), so killing the script's group does not end the job; a test that "kills the machine" that way would leave
the job running after the test. A process belongs to the test when its environment names the test's folder
(GPUPLAN_RUN_DIR and the like point inside `tmp_path`).
"""

from __future__ import annotations

import contextlib
import os
import signal
from pathlib import Path


def processes_under(folder: Path) -> list[int]:
    """Pids whose environment mentions `folder` (other users' or vanished processes are skipped)."""
    marker = str(folder).encode()
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            environ = (entry / "environ").read_bytes()
        except OSError:
            continue
        if marker in environ:
            found.append(int(entry.name))
    return found


def reap(folder: Path) -> int:
    """SIGKILL every process under `folder`; returns how many there were."""
    pids = processes_under(folder)
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    return len(pids)
