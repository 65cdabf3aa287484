"""Where a local job's processes are kept, so that none of them outlives the books.

A process group is not enough: `setsid sh -c '...' &` leaves it, a double fork re-parents to init, and a job may
unset GPUPLAN_RUN_ID, so neither the group nor the environment finds what it left. Two ways are used, the
strongest that works here first (the choice is written to the node's `containment.json`, which every later
reader — the wrapper, the watchdog, `status`, `stop`, `reconcile` — uses):

- **cgroup** (cgroup v2 directory per node, under the first writable cgroup2 mount: /sys/fs/cgroup on a unified
  host, /sys/fs/cgroup/unified on a hybrid one). The job's first process enters it before exec; every process it
  ever starts is born inside, and only a process allowed to write another cgroup's `cgroup.procs` (root in the
  job) can leave. Members are listed by the kernel (`cgroup.procs`) and all are killed at once (`cgroup.kill`,
  Linux 5.14; else SIGKILL rounds until it is empty). It survives the wrapper's death: whoever looks next ends
  what is left.
- **group** (fallback where no cgroup2 mount is writable: not root and no delegated cgroup). The wrapper is a
  child subreaper (PR_SET_CHILD_SUBREAPER, man 2 prctl), so a setsid or double-forked process re-parents to the
  wrapper, not to init, and stays its descendant; the wrapper snapshots its descendants (pid and start time) into
  `members.json` every half second. Stated weakness: once the wrapper is killed (-9), a process started less than
  half a second before that, which also left the process group and unset GPUPLAN_RUN_ID, is not found.

`GPUPLAN_CONTAINMENT=group` chooses the fallback even where a cgroup could be made (tests use it to check both).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import signal
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from gpuplan.jobs.processes import command_line, pid_alive, same_process, start_ticks

CONTAINMENT_FILE = "containment.json"
MEMBERS_FILE = "members.json"
CHOICE_ENV = "GPUPLAN_CONTAINMENT"
PR_SET_CHILD_SUBREAPER = 36  # <linux/prctl.h>
GONE_WITHIN_SECONDS = 5.0
GROUP_WEAKNESS = ("no writable cgroup2 here: processes are tracked as the wrapper's descendants; after a kill -9 "
                  "of the wrapper, one started in its last half second that left the group is not found")


@dataclass(frozen=True)
class Containment:
    """How one node's processes are held: `kind` cgroup (with its directory) or group (the fallback)."""

    kind: str
    path: str | None = None
    weakness: str | None = None

    def to_json(self) -> str:
        return json.dumps(asdict(self))


def cgroup2_mounts() -> list[Path]:
    """The cgroup2 mount points of this machine (/proc/self/mountinfo, field 5 is the mount point)."""
    found = []
    try:
        lines = Path("/proc/self/mountinfo").read_text().splitlines()
    except OSError:
        return []
    for line in lines:
        before, _, after = line.partition(" - ")
        if after.split(" ", 1)[0] == "cgroup2":
            found.append(Path(before.split()[4]))
    return found


def _cgroup_name(node_dir: Path) -> str:
    """A name unique to the node folder (two homes may both have run ids alike in tests)."""
    digest = hashlib.sha256(str(node_dir.resolve()).encode()).hexdigest()[:12]
    return f"{node_dir.parent.name[:60]}-{node_dir.name}-{digest}"


def create(node_dir: Path) -> Containment:
    """Make this node's cgroup where one can be made, else choose the group fallback; recorded in the node."""
    chosen = Containment("group", None, GROUP_WEAKNESS)
    if os.environ.get(CHOICE_ENV, "") != "group":
        for mount in cgroup2_mounts():
            parent = mount / "gpuplan"
            try:
                parent.mkdir(exist_ok=True)
                group = parent / _cgroup_name(node_dir)
                group.mkdir(exist_ok=True)
            except OSError:
                continue
            if os.access(group / "cgroup.procs", os.W_OK):
                chosen = Containment("cgroup", str(group))
                break
    tmp = node_dir / f".{CONTAINMENT_FILE}.{os.getpid()}.tmp"
    fd = os.open(tmp, os.O_CREAT | os.O_WRONLY | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as fh:
        fh.write(chosen.to_json())
    os.replace(tmp, node_dir / CONTAINMENT_FILE)
    return chosen


def load(node_dir: Path) -> Containment | None:
    """The node's containment as recorded at its start, or None (a node from before containment existed)."""
    try:
        data = json.loads((node_dir / CONTAINMENT_FILE).read_text())
        return Containment(str(data["kind"]), data.get("path"), data.get("weakness"))
    except (OSError, ValueError, KeyError, TypeError):
        return None


def enter(containment: Containment) -> None:
    """Move the calling process into the node's cgroup (run in the job's first process before exec)."""
    if containment.kind == "cgroup" and containment.path:
        fd = os.open(os.path.join(containment.path, "cgroup.procs"), os.O_WRONLY)
        try:
            os.write(fd, b"0")
        finally:
            os.close(fd)


def become_subreaper() -> None:
    """Orphaned descendants re-parent to this process instead of init (Linux 3.4), so they stay findable."""
    import ctypes

    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)


