"""One node's VM: its ARM body, and what describe makes of a VM Azure reports.

The image: the marketplace **Ubuntu-HPC 22.04** image, `microsoft-dsvm:ubuntu-hpc:2204:latest`, rather than the Data
Science VM. Both come with NVIDIA's driver; what gpuplan's boot script needs beyond it is a container engine with
the NVIDIA runtime (the job runs in its image) and, for multi-node runs on ND-series, InfiniBand drivers and NCCL.
Ubuntu-HPC ships exactly that: "Nvidia GPU Driver, ... NCCL, ... Moby, NVIDIA-Docker", Mellanox OFED and HPC-X,
and it is the image Azure keeps validated on the ND/NC GPU sizes (https://github.com/Azure/azhpc-images, README
and ubuntu/ubuntu-22.x/ubuntu-22.04-hpc/README.md). The DSVM adds notebooks, conda environments and IDEs a
batch job never uses, and has no InfiniBand stack. It is a Gen2 image (the GPU sizes gpuplan offers are Gen2).

Spot: `priority: Spot` with `evictionPolicy: Delete` (an evicted VM and its disks are deleted, so nothing bills
after an eviction) and `billingProfile.maxPrice`: gpuplan's `spot_max_price` setting, else -1 — "the VM won't be
evicted for pricing reasons; the max price will be the current price, up to the price for standard VMs" — so a
small price rise never deletes a run's machine. https://learn.microsoft.com/azure/virtual-machines/spot-vms

Custom data: the boot script gpuplan renders, base64; cloud-init runs a custom data that starts with `#!` as a
script at first boot. Its decoded size is at most 65,535 bytes ("Custom data in OSProfile must be in Base64
encoding and with a maximum length of 87380 characters": https://learn.microsoft.com/azure/virtual-machines/custom-data;
the message: Azure/aks-engine#1663). The launch check refuses a bigger script before anything is recorded.

The OS disk and NIC are created with `deleteOption: Delete`, so deleting the VM (gpuplan, or the VM itself at its
end) deletes them too. https://learn.microsoft.com/azure/virtual-machines/delete
"""

from __future__ import annotations

import base64
import datetime as dt
from collections.abc import Mapping
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from gpuplan.providers.azure.naming import TAG_NODE_RANK, TAG_PRICE, TAG_SPOT
from gpuplan.providers.base import TAG_RUN_ID, Instance, InstanceState

DEFAULT_IMAGE = "microsoft-dsvm:ubuntu-hpc:2204:latest"
ADMIN_USER = "gpuplan"
MAX_CUSTOM_DATA_BYTES = 65535
MAX_CUSTOM_DATA_BASE64 = 87380
DEFAULT_OS_DISK_GB = 256


@dataclass(frozen=True)
class VmSpec:
    """What one VM is made of, besides the run's tags."""

    name: str
    region: str
    zone: str | None
    size: str
    nic_id: str
    boot_script: str
    ssh_public_key: str
    spot: bool
    max_price: Decimal | None = None
    image: str = DEFAULT_IMAGE
    identity_id: str | None = None
    os_disk_gb: int = DEFAULT_OS_DISK_GB


def image_reference(urn: str) -> dict[str, str]:
    """`publisher:offer:sku:version` (az's URN form) -> an imageReference; a full resource id is used as `id`."""
    if urn.startswith("/"):
        return {"id": urn}
    parts = urn.split(":")
    if len(parts) != 4 or not all(parts):
        raise ValueError(f"azure image {urn!r} is not publisher:offer:sku:version or an image resource id")
    publisher, offer, sku, version = parts
    return {"publisher": publisher, "offer": offer, "sku": sku, "version": version}


def custom_data(script: str) -> str:
    return base64.b64encode(script.encode()).decode()


