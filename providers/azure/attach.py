"""`gpuplan exec/ssh` into an Azure run: plain ssh to the node's public IP as the `gpuplan` admin user, with the
key the VM was given (`[providers.azure] ssh_public_key`, else ~/.ssh/id_ed25519 or id_rsa).

Port 22 is open only to the address a launch named with `ssh_from` (providers/azure/network.py): without it the
NSG's default DenyAllInBound refuses every ssh, so gpuplan says so instead of building a command that hangs.
https://learn.microsoft.com/azure/virtual-machines/linux-vm-connect
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from gpuplan.providers.attach_base import Attach, AttachTarget, SshHost, remote_snippet
from gpuplan.providers.azure.compute import ADMIN_USER, split_instance_id
from gpuplan.providers.azure.naming import NSG, network_name
from gpuplan.providers.azure.network import SSH_RULE, nic_addresses
from gpuplan.providers.base import ProviderError


def azure_ssh_host(session: Any, target: AttachTarget) -> SshHost:
    """The node as an ssh_config Host: its public IP, the `gpuplan` user; refused when port 22 is not open."""
    group, name = split_instance_id(target.instance_id)
    _, public = nic_addresses(session, group, name)
    if not public:
        raise ProviderError(f"run {target.run_id} node {target.node_rank}: {name} has no public IP (the VM is gone, "
                            "or public_ip is off)")
    region = target.region or ""
    try:
        nsg = session.network.network_security_groups.get(group, network_name(NSG, region))
        rules = [r.name for r in (nsg.security_rules or [])]
    except Exception:  # unreadable: let ssh say what happens
        rules = [SSH_RULE]
    if SSH_RULE not in rules:
        raise ProviderError(f"run {target.run_id}: port 22 was not opened at launch; launch with [providers.azure] "
                            "ssh_from set to your address (only that address may connect)")
    return SshHost(public, ADMIN_USER)


def azure_attach(session: Any, target: AttachTarget, command: Sequence[str] | None, *, interactive: bool) -> Attach:
    host = azure_ssh_host(session, target)
    argv = ["ssh", "-o", "StrictHostKeyChecking=accept-new"]
    if interactive or command is None:
        argv.append("-t")
    argv += [f"{host.user}@{host.host_name}", remote_snippet(target, command)]
    return Attach(argv, f"ssh to {host.host_name} (run {target.run_id} node {target.node_rank})")
