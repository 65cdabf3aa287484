"""A local busybox image for container tests (no registry is reachable: images are built here)."""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
IMAGE = "localhost/gpuplan-test-busybox:1"
APPLETS = ("sh", "echo", "printf", "env", "cat", "sleep", "ls", "touch", "test", "[", "mkdir", "id")


def podman_env() -> dict[str, str]:
    """The runc/cgroupfs settings this machine needs (crun fails here), from the repo's copy of the recipe."""
    env = {}
    if not os.environ.get("CONTAINERS_CONF"):
        env["CONTAINERS_CONF"] = str(ROOT / "scripts" / "podman-containers.conf")
    return env


def busybox_image() -> str:
    """Import a one-binary busybox image with podman (once per machine); skip only where podman is absent."""
    podman = shutil.which("podman")
    busybox = shutil.which("busybox") or "/bin/busybox"
    if podman is None:
        pytest.skip("podman is not installed (scripts/test-services.sh installs it)")
    if not Path(busybox).exists():
        pytest.skip("busybox-static is not installed (scripts/test-services.sh installs it)")
    env = {**os.environ, **podman_env()}
    have = subprocess.run([podman, "image", "exists", IMAGE], env=env, capture_output=True)
    if have.returncode == 0:
        return IMAGE
    with tempfile.TemporaryDirectory() as root:
        bin_dir = Path(root) / "bin"
        bin_dir.mkdir()
        shutil.copy(busybox, bin_dir / "busybox")
        for applet in APPLETS:
            (bin_dir / applet).symlink_to("busybox")
        tar = subprocess.Popen(["tar", "-C", root, "-c", "."], stdout=subprocess.PIPE)
        subprocess.run([podman, "import", "-q", "-", IMAGE], stdin=tar.stdout, env=env, check=True,
                       capture_output=True)
        tar.wait()
    return IMAGE
