"""A container image whose userland is this machine's own /usr, bind-mounted read-only: Debian's dash as /bin/sh,
bash, curl, python3 — what a cloud VM's image has — without a registry or a 60 s debootstrap.

The image holds only the merged-/usr symlinks (bin -> usr/bin, ...) and empty mount points; podman gets the mount
from a containers.conf (`volumes`), so code that builds its own `podman run` (the local runner, the boot script)
runs in it unchanged.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

from support.podmanhelp import podman_env

IMAGE = "localhost/gpuplan-test-hostusr:1"
ROOT = Path(__file__).resolve().parents[2]


def host_userland_env(folder: Path) -> dict[str, str]:
    """podman's environment with a containers.conf (in `folder`) that mounts the host's /usr into every container."""
    base = Path(podman_env().get("CONTAINERS_CONF") or "/etc/containers/containers.conf")
    text = base.read_text() if base.exists() else (ROOT / "scripts" / "podman-containers.conf").read_text()
    conf = folder / "containers.conf"
    conf.write_text(text.replace("[containers]\n", '[containers]\nvolumes = ["/usr:/usr:ro"]\n', 1))
    return {"CONTAINERS_CONF": str(conf)}


def host_userland_image() -> str:
    """Import the image once per machine; skip only where podman is absent."""
    podman = shutil.which("podman")
    if podman is None:
        pytest.skip("podman is not installed (scripts/test-services.sh installs it)")
    env = {**os.environ, **podman_env()}
    if subprocess.run([podman, "image", "exists", IMAGE], env=env, capture_output=True).returncode == 0:
        return IMAGE
    with tempfile.TemporaryDirectory() as root:
        base = Path(root)
        for folder in ("usr", "tmp", "etc", "root", "var/tmp", "run"):
            (base / folder).mkdir(parents=True)
        for link in ("bin", "sbin", "lib", "lib64"):
            if Path(f"/{link}").is_symlink():
                (base / link).symlink_to(os.readlink(f"/{link}"))
        for name in ("passwd", "group", "nsswitch.conf"):
            if Path(f"/etc/{name}").exists():
                shutil.copy(f"/etc/{name}", base / "etc" / name)
        tar = subprocess.Popen(["tar", "-C", root, "-c", "."], stdout=subprocess.PIPE)
        subprocess.run([podman, "import", "-q", "-", IMAGE], stdin=tar.stdout, env=env, check=True,
                       capture_output=True)
        tar.wait()
    return IMAGE
