"""Is a process still there? One answer for the local provider (is a node's wrapper alive?) and for crash
recovery (is the gpuplan that was launching a run alive?), both of which hold a pid from a file."""

from __future__ import annotations

import os
from pathlib import Path


def pid_alive(pid: int) -> bool:
    """The pid names a live process; a zombie (a child that ended and was not yet reaped) is not alive."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return True  # no /proc (not Linux): trust the pid


def command_line(pid: int) -> list[bytes] | None:
    """The process's argv as /proc shows it (pids are reused: this tells whose pid it is now); None without /proc."""
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return None


def working_dir(pid: int) -> str | None:
    """The process's current directory as /proc shows it (resolved); None when it cannot be read (gone, no /proc).

    Unlike the command line, it is there for the whole of an exec: a child started with `cwd=` changes directory
    before it execs, and exec does not touch it."""
    try:
        return os.readlink(f"/proc/{pid}/cwd")
    except OSError:
        return None


def start_ticks(pid: int) -> int | None:
    """When the process started, in clock ticks since boot (/proc/PID/stat field 22); None without /proc.

    A pid alone names whoever holds it now: recorded with its start time, it names one process for good, so a
    pid reused after the original died is not mistaken for it."""
    try:
        return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[19])
    except (OSError, IndexError, ValueError):
        return None


def same_process(pid: int, ticks: int | None) -> bool:
    """The pid is alive and is the process that had start time `ticks` (None: the start time was not known)."""
    if not pid_alive(pid):
        return False
    now = start_ticks(pid)
    return ticks is None or now is None or now == ticks


def group_members(pgid: int) -> list[int]:
    """The live processes of process group `pgid` (/proc/PID/stat field 5), zombies left out; [] without /proc.

    A job's group outlives its leader: what a killed wrapper's job left running is found here. Linux does not
    hand out a pid that is still some process group's id, so the group named by a dead wrapper's pid is still
    the wrapper's while any member lives."""
    members = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if len(fields) > 2 and fields[2] == str(pgid) and fields[0] != "Z":
            members.append(int(stat.parent.name))
    return members


def signal_group(pgid: int, signum: int, *, sparing: int | None = None,
                 also_sparing: frozenset[int] = frozenset()) -> list[int]:
    """Send `signum` to every live member of group `pgid` but `sparing` (the wrapper itself) and `also_sparing`;
    returns who got it."""
    hit = []
    for pid in group_members(pgid):
        if pid == sparing or pid in also_sparing:
            continue
        try:
            os.kill(pid, signum)
            hit.append(pid)
        except (ProcessLookupError, PermissionError):
            continue
    return hit
