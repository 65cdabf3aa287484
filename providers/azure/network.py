"""The run's resource group and network: one resource group per run, a VNet + subnet + NSG per region, a
public IP and a NIC per node.

Why a resource group per run (not one shared group): deleting a resource group deletes everything in it, in an
order Azure works out itself (https://learn.microsoft.com/azure/azure-resource-manager/management/delete-resource-group),
so teardown cannot leave a NIC, a disk or a public IP behind — not even one a crashed launch made half-way and
gpuplan never recorded. The group carries the run's tags, so reconcile finds a run's leftovers by listing tagged
groups (`resource_groups.list(filter="tagName eq ... and tagValue eq ...")`), and a run's resources can never be
confused with another's. Resource groups cost nothing.

The NSG: Azure's default rules already allow all traffic inside the virtual network (`AllowVnetInBound`,
priority 65000) — so the nodes of a run reach each other (torchrun's rendezvous and NCCL) — and deny all other
inbound (`DenyAllInBound`). https://learn.microsoft.com/azure/virtual-network/network-security-groups-overview#default-security-rules
gpuplan adds one rule only when ssh is asked for: TCP 22 from the user's own address (/32), never from anywhere.

Every create is a PUT of a fixed name: a retried launch (a crash, a relaunch) gets the same resource back instead
of a second one (ARM's PUT is an idempotent create-or-update).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from gpuplan.providers.azure.naming import (
    ADDRESS_SPACE,
    NSG,
    SUBNET,
    SUBNET_PREFIX,
    VNET,
    network_name,
    nic_name,
    public_ip_name,
)

SSH_RULE = "gpuplan-ssh-from-user"
SSH_PRIORITY = 1000


class ArmClients(Protocol):
    """What the network code needs from the provider's SDK clients (providers/azure/arm.py)."""

    @property
    def resource(self) -> Any: ...

    @property
    def network(self) -> Any: ...

    @property
    def subscription_id(self) -> str: ...


def ensure_resource_group(clients: ArmClients, name: str, region: str, tags: Mapping[str, str]) -> None:
    """Create (or update) the run's resource group with its tags (a synchronous PUT in ARM)."""
    clients.resource.resource_groups.create_or_update(name, {"location": region, "tags": dict(tags)})


def nsg_body(region: str, tags: Mapping[str, str], ssh_from: str | None) -> dict[str, Any]:
    rules: list[dict[str, Any]] = []
    if ssh_from:
        rules.append({"name": SSH_RULE, "properties": {
            "priority": SSH_PRIORITY, "direction": "Inbound", "access": "Allow", "protocol": "Tcp",
            "sourceAddressPrefix": f"{ssh_from}/32" if "/" not in ssh_from else ssh_from,
            "sourcePortRange": "*", "destinationAddressPrefix": "*", "destinationPortRange": "22"}})
    return {"location": region, "tags": dict(tags), "properties": {"securityRules": rules}}


def ensure_network(clients: ArmClients, group: str, region: str, tags: Mapping[str, str],
                   ssh_from: str | None) -> str:
    """The NSG and the VNet with its subnet in `region` (created or updated, waited for); returns the subnet id."""
    nsg_name = network_name(NSG, region)
    nsg = clients.network.network_security_groups.begin_create_or_update(
        group, nsg_name, nsg_body(region, tags, ssh_from)).result()
    vnet = network_name(VNET, region)
    body = {"location": region, "tags": dict(tags), "properties": {
        "addressSpace": {"addressPrefixes": [ADDRESS_SPACE]},
        "subnets": [{"name": SUBNET, "properties": {"addressPrefix": SUBNET_PREFIX,
                                                     "networkSecurityGroup": {"id": nsg.id}}}]}}
    clients.network.virtual_networks.begin_create_or_update(group, vnet, body).result()
    return (f"/subscriptions/{clients.subscription_id}/resourceGroups/{group}/providers/Microsoft.Network/"
            f"virtualNetworks/{vnet}/subnets/{SUBNET}")


@dataclass(frozen=True)
class NodeNic:
    """A node's NIC as ARM answered its create: its id, and the private address Azure gave it (None if absent)."""

    nic_id: str
    private_ip: str | None


def ensure_nic(clients: ArmClients, group: str, region: str, vm: str, subnet_id: str, tags: Mapping[str, str],
               *, public_ip: bool) -> NodeNic:
    """The node's NIC (with a Standard static public IP when asked: the VM's way out to pull its image and ship
    its outputs, and in for ssh), with its private address.

    The address is there as soon as the NIC is: with dynamic allocation "Azure assigns the next available
    unassigned or unreserved IP address in the subnet's address range" when the NIC is created, and it stays the
    NIC's until the NIC is deleted, moved to another subnet or switched to static
    (https://learn.microsoft.com/azure/virtual-network/ip-services/private-ip-addresses,
    https://learn.microsoft.com/training/modules/configure-virtual-networks/8-associate-private-ip-addresses).
    So a launch that makes every node's NIC before any VM knows every node's address before any boot script is
    rendered (providers/azure/lifecycle.py: GPUPLAN_NODE_IPS)."""
    ip_config: dict[str, Any] = {"subnet": {"id": subnet_id}, "privateIPAllocationMethod": "Dynamic"}
    if public_ip:
        # Basic public IPs are retired; Standard ones are static and closed to inbound traffic until an NSG opens
        # it. https://learn.microsoft.com/azure/virtual-network/ip-services/public-ip-addresses#sku
        ip = clients.network.public_ip_addresses.begin_create_or_update(group, public_ip_name(vm), {
            "location": region, "tags": dict(tags), "sku": {"name": "Standard"},
            "properties": {"publicIPAllocationMethod": "Static"}}).result()
        ip_config["publicIPAddress"] = {"id": ip.id}
    nic = clients.network.network_interfaces.begin_create_or_update(group, nic_name(vm), {
        "location": region, "tags": dict(tags),
        "properties": {"ipConfigurations": [{"name": "primary", "properties": ip_config}]}}).result()
    configs = list(nic.ip_configurations or [])
    return NodeNic(str(nic.id), configs[0].private_ip_address if configs else None)


def nic_addresses(clients: ArmClients, group: str, vm: str) -> tuple[str | None, str | None]:
    """(private, public) address of a node, when its NIC and public IP exist."""
    private = public = None
    try:
        nic = clients.network.network_interfaces.get(group, nic_name(vm))
        configs = list(nic.ip_configurations or [])
        if configs:
            private = configs[0].private_ip_address
    except Exception:
        return None, None
    try:
        public = clients.network.public_ip_addresses.get(group, public_ip_name(vm)).ip_address
    except Exception:
        public = None
    return private, public