def vm_body(spec: VmSpec, tags: Mapping[str, str]) -> dict[str, Any]:
    """The VM's ARM body (the REST shape the SDK serialises as it is)."""
    properties: dict[str, Any] = {
        "hardwareProfile": {"vmSize": spec.size},
        "storageProfile": {
            "imageReference": image_reference(spec.image),
            "osDisk": {"createOption": "FromImage", "deleteOption": "Delete", "diskSizeGB": spec.os_disk_gb,
                       "managedDisk": {"storageAccountType": "Premium_LRS"}}},
        "osProfile": {
            "computerName": spec.name, "adminUsername": ADMIN_USER, "customData": custom_data(spec.boot_script),
            "linuxConfiguration": {"disablePasswordAuthentication": True, "ssh": {"publicKeys": [
                {"path": f"/home/{ADMIN_USER}/.ssh/authorized_keys", "keyData": spec.ssh_public_key}]}}},
        "networkProfile": {"networkInterfaces": [
            {"id": spec.nic_id, "properties": {"primary": True, "deleteOption": "Delete"}}]},
    }
    if spec.spot:
        properties["priority"] = "Spot"
        properties["evictionPolicy"] = "Delete"
        properties["billingProfile"] = {"maxPrice": float(spec.max_price) if spec.max_price else -1}
    else:
        properties["priority"] = "Regular"
    body: dict[str, Any] = {"location": spec.region, "tags": dict(tags), "properties": properties}
    if spec.zone:
        body["zones"] = [spec.zone]
    if spec.identity_id:
        body["identity"] = {"type": "UserAssigned", "userAssignedIdentities": {spec.identity_id: {}}}
    return body


# instanceView status codes -> gpuplan's states.
# https://learn.microsoft.com/azure/virtual-machines/states-billing: "Stopped" is still allocated and BILLED (a
# shutdown from inside the VM leaves it so); only "Deallocated" stops the compute bill.
_POWER: dict[str, str] = {
    "PowerState/starting": InstanceState.PENDING,
    "PowerState/running": InstanceState.RUNNING,
    "PowerState/stopping": InstanceState.STOPPING,
    "PowerState/deallocating": InstanceState.STOPPING,
    "PowerState/stopped": InstanceState.TERMINATED,
    "PowerState/deallocated": InstanceState.TERMINATED,
}


def power_state(vm: Any) -> str | None:
    """The VM's `PowerState/...` code from its instance view, if it has one."""
    view = getattr(vm, "instance_view", None)
    for status in (getattr(view, "statuses", None) or []):
        code = str(getattr(status, "code", "") or "")
        if code.startswith("PowerState/"):
            return code
    return None


def to_instance(vm: Any, provider: str, group: str) -> Instance:
    """gpuplan's view of an SDK VirtualMachine (read with `expand="instanceView"` for its power state)."""
    tags = dict(vm.tags or {})
    provisioning = str(getattr(vm, "provisioning_state", "") or "")
    power = power_state(vm)
    if provisioning in ("Creating", "Updating") and power is None:
        state = InstanceState.PENDING
    elif provisioning == "Deleting":
        state = InstanceState.STOPPING
    elif provisioning == "Failed" and power is None:
        state = InstanceState.FAILED
    else:
        state = _POWER.get(power or "", InstanceState.PENDING if power is None else InstanceState.UNKNOWN)
    zones = list(getattr(vm, "zones", None) or [])
    price = tags.get(TAG_PRICE)
    created = getattr(vm, "time_created", None)
    if isinstance(created, dt.datetime) and created.tzinfo is None:
        created = created.replace(tzinfo=dt.timezone.utc)
    rank = tags.get(TAG_NODE_RANK, "0")
    return Instance(
        provider=provider, instance_id=f"{group}/{vm.name}", state=state, run_id=tags.get(TAG_RUN_ID),
        cloud=provider, region=vm.location, zone=f"{vm.location}-{zones[0]}" if zones else None,
        instance_type=vm.hardware_profile.vm_size if vm.hardware_profile else None,
        spot=str(getattr(vm, "priority", "") or "") == "Spot" or tags.get(TAG_SPOT) == "true",
        node_rank=int(rank) if rank.isdigit() else 0,
        price_per_hour=Decimal(price) if price else None,
        launched_at=created if isinstance(created, dt.datetime) else None,
        created_at=created if isinstance(created, dt.datetime) else None,
        state_reason=power or provisioning or None, tags=tags)


def split_instance_id(instance_id: str) -> tuple[str, str]:
    """gpuplan's Azure instance id `resource-group/vm-name` -> (group, name)."""
    group, sep, name = instance_id.partition("/")
    if not sep or not group or not name or "/" in name:
        from gpuplan.providers.base import ProviderError

        raise ProviderError(f"not an Azure instance id (resource-group/vm-name): {instance_id!r}",
                            code="BadInstanceId")
    return group, name
