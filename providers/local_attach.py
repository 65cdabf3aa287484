"""`gpuplan exec/ssh` into a local run: the job's container when it runs in one, else its working folder."""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Sequence
from pathlib import Path

from gpuplan.providers.attach_base import LOGIN_SHELL, Attach, AttachTarget, container_name, node_dir_of
from gpuplan.providers.base import ProviderError


def running_container(name: str) -> str | None:
    """`podman` or `docker` when a container called `name` is running under it, else None (asked, not guessed:
    a job with an image may still have run as a process where no runtime works)."""
    for runtime in ("podman", "docker"):
        exe = shutil.which(runtime)
        if exe is None:
            continue
        try:
            proc = subprocess.run([exe, "container", "inspect", "--format", "{{.State.Running}}", name],
                                  capture_output=True, text=True, timeout=30, stdin=subprocess.DEVNULL)
        except (OSError, subprocess.TimeoutExpired):
            continue
        if proc.returncode == 0 and proc.stdout.strip().lower() == "true":
            return runtime
    return None


def local_attach(target: AttachTarget, command: Sequence[str] | None, *, interactive: bool,
                 root: Path | None = None) -> Attach:
    """`podman exec [-it] gpuplan-RUN-N CMD`, or CMD in the node's working folder with the job's variables."""
    from gpuplan.jobs.runner import LAUNCH_FILE, NodeLaunch, job_environment, process_workdir

    node_dir = node_dir_of(target.instance_id, root)
    try:
        launch = NodeLaunch.from_json((node_dir / LAUNCH_FILE).read_text())
    except (OSError, ValueError) as exc:
        raise ProviderError(f"node {target.node_rank} of run {target.run_id}: cannot read {node_dir / LAUNCH_FILE}"
                            f" ({exc})") from exc
    argv = list(command or LOGIN_SHELL)
    name = container_name(target.run_id, target.node_rank)
    runtime = running_container(name) if launch.image else None
    if runtime is not None:
        flags = ["-i", "-t"] if interactive else ["-i"]  # stdin reaches the command either way (`... | exec`)
        return Attach([runtime, "exec", *flags, name, *argv], f"{runtime} exec into container {name}")
    cwd = process_workdir(launch)
    if not Path(cwd).is_dir():
        cwd = launch.run_dir
    env = {**launch.env, **job_environment(launch, run_dir=launch.run_dir)}  # the spec's env, then the contract
    return Attach(argv, f"a process in {cwd} with the job's variables (no secrets)", cwd=cwd, env=env)
