"""Why a job failed, in words the user can act on, from the runtime's own error — never just "exit code N".

The node wrapper (gpuplan.jobs.runner) calls `failure_cause` when a job ends non-zero, with the output the job
and its runtime wrote to the job log; the result goes into the node's exit record as `cause` and from there
into the run's recorded reason (gpuplan.supervise.watch).

Exit codes of `podman run` / `docker run` tell who failed
(https://docs.podman.io/en/latest/markdown/podman-run.1.html#exit-status,
https://docs.docker.com/reference/cli/docker/container/run/#exit-status): 125 the runtime itself (an image
that cannot be pulled, a device it cannot set up), 126 the command cannot be invoked, 127 the command cannot be
found; anything else is the command's own code. The runtime's message (podman's `Error: ...`, docker's
`docker: Error response from daemon: ...`) is quoted. A shell says `not found` with 127 for a command it cannot
find. Exit 137 (or a process killed by SIGKILL) is an out-of-memory kill only when the kernel says so: the
`oom_kill` count of the job's memory cgroup (v1 memory.oom_control, v2 memory.events) or, for a container in a
cgroup of its own, the kernel's global count in /proc/vmstat, rose while the job ran (`OomWatch`).
"""

from __future__ import annotations

import re
import signal
from dataclasses import dataclass
from pathlib import Path

from gpuplan.jobs.gpu_devices import GENERATE_HINT

CGROUP_ROOT = Path("/sys/fs/cgroup")
VMSTAT = Path("/proc/vmstat")
_PULL = ("initializing source", "trying to pull", "manifest unknown", "image not known", "pull access denied",
         "unable to find image", "short-name", "unable to copy from source", "repository does not exist",
         "error reading manifest", "requested access to the resource is denied", "name unknown")
_GPU = ("cdi device", "unresolvable cdi", "could not select device driver", "nvidia-container-cli",
        "nvidia.com/gpu")
# What the container's init prints when it cannot exec the command: podman's catatonit ("failed to exec pid1: ...",
# exit 1), docker's tini ("[FATAL tini (7)] exec X failed: ...").
# The runtime cannot find its init binary (podman: catatonit, docker: docker-init, i.e. tini).
_NO_INIT = ("container-init binary not found", '"docker-init": executable file not found')
_INIT_EXEC_FAILED = ("failed to exec pid1:", "] exec ")
_NOT_FOUND = ("executable file not found", "no such file or directory", "not found")
_RUNTIME_LINE = re.compile(r"^(?:Error: |docker: |Error response from daemon: )")


def _counter(path: Path, key: str) -> int | None:
    """`key N` from a flat-keyed kernel file (memory.events, memory.oom_control, /proc/vmstat)."""
    try:
        for line in path.read_text().splitlines():
            name, _, value = line.partition(" ")
            if name == key and value.strip().isdigit():
                return int(value)
    except OSError:
        return None
    return None


def memory_cgroup_counter(pid: int) -> tuple[Path, str] | None:
    """(file, key) holding the oom_kill count of `pid`'s memory cgroup, or None when it cannot be read."""
    try:
        lines = Path(f"/proc/{pid}/cgroup").read_text().splitlines()
    except OSError:
        return None
    for line in lines:
        _, controllers, path = line.split(":", 2)
        if "memory" in controllers.split(","):  # cgroup v1
            found = CGROUP_ROOT / "memory" / path.lstrip("/") / "memory.oom_control"
            if found.exists():
                return found, "oom_kill"
    for line in lines:
        _, controllers, path = line.split(":", 2)
        if controllers == "":  # cgroup v2 (unified, or the unified part of a hybrid)
            for base in (CGROUP_ROOT, CGROUP_ROOT / "unified"):
                found = base / path.lstrip("/") / "memory.events"
                if found.exists():
                    return found, "oom_kill"
    return None