def _parents() -> dict[int, int]:
    """pid -> parent pid of every live (non-zombie) process (/proc/PID/stat fields 3 and 4)."""
    found = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if fields and fields[0] != "Z":
            found[int(stat.parent.name)] = int(fields[1])
    return found


def descendants(pid: int) -> list[int]:
    """Every live descendant of `pid` (with a subreaper, what its children left behind is among them)."""
    parents = _parents()
    children: dict[int, list[int]] = {}
    for child, parent in parents.items():
        children.setdefault(parent, []).append(child)
    found, todo = [], [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


def snapshot_members(node_dir: Path, wrapper: int) -> None:
    """Record the wrapper's descendants with their start times (the group fallback's memory after a kill -9)."""
    members = [[pid, start_ticks(pid)] for pid in descendants(wrapper)]
    tmp = node_dir / f".{MEMBERS_FILE}.{os.getpid()}.tmp"
    with contextlib.suppress(OSError):
        fd = os.open(tmp, os.O_CREAT | os.O_WRONLY | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as fh:
            fh.write(json.dumps(members))
        os.replace(tmp, node_dir / MEMBERS_FILE)


def _cgroup_members(path: Path) -> list[int]:
    pids: list[int] = []
    for procs in [path / "cgroup.procs", *path.glob("**/cgroup.procs")]:
        with contextlib.suppress(OSError, ValueError):
            pids.extend(int(x) for x in procs.read_text().split())
    return sorted({p for p in pids if pid_alive(p)})


def members(node_dir: Path, containment: Containment | None = None) -> list[int]:
    """The live processes of the node's job, as its containment knows them (the wrapper itself is not one)."""
    containment = containment or load(node_dir)
    if containment is None:
        return []
    if containment.kind == "cgroup" and containment.path:
        return _cgroup_members(Path(containment.path))
    found = set(_live_wrapper_descendants(node_dir))
    try:
        recorded = json.loads((node_dir / MEMBERS_FILE).read_text())
    except (OSError, ValueError):
        recorded = []
    found.update(int(pid) for pid, ticks in recorded if same_process(int(pid), ticks))
    return sorted(found)


def _live_wrapper_descendants(node_dir: Path) -> list[int]:
    """The descendants of the node's wrapper while it lives (a subreaper: its job's leftovers are among them)."""
    try:
        wrapper = int((node_dir / "wrapper.pid").read_text().strip())
    except (OSError, ValueError):
        return []
    cmdline = command_line(wrapper)
    if not pid_alive(wrapper) or cmdline is None or str(node_dir).encode() not in b" ".join(cmdline):
        return []  # gone, or the pid is someone else's now
    return descendants(wrapper)


def signal_all(node_dir: Path, signum: int, containment: Containment | None = None) -> list[int]:
    """Send `signum` to every member; returns who got it."""
    hit = []
    for pid in members(node_dir, containment):
        try:
            os.kill(pid, signum)
            hit.append(pid)
        except (ProcessLookupError, PermissionError):
            continue
    return hit


def kill_all(node_dir: Path, containment: Containment | None = None) -> int:
    """SIGKILL every member and wait until none is left (a forking job is killed in rounds); returns how many."""
    containment = containment or load(node_dir)
    if containment is None:
        return 0
    killed: set[int] = set()
    deadline = time.monotonic() + GONE_WITHIN_SECONDS
    kill_file = Path(containment.path or "/nonexistent") / "cgroup.kill"
    while time.monotonic() < deadline:
        live = members(node_dir, containment)
        if not live:
            break
        killed.update(live)
        if containment.kind == "cgroup" and kill_file.exists():
            with contextlib.suppress(OSError):
                kill_file.write_text("1")
        for pid in live:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
        time.sleep(0.02)
    return len(killed)


def remove(containment: Containment | None) -> None:
    """Remove an empty node cgroup (a member's exit is seen by the kernel a moment after it is reaped)."""
    if containment is None or containment.kind != "cgroup" or not containment.path:
        return
    for _ in range(50):
        try:
            os.rmdir(containment.path)
            return
        except FileNotFoundError:
            return
        except OSError:
            time.sleep(0.02)
