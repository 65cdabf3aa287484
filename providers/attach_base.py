"""The values `gpuplan exec/ssh` works with (a recorded node, the command line that reaches it) and the pieces
every provider's builder shares: the container name and the shell line run on a cloud machine.
Each provider builds its own (`Attachable.attach` in providers/base.py)."""

from __future__ import annotations

import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

REMOTE_RUN_DIR = "/var/lib/gpuplan/run"  # where the cloud boot script keeps the run (gpuplan.jobs.bootstrap)
LOGIN_SHELL = ("/bin/sh", "-c", "command -v bash >/dev/null 2>&1 && exec bash -l || exec sh -l")


@dataclass(frozen=True)
class AttachTarget:
    """One node of a run as the books recorded it."""

    run_id: str
    provider: str
    instance_id: str
    node_rank: int
    nodes: int
    region: str | None = None
    zone: str | None = None
    run_dir: str | None = None


@dataclass(frozen=True)
class Attach:
    """What to run here: argv, in `cwd`, with `env` added to ours; `how` says it in words for the user."""

    argv: list[str]
    how: str
    cwd: str | None = None
    env: Mapping[str, str] = field(default_factory=dict)
    # When the tool does not pass the remote command's exit status back (Session Manager's start-session exits 0
    # whatever ran: aws/session-manager-plugin#59), the remote line ends by printing `MARKER=STATUS`; the caller
    # strips that line from the output and exits with STATUS (gpuplan.cli.remote_status).
    status_marker: str | None = None

    def shell_line(self) -> str:
        """The command line as one would type it (for --print): variables, then argv, quoted."""
        env = " ".join(f"{k}={shlex.quote(v)}" for k, v in sorted(self.env.items()))
        cd = f"cd {shlex.quote(self.cwd)} && " if self.cwd else ""
        return cd + (f"env {env} " if env else "") + shlex.join(self.argv)


@dataclass(frozen=True)
class SshHost:
    """How plain `ssh` reaches a node (an ssh_config(5) Host entry: `gpuplan ssh RUN --config`)."""

    host_name: str
    user: str | None = None
    proxy_command: str | None = None
    options: Mapping[str, str] = field(default_factory=dict)  # more ssh_config keywords (IdentityFile, ...)


def reporting_status(command_line: str, marker: str) -> str:
    """A remote shell line that runs `command_line` (one command: a child process, so an `exit` or `exec` inside
    what it runs cannot skip the report), then prints `MARKER=its exit status`."""
    return f"{command_line}; echo {marker}=$?"


def container_name(run_id: str, node_rank: int) -> str:
    """The name gpuplan gives a node's container, locally and on cloud machines alike."""
    return f"gpuplan-{run_id}-{node_rank}"


def remote_snippet(target: AttachTarget, command: Sequence[str] | None) -> str:
    """The shell line run on a cloud machine: the command (or a login shell) in the job's container when there
    is one, else in the run folder. Every word is quoted; the container name comes from the recorded run id."""
    name = shlex.quote(container_name(target.run_id, target.node_rank))
    words = shlex.join(list(command or LOGIN_SHELL))
    tty = "-i" if command else "-it"
    return (f"cd {REMOTE_RUN_DIR} 2>/dev/null || cd /; "
            f"for rt in docker podman; do if command -v $rt >/dev/null 2>&1 && "
            f"sudo $rt container inspect {name} >/dev/null 2>&1; then exec sudo $rt exec {tty} {name} {words}; fi; "
            f"done; exec {words}")


def node_dir_of(instance_id: str, root: str | Path | None) -> Path:
    """A local node's folder from its recorded id (`RUN/node-N`, relative to the provider's root)."""
    from gpuplan.paths import runs_dir

    path = Path(instance_id)
    return path if path.is_absolute() else Path(root or runs_dir()) / path
