"""Which container runtime can really run a container here: `image:` means a container, never the host.

A runtime counts only when it has just run one, because a CLI on PATH proves little: a docker client without a
daemon, a podman whose OCI runtime (crun) cannot start containers on this kernel, a rootless podman without
subuids — each has a working `version` and fails every `run`. So:

- podman runs `/bin/true` in a throw-away container made from a temporary root folder that borrows the host's
  read-only /usr (`--rootfs`, no image, no network, no pull), which exercises the OCI runtime, the namespaces
  and the cgroups exactly as a job's container will (about 0.2 s);
- docker (which has no `--rootfs`) must have a daemon that answers `version` with its server part; rootless
  docker is found the same way, through the client's own DOCKER_HOST/context.

The job's launch (gpuplan.providers.local.LocalProvider.check_launch) and the node wrapper (gpuplan.jobs.runner)
both ask `find_runtime`; with none working an image job is refused with `no_runtime_message`, never run on the
host. `runtime: process` in the spec is the explicit way to run without a container.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

RUNTIMES = ("podman", "docker")
PROBE_TIMEOUT_S = 60.0
# Host folders the probe's root borrows (read-only): enough for /bin/true and its loader on merged-/usr and
# classic layouts alike. A top-level symlink (bin -> usr/bin) is copied as a symlink, a real folder bind-mounted.
_BORROWED = ("usr", "bin", "sbin", "lib", "lib32", "lib64")


@dataclass(frozen=True)
class RuntimeProbe:
    """What trying one runtime found: `works`, and in words why not (the runtime's own error, one line)."""

    name: str
    works: bool
    detail: str = ""

    def describe(self) -> str:
        return f"{self.name}: {'works' if self.works else self.detail}"


def _one_line(text: str, limit: int = 300) -> str:
    lines = [ln.strip() for ln in text.strip().splitlines() if ln.strip()]
    # The runtime's own error is its last line (podman prints `Error: ...` after any warnings).
    line = lines[-1] if lines else ""
    return line if len(line) <= limit else line[: limit - 3] + "..."


def _probe_root(root: Path) -> list[str]:
    """Lay out the probe's root folder in `root`; returns the runtime's --mount options for it."""
    mounts = []
    for name in _BORROWED:
        host = Path("/") / name
        if host.is_symlink():
            (root / name).symlink_to(os.readlink(host))
        elif host.is_dir():
            (root / name).mkdir()
            mounts += ["--mount", f"type=bind,src={host},dst=/{name},ro=true"]
    return mounts


def probe_podman(exe: str, timeout: float = PROBE_TIMEOUT_S) -> RuntimeProbe:
    """Run /bin/true in a container made from a temporary root (see the module doc); works when it exits 0."""
    with tempfile.TemporaryDirectory(prefix="gpuplan-probe-") as folder:
        root = Path(folder)
        argv = [exe, "run", "--rm", "--network", "none", "--read-only", *_probe_root(root), "--rootfs", str(root),
                "/bin/true"]
        try:
            proc = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL)
        except subprocess.TimeoutExpired:
            return RuntimeProbe("podman", False, f"a test container did not finish within {timeout:.0f} s")
        except OSError as exc:
            return RuntimeProbe("podman", False, f"cannot run {exe}: {exc}")
    if proc.returncode == 0:
        return RuntimeProbe("podman", True)
    why = _one_line(proc.stderr or proc.stdout) or "no message"
    return RuntimeProbe("podman", False, f"a test container failed (exit {proc.returncode}): {why}")


def probe_docker(exe: str, timeout: float = PROBE_TIMEOUT_S) -> RuntimeProbe:
    """Ask the docker daemon for its version: a client alone (no daemon, no permission on its socket) fails."""
    try:
        proc = subprocess.run([exe, "version", "--format", "{{.Server.Version}}"], capture_output=True, text=True,
                              timeout=timeout, stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        return RuntimeProbe("docker", False, f"the daemon did not answer within {timeout:.0f} s")
    except OSError as exc:
        return RuntimeProbe("docker", False, f"cannot run {exe}: {exc}")
    if proc.returncode == 0 and proc.stdout.strip():
        return RuntimeProbe("docker", True)
    why = _one_line(proc.stderr or proc.stdout) or "no server version"
    return RuntimeProbe("docker", False, f"no daemon to run containers (exit {proc.returncode}): {why}")


def probe(name: str, timeout: float = PROBE_TIMEOUT_S) -> RuntimeProbe:
    """Try runtime `name` (podman or docker) as described in the module doc."""
    exe = shutil.which(name)
    if exe is None:
        return RuntimeProbe(name, False, "not installed (not on PATH)")
    return probe_podman(exe, timeout) if name == "podman" else probe_docker(exe, timeout)


@dataclass(frozen=True)
class RuntimeChoice:
    """The runtime to use (None: none works) and every probe that led there, for the message."""

    runtime: str | None
    probes: tuple[RuntimeProbe, ...]


def find_runtime(requested: str = "auto", candidates: Sequence[str] = RUNTIMES) -> RuntimeChoice:
    """The first of `candidates` that works (podman first: it needs no daemon and runs rootless), or only the
    `requested` one when the spec names podman or docker."""
    names = [requested] if requested in RUNTIMES else list(candidates)
    probes = []
    for name in names:
        found = probe(name)
        probes.append(found)
        if found.works:
            return RuntimeChoice(name, tuple(probes))
    return RuntimeChoice(None, tuple(probes))


def no_runtime_message(image: str, choice: RuntimeChoice) -> str:
    """One line: the image, what was tried and why each failed, and the two ways out."""
    tried = "; ".join(p.describe() for p in choice.probes)
    return (f"image {image} needs a container runtime and none works here ({tried}); install podman or start "
            "docker's daemon (or fix what stops them, as quoted), or set `runtime: process` in the spec to run the "
            "command on this machine without a container")