@dataclass(frozen=True)
class OomWatch:
    """The OOM-kill counts when the job started: its memory cgroup's and the kernel's, to compare at its end."""

    cgroup_file: Path | None
    cgroup_before: int | None
    global_before: int | None

    @classmethod
    def start(cls, pid: int) -> OomWatch:
        found = memory_cgroup_counter(pid)
        before = _counter(*found) if found else None
        return cls(found[0] if found else None, before, _counter(VMSTAT, "oom_kill"))

    def kills(self) -> tuple[int, str] | None:
        """(how many, where counted) when OOM kills happened since the start; None when none did."""
        if self.cgroup_file is not None and self.cgroup_before is not None:
            now = _counter(self.cgroup_file, "oom_kill")
            if now is not None and now > self.cgroup_before:
                return now - self.cgroup_before, f"memory cgroup {self.cgroup_file.parent}"
        if self.global_before is not None:
            now = _counter(VMSTAT, "oom_kill")
            if now is not None and now > self.global_before:
                return now - self.global_before, "the kernel (/proc/vmstat)"
        return None


def runtime_message(output: str) -> str | None:
    """The runtime's own last error line (podman `Error: ...`, docker `docker: Error response ...`), trimmed."""
    lines = [ln.strip() for ln in output.splitlines() if _RUNTIME_LINE.match(ln.strip())]
    if not lines:
        return None
    line = _RUNTIME_LINE.sub("", lines[-1])
    line = re.sub(r"^Error response from daemon: ", "", line)
    return line if len(line) <= 400 else line[:397] + "..."


def _last_line(output: str) -> str:
    lines = [ln.strip() for ln in output.splitlines() if ln.strip() and not ln.startswith("[gpuplan ")]
    last = lines[-1] if lines else ""
    return last if len(last) <= 300 else last[:297] + "..."


def _init_exec_failure(output: str) -> str | None:
    """The init's line saying it could not exec the job's command, if the output has one."""
    for line in output.splitlines()[-20:]:
        if any(m in line for m in _INIT_EXEC_FAILED) and ("catatonit" in line or "tini" in line):
            return line.strip()
    return None


def failure_cause(code: int, *, runtime: str, image: str | None, output: str,
                  oom: tuple[int, str] | None = None) -> str | None:
    """The cause of a non-zero exit in words, or None when nothing more than the exit code is known.

    `output`: what the job and its runtime printed (the tail of the job log since the job started); `oom`:
    `OomWatch.kills()`."""
    if code == 0:
        return None
    from gpuplan.jobs.setup_step import setup_cause

    in_setup = setup_cause(code, output)
    if in_setup is not None:
        return in_setup
    lowered = output.lower()
    if code in (137, -signal.SIGKILL):
        if oom is not None:
            count, where = oom
            return f"out of memory: the kernel's OOM killer ended the job (exit {code}; {where} oom_kill +{count})"
        return (f"killed by SIGKILL (exit {code}); not out of memory by the kernel's OOM-kill counts, so something "
                "else killed it")
    if code < 0:
        return f"killed by signal {signal.Signals(-code).name} (exit {code})"
    if runtime in ("podman", "docker") and any(k in lowered for k in _NO_INIT):
        return (f"{runtime} has no init for --init (jobs run with one so a stop reaches them): install "
                f"{'catatonit' if runtime == 'podman' else 'tini'}: {runtime_message(output) or _last_line(output)}")
    init_said = _init_exec_failure(output) if runtime in ("podman", "docker") else None
    if init_said:  # the container's init (--init) could not start the command: it says so, with exit 1 or 127
        return f"no such command in the image {image}: {init_said}"
    if runtime in ("podman", "docker") and code in (125, 126, 127):
        said = runtime_message(output) or _last_line(output) or "no message"
        if any(k in said.lower() for k in _GPU) or (code == 125 and any(k in lowered for k in _GPU)):
            return f"GPU not available in the container ({runtime}): {said}; {GENERATE_HINT}, or check nvidia-smi"
        if code == 125 and any(k in lowered for k in _PULL):
            return f"image pull failed for {image}: {said}"
        if code == 127 or (code == 126 and any(k in said.lower() for k in _NOT_FOUND)):
            return f"no such command in the image {image}: {said}"
        if code == 126:
            return f"the command cannot be run in the image {image} (not executable?): {said}"
        return f"{runtime} could not run the container: {said}"
    if code == 127:
        return f"no such command (exit 127): {_last_line(output) or 'the shell could not find it'}"
    if code == 126:
        return f"the command cannot be run (exit 126, not executable?): {_last_line(output)}"
    return None
