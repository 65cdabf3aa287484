"""NVIDIA GPUs on this machine, and how a container gets them.

A job that asks for GPUs must never quietly run on a CPU: the launch refuses a GPU spec on a machine without
NVIDIA devices (gpuplan.launching.gpu_check, unless --allow-cpu), and a container on a machine with them gets
them all:

- podman through the Container Device Interface: `--device nvidia.com/gpu=all` needs a CDI spec naming the
  `nvidia.com/gpu` devices in /etc/cdi or /var/run/cdi, which the NVIDIA Container Toolkit writes with
  `nvidia-ctk cdi generate --output=/etc/cdi/nvidia.yaml`
  (https://docs.nvidia.com/datacenter/cloud-native/container-toolkit/latest/cdi-support.html: "Two typical
  locations for CDI specifications are /etc/cdi/ and /var/run/cdi"). Without one podman fails with
  `unresolvable CDI devices nvidia.com/gpu=all`, so the wrapper generates it first when it may (`ensure_cdi_spec`);
- docker through its `--gpus all` flag (the toolkit's runtime hook,
  https://docs.docker.com/reference/cli/docker/container/run/#gpus).

`nvidia-smi` inside the container is the check that it worked.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

CDI_DIRS = ("/etc/cdi", "/var/run/cdi")
CDI_KIND = "nvidia.com/gpu"
_DEVICE = re.compile(r"^nvidia\d+$")  # /dev/nvidia0.. (not nvidiactl, nvidia-uvm, nvidia-modeset)


def nvidia_devices(dev: Path = Path("/dev")) -> list[str]:
    """The NVIDIA GPU device files (/dev/nvidiaN), one per GPU the driver exposes; [] on a machine without."""
    try:
        names = [p.name for p in dev.iterdir()]
    except OSError:
        return []
    return sorted((str(dev / n) for n in names if _DEVICE.match(n)), key=lambda p: int(p.rsplit("nvidia", 1)[1]))


def gpu_run_args(runtime: str, gpus: int) -> list[str]:
    """The `podman run` / `docker run` options that hand every GPU of this machine to the container."""
    if gpus <= 0:
        return []
    if runtime == "podman":
        return ["--device", f"{CDI_KIND}=all"]
    return ["--gpus", "all"]


def has_cdi_spec(dirs: Sequence[str] = CDI_DIRS) -> bool:
    """True when a CDI spec in `dirs` names the nvidia.com/gpu devices (what `--device nvidia.com/gpu=all` needs)."""
    for folder in dirs:
        try:
            files = [p for p in Path(folder).iterdir() if p.suffix in (".yaml", ".yml", ".json")]
        except OSError:
            continue
        for path in files:
            try:
                if CDI_KIND in path.read_text(errors="replace"):
                    return True
            except OSError:
                continue
    return False


@dataclass(frozen=True)
class CdiStatus:
    """Whether podman can resolve nvidia.com/gpu=all now, and what was done or is missing (for the job log)."""

    ready: bool
    note: str


GENERATE_HINT = f"run `sudo nvidia-ctk cdi generate --output={CDI_DIRS[0]}/nvidia.yaml`"


def cdi_problem(dirs: Sequence[str] = CDI_DIRS, nvidia_ctk: str | None = None) -> str | None:
    """Why podman could not be given the GPUs (no CDI spec, and no nvidia-ctk to write one), or None. Asked at
    launch, before anything is recorded; it writes nothing (the wrapper generates the spec when it starts)."""
    if has_cdi_spec(dirs) or (nvidia_ctk or shutil.which("nvidia-ctk")):
        return None
    return (f"podman needs a CDI spec for {CDI_KIND} to give the container the GPUs, and there is none (in "
            f"{' or '.join(dirs)}) and no nvidia-ctk to generate it: install the NVIDIA Container Toolkit and "
            f"{GENERATE_HINT}")


def ensure_cdi_spec(dirs: Sequence[str] = CDI_DIRS, nvidia_ctk: str | None = None) -> CdiStatus:
    """Make sure a CDI spec for the GPUs exists: nothing to do when one does; else generate one with nvidia-ctk
    into the first folder of `dirs` that can be written (root: /etc/cdi). Never raises: a failure is a status
    whose note says how to fix it, and podman's own error then names the cause."""
    if has_cdi_spec(dirs):
        return CdiStatus(True, "CDI spec for nvidia.com/gpu found")
    exe = nvidia_ctk or shutil.which("nvidia-ctk")
    if exe is None:
        return CdiStatus(False, "no CDI spec for nvidia.com/gpu and no nvidia-ctk to generate one: install the "
                                f"NVIDIA Container Toolkit and {GENERATE_HINT}")
    errors = []
    for folder in dirs:
        target = Path(folder) / "nvidia.yaml"
        try:
            target.parent.mkdir(parents=True, exist_ok=True)
            proc = subprocess.run([exe, "cdi", "generate", f"--output={target}"], capture_output=True, text=True,
                                  timeout=120, stdin=subprocess.DEVNULL)
        except (OSError, subprocess.TimeoutExpired) as exc:
            errors.append(f"{target}: {exc}")
            continue
        if proc.returncode == 0 and has_cdi_spec([folder]):
            return CdiStatus(True, f"generated the CDI spec {target} with nvidia-ctk")
        said = (proc.stderr or proc.stdout).strip().splitlines()
        errors.append(f"{target}: {said[-1] if said else 'no spec written'}")
    return CdiStatus(False, f"could not generate a CDI spec ({'; '.join(errors)}): {GENERATE_HINT}")
