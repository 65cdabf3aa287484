"""Fake container runtimes that fail the way broken real ones do, to put first on PATH.

- podman whose CLI answers `version` (as a broken install does) but whose every `run` fails with the OCI
  runtime's error, exit 126 (what podman says when crun/runc cannot start a container);
- docker: a client with no daemon (`version` prints the client part, then the daemon error, exit 1).
"""

from __future__ import annotations

import os
from pathlib import Path

PODMAN = """#!/bin/sh
if [ "$1" = version ]; then echo "Version: 4.3.1"; exit 0; fi
echo "Error: crun: cannot set up the cgroup: Permission denied: OCI permission denied" >&2
exit 126
"""

DOCKER = """#!/bin/sh
if [ "$1" = version ]; then
  echo ""
  echo "Cannot connect to the Docker daemon at unix:///var/run/docker.sock. Is the docker daemon running?" >&2
  exit 1
fi
echo "docker: Cannot connect to the Docker daemon at unix:///var/run/docker.sock." >&2
exit 125
"""


def failing_runtimes(folder: Path) -> dict[str, str]:
    """Write the fakes into `folder`; returns the environment that puts them first on PATH."""
    folder.mkdir(parents=True, exist_ok=True)
    for name, text in (("podman", PODMAN), ("docker", DOCKER)):
        path = folder / name
        path.write_text(text)
        path.chmod(0o755)
    return {"PATH": f"{folder}{os.pathsep}{os.environ.get('PATH', '')}"}
