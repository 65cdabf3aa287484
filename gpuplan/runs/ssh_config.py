"""`gpuplan ssh RUN --config`: ssh_config(5) Host entries for a run's machines, in files one Include line reaches.

As `sky` (~/.sky/generated/ssh/) and dstack (~/.dstack/ssh/config) do: each run gets its own file,
GPUPLAN_HOME/ssh/gpuplan-RUN, with `Host gpuplan-RUN` (node 0) and `Host gpuplan-RUN-N` (node N), so `ssh`,
`scp`, `rsync` and an editor's remote mode reach the machine by name once ~/.ssh/config starts with
`Include GPUPLAN_HOME/ssh/gpuplan-*` (ssh_config(5): Include takes glob patterns; put it before any Host line,
or it only applies inside that Host). The file goes when the run ends (gpuplan.supervise.settle), so no entry
points at a machine that is gone or, worse, at someone else's machine that got its address.
"""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from pathlib import Path

from gpuplan.paths import PRIVATE_FILE_MODE, data_home, make_private_dir
from gpuplan.providers.attach_base import SshHost

PREFIX = "gpuplan-"
_SAFE = re.compile(r"^[A-Za-z0-9._-]+$")


def ssh_dir() -> Path:
    return data_home() / "ssh"


def host_alias(run_id: str, node_rank: int) -> str:
    return f"{PREFIX}{run_id}" if node_rank == 0 else f"{PREFIX}{run_id}-{node_rank}"


def include_line() -> str:
    return f"Include {ssh_dir()}/{PREFIX}*"


def _value(text: str) -> str:
    """An ssh_config value on one line (a newline would start a new keyword: refuse it)."""
    if "\n" in text or "\r" in text or "\0" in text:
        raise ValueError(f"an ssh_config value cannot hold a line break: {text!r}")
    return text


def entry_text(run_id: str, hosts: Sequence[tuple[int, SshHost]]) -> str:
    if not _SAFE.match(run_id):
        raise ValueError(f"run id {run_id!r} cannot name an ssh host")
    lines = [f"# gpuplan run {run_id}: written by `gpuplan ssh {run_id} --config`, removed when the run ends"]
    for rank, host in hosts:
        lines += ["", f"Host {host_alias(run_id, rank)}", f"  HostName {_value(host.host_name)}"]
        if host.user:
            lines.append(f"  User {_value(host.user)}")
        if host.proxy_command:
            lines.append(f"  ProxyCommand {_value(host.proxy_command)}")
        lines += [f"  {key} {_value(value)}" for key, value in host.options.items()]
        # A cloud machine's host key is new on every launch: accept a new one, refuse a changed one.
        lines.append("  StrictHostKeyChecking accept-new")
    return "\n".join(lines) + "\n"


def write_entry(run_id: str, hosts: Sequence[tuple[int, SshHost]]) -> Path:
    """Write (atomically, owner-only) the run's file; returns its path."""
    folder = ssh_dir()
    make_private_dir(folder)
    path = folder / f"{PREFIX}{run_id}"
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_CREAT | os.O_WRONLY | os.O_TRUNC, PRIVATE_FILE_MODE)
    with os.fdopen(fd, "w") as out:
        out.write(entry_text(run_id, hosts))
    os.replace(tmp, path)
    return path


def remove_entry(run_id: str) -> bool:
    """Delete the run's file if there is one (True when one was deleted)."""
    if not _SAFE.match(run_id):
        return False
    try:
        (ssh_dir() / f"{PREFIX}{run_id}").unlink()
    except FileNotFoundError:
        return False
    return True


def entries() -> list[str]:
    """Run ids that have an entry file."""
    try:
        return sorted(p.name[len(PREFIX):] for p in ssh_dir().glob(f"{PREFIX}*") if p.is_file())
    except OSError:
        return []
