"""`gpuplan exec/ssh` into an AWS run through Systems Manager Session Manager: no open port, no public address,
the user's own AWS CLI and credentials (gpuplan builds the command line only).

- `--via ssm` (default): `aws ssm start-session --target i-... --document-name AWS-StartInteractiveCommand
  --parameters '{"command": [...]}'`, the command (or a login shell) in the job's container or run folder. The
  plugin exits 0 whatever the command did (https://github.com/aws/session-manager-plugin/issues/59), so `exec`'s
  line ends by printing a one-time marker with the status, which gpuplan strips and exits with.
  https://docs.aws.amazon.com/systems-manager/latest/userguide/session-manager-working-with-sessions-start.html
  (AWS-StartInteractiveCommand runs one command interactively; it needs the Session Manager plugin locally and
  the SSM agent plus an instance profile allowing ssm:UpdateInstanceInformation / ssmmessages:* on the machine:
  https://docs.aws.amazon.com/systems-manager/latest/userguide/session-manager-prerequisites.html)
- `--via ip`: plain `ssh ubuntu@PUBLIC_IP` after opening port 22 to the caller's address alone (a /32;
  providers/aws/ssh_access.py), for a machine with a public address.
- `--via ssh`: `ssh -o ProxyCommand="aws ssm start-session --target %h --document-name AWS-StartSSHSession
  --parameters portNumber=%p" ubuntu@i-...`, for scp/port forwarding with the key pair the run launched with.
  https://docs.aws.amazon.com/systems-manager/latest/userguide/session-manager-getting-started-enable-ssh-connections.html
"""

from __future__ import annotations

import json
import os
import secrets
import shlex
from collections.abc import Sequence
from typing import Any, Protocol

from gpuplan.providers.attach_base import Attach, AttachTarget, SshHost, remote_snippet, reporting_status
from gpuplan.providers.base import ProviderError

SSH_USER = "ubuntu"  # the DLAMI gpuplan boots is Ubuntu (providers/aws/rules.py DEFAULT_AMI_PARAMETER)


class AttachHost(Protocol):
    """What the way in needs of the AWS provider: its regions, its EC2 clients and the `ssh_from` setting."""

    regions: list[str]
    ssh_from: str | None

    def client(self, service: str, region: str, *, retries: int | None = None) -> Any: ...


def aws_attach(target: AttachTarget, command: Sequence[str] | None, *, interactive: bool, via: str | None,
               provider: AttachHost, prepare: bool = True) -> Attach:
    if not target.instance_id.startswith("i-"):
        raise ProviderError(f"run {target.run_id} node {target.node_rank}: {target.instance_id!r} is not an EC2 "
                            "instance id")
    region = target.region or (provider.regions[0] if provider.regions else None) or \
        os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION")
    where = ["--region", region] if region else []
    snippet = remote_snippet(target, command)
    if (via or "ssm") == "ssm":
        line = f"sudo -i sh -c {shlex.quote(snippet)}"
        # `exec` must exit with the command's status; start-session does not pass it back, so the line reports it
        # after a marker only this call knows (a command's own output cannot fake it).
        marker = f"__gpuplan_exit_{secrets.token_hex(8)}__" if command is not None else None
        params = json.dumps({"command": [reporting_status(line, marker) if marker else line]})
        return Attach(["aws", "ssm", "start-session", *where, "--target", target.instance_id,
                       "--document-name", "AWS-StartInteractiveCommand", "--parameters", params],
                      f"Session Manager into {target.instance_id}", status_marker=marker)
    if via == "ip":
        return _direct(target, snippet, region, provider, prepare=prepare,
                       tty=["-t"] if interactive or command is None else [])
    proxy = shlex.join(["aws", "ssm", "start-session", *where, "--target", "%h", "--document-name",
                        "AWS-StartSSHSession", "--parameters", "portNumber=%p"])
    tty = ["-t"] if interactive or command is None else []
    return Attach(["ssh", *tty, "-o", f"ProxyCommand={proxy}", f"{SSH_USER}@{target.instance_id}", snippet],
                  f"ssh to {target.instance_id} through Session Manager")


def _direct(target: AttachTarget, snippet: str, region: str | None, provider: AttachHost, *, prepare: bool,
            tty: list[str]) -> Attach:
    """`ssh ubuntu@PUBLIC_IP`, port 22 opened first to the caller's /32 (only when `prepare`: --print changes
    nothing and only looks the address up). The address: the provider's `ssh_from` setting
    (GPUPLAN_AWS_SSH_FROM), else what checkip.amazonaws.com sees."""
    from gpuplan.providers.aws import ssh_access
    from gpuplan.providers.aws.rules import caller_address, single_address_cidr

    if not region:
        raise ProviderError(f"run {target.run_id}: no region recorded for {target.instance_id}; cannot look it up")
    ec2 = provider.client("ec2", region)
    if not prepare:
        address = ssh_access.public_address(ssh_access.describe_one(ec2, target.instance_id))
        how = f"ssh to {target.instance_id} at {address} (port 22 is opened to your address when run)"
    else:
        wanted = provider.ssh_from or "auto"
        cidr = single_address_cidr(caller_address() if wanted == "auto" else wanted)
        access = ssh_access.open_ssh(ec2, target.instance_id, cidr)
        address = access.public_ip
        how = (f"ssh to {target.instance_id} at {address} (port 22 "
               f"{'opened' if access.opened else 'already open'} to {cidr} only)")
    return Attach(["ssh", *tty, f"{SSH_USER}@{address}", snippet], how)


def aws_ssh_host(target: AttachTarget, provider: AttachHost) -> SshHost:
    """The node as an ssh_config Host: ssh through Session Manager (AWS-StartSSHSession, as `--via ssh`), with
    the key pair the run launched with (https://docs.aws.amazon.com/systems-manager/latest/userguide/
    session-manager-getting-started-enable-ssh-connections.html)."""
    if not target.instance_id.startswith("i-"):
        raise ProviderError(f"run {target.run_id} node {target.node_rank}: {target.instance_id!r} is not an EC2 "
                            "instance id")
    region = target.region or (provider.regions[0] if provider.regions else None) or \
        os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION")
    where = ["--region", region] if region else []
    proxy = shlex.join(["aws", "ssm", "start-session", *where, "--target", "%h", "--document-name",
                        "AWS-StartSSHSession", "--parameters", "portNumber=%p"])
    return SshHost(target.instance_id, SSH_USER, proxy)
