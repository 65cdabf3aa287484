"""`gpuplan ssh RUN --via ip` on AWS: open port 22 of a running machine to one address (the caller's /32) and
return its public address, for a plain `ssh ubuntu@ADDRESS`.

The port is opened by adding gpuplan's per-address SSH group (providers/aws/network.py, the same group a launch
with `ssh_from` attaches) to the machine's primary network interface. ModifyNetworkInterfaceAttribute replaces the
interface's set of groups, so the current groups are kept and the SSH group added: "The new set of groups you
specify replaces the current set. You must specify at least one group ... You must specify the ID of the security
group, not the name." (https://docs.aws.amazon.com/AWSEC2/latest/APIReference/API_ModifyNetworkInterfaceAttribute.html;
the interface call, not ModifyInstanceAttribute, which "can result in an error if the instance has more than
one ENI": https://docs.aws.amazon.com/AWSEC2/latest/APIReference/API_ModifyInstanceAttribute.html). The group
stays (tagged, shared with later launches for that address) but opens nothing once the machine is gone; its one
rule allows only that address.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from gpuplan.providers.aws import network
from gpuplan.providers.base import ProviderError


@dataclass(frozen=True)
class SshAccess:
    """Where to ssh, and whether this call opened the port (False: it was open already)."""

    public_ip: str
    group_id: str
    opened: bool


def describe_one(ec2: Any, instance_id: str) -> dict[str, Any]:
    reservations = ec2.describe_instances(InstanceIds=[instance_id])["Reservations"]
    instances = [i for r in reservations for i in r.get("Instances", [])]
    if not instances:
        raise ProviderError(f"EC2 does not know instance {instance_id}", code="InvalidInstanceID.NotFound")
    return dict(instances[0])


def public_address(instance: dict[str, Any]) -> str:
    """The machine's public IPv4 address; a machine without one is reached through Session Manager instead."""
    address = instance.get("PublicIpAddress")
    if not address:
        raise ProviderError(f"{instance.get('InstanceId')} has no public address: use `--via ssm` (Session "
                            "Manager) or `--via ssh` (ssh through it)", code="NoPublicAddress")
    return str(address)


def open_ssh(ec2: Any, instance_id: str, cidr: str) -> SshAccess:
    """Add the SSH group for `cidr` (a /32 or /128, providers.aws.rules.single_address_cidr) to the machine."""
    instance = describe_one(ec2, instance_id)
    address = public_address(instance)
    interfaces = sorted(instance.get("NetworkInterfaces") or [],
                        key=lambda n: (n.get("Attachment") or {}).get("DeviceIndex", 0))
    if not interfaces or not instance.get("VpcId"):
        raise ProviderError(f"{instance_id} has no network interface in a VPC to open SSH on", code="NoInterface")
    primary = interfaces[0]
    current = [g["GroupId"] for g in primary.get("Groups") or []]
    group_id = network.ensure_group(ec2, instance["VpcId"], network.ssh_group_name(cidr),
                                    f"gpuplan: SSH from {cidr} only", ssh_cidr=cidr)
    if group_id in current:
        return SshAccess(address, group_id, opened=False)
    ec2.modify_network_interface_attribute(NetworkInterfaceId=primary["NetworkInterfaceId"],
                                           Groups=[*current, group_id])
    return SshAccess(address, group_id, opened=True)
