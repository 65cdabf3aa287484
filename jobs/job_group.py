"""The processes of a local job, kept in one group that cannot outlive the books.

The wrapper (gpuplan.jobs.runner) leads its own session, so its process group holds the job and everything the
job starts. Three things keep that group accountable:

- the job's first process dies with the wrapper (`PR_SET_PDEATHSIG`, SIGKILL: man 2 prctl), so a `kill -9` of
  the wrapper does not leave the job running unbilled;
- what the job started itself (a shell's children, a dataloader's workers) does not get that signal: when the
  wrapper ends normally it ends them before it records the exit, and when the wrapper vanished, whoever looks at
  the node next (`status`, `watch`, `stop`, `reconcile`, through the local provider) finds the group by the
  wrapper's pid (its id while any member lives) and kills it (`end_orphans`);
- a job in a container runs under the runtime's monitor, outside the group: a vanished wrapper's container is
  found by its name and removed the same way;
- the node's end is recorded only once the last process is gone, so billing runs until then.
"""

from __future__ import annotations

import contextlib
import ctypes
import datetime as dt
import json
import os
import shutil
import signal
import subprocess
import time
from pathlib import Path

from gpuplan.jobs.processes import group_members, pid_alive, signal_group

PR_SET_PDEATHSIG = 1  # <linux/prctl.h>
GONE_WITHIN_SECONDS = 5.0  # a SIGKILLed process is gone within milliseconds; never hang on one


def die_with_parent() -> None:
    """`preexec_fn` of the job's first process: SIGKILL it when the wrapper that started it dies (Linux only).

    The signal follows the thread that forked the child: the wrapper forks from its main thread, which lives
    as long as the wrapper."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        if os.getppid() == 1:  # the wrapper died before the prctl took effect: follow it now
            os.kill(os.getpid(), signal.SIGKILL)
    except (OSError, AttributeError):
        return


def kill_rest(pgid: int, *, sparing: int | None = None) -> int:
    """SIGKILL every member of group `pgid` but `sparing` and wait until they are gone; returns how many."""
    hit = signal_group(pgid, signal.SIGKILL, sparing=sparing)
    deadline = time.monotonic() + GONE_WITHIN_SECONDS
    while hit and time.monotonic() < deadline:
        if not [p for p in group_members(pgid) if p != sparing]:
            break
        time.sleep(0.02)
    return len(hit)


def orphans(pgid: int, run_id: str) -> list[int]:
    """The processes a vanished wrapper's job left in group `pgid`, and only those.

    A pid is reused once its process and its group are gone: a live member whose pid is the group id is a new
    leader (someone else's session), not our dead wrapper, so the group is not ours; and every member must carry
    the run's id in its environment (the job's contract, which its children inherit), so nothing of anyone else
    is ever signalled. A member whose environment cannot be read is left alone."""
    members = group_members(pgid)
    if pgid in members:
        return []
    marker = f"GPUPLAN_RUN_ID={run_id}".encode()
    ours = []
    for pid in members:
        try:
            environ = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
        except OSError:
            continue
        if marker in environ:
            ours.append(pid)
    return ours


def end_orphans(node_dir: Path, pgid: int, exit_file: Path, run_id: str, container: str | None = None,
                contained: list[int] | None = None) -> bool:
    """A vanished wrapper's job still running (its processes in group `pgid`, or in its containment `contained`
    (gpuplan.jobs.containment: what left the group), or its container `container`: a container runs under the
    runtime's monitor, outside the group): end it and record the node's end now, so it is billed until its last
    process ended. False when nothing was left (nothing written)."""
    members = sorted(set(orphans(pgid, run_id)) | set(contained or []))
    removed = remove_container(container) if container else False
    if not members and not removed:
        return False
    for pid in members:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGKILL)
    deadline = time.monotonic() + GONE_WITHIN_SECONDS
    while time.monotonic() < deadline and any(pid_alive(pid) for pid in members):
        time.sleep(0.02)
    count = len(members)
    what = f"{count} process(es)" + (f" and container {container}" if removed else "")
    tmp = exit_file.with_name(f".{exit_file.name}.{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_CREAT | os.O_WRONLY | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as fh:
        fh.write(json.dumps({
            "exit_code": -int(signal.SIGKILL), "ended_at": dt.datetime.now(dt.timezone.utc).isoformat(),
            "reason": "the job wrapper vanished without an exit code",
            "detail": f"{what} of the job outlived the wrapper; gpuplan ended them (billed until then)"}))
    os.replace(tmp, exit_file)
    return True


def remove_container(name: str) -> bool:
    """`podman rm -f NAME` (then docker): True when a runtime had that container and removed it."""
    for runtime in ("podman", "docker"):
        exe = shutil.which(runtime)
        if exe is None:
            continue
        try:
            exists = subprocess.run([exe, "container", "exists", name] if runtime == "podman"
                                    else [exe, "container", "inspect", name], capture_output=True, timeout=60)
            if exists.returncode != 0:
                continue
            subprocess.run([exe, "rm", "-f", "-t", "0", name], capture_output=True, timeout=60)
        except (OSError, subprocess.TimeoutExpired):
            continue
        return True
    return False
