"""Launch, describe, terminate and list a run's Azure VMs (AzureProvider's lifecycle, through the Azure SDK).

- Launch: the run's resource group (tagged), the region's NSG and VNet, then every node's NIC (and public IP),
  then the VMs, each a PUT of a fixed name awaited through ARM's long-running operation (azure-core polls the
  Azure-AsyncOperation URL: https://learn.microsoft.com/azure/azure-resource-manager/management/async-operations).
  The NICs come first because a NIC has its private address from its create on: every node's boot script gets
  every node's address in rank order (GPUPLAN_NODE_IPS, rank 0's as MASTER_ADDR) before any VM boots.
  All or nothing: a node that fails deletes the VMs this attempt started, so failover moves on clean.
  Idempotent per run: the VMs tagged with the run id are looked up first and returned if every rank is there.
- Describe: a VM read with its instance view. A VM that is *stopped* is still allocated and billed
  (https://learn.microsoft.com/azure/virtual-machines/states-billing): that is what a guest shutdown leaves, so
  gpuplan deletes a stopped or deallocated VM it made, as the GCP provider does with a stopped GCE VM.
  A VM Azure no longer knows is TERMINATED, or PREEMPTED for a Spot VM whose run's group says the machine got the
  eviction notice (providers/azure/boot.py writes it) — eviction policy Delete removes the VM itself.
- Terminate: delete the VMs (their NIC and disk go with them: deleteOption Delete), then the run's whole resource
  group once none of its VMs is left — which deletes the public IPs, VNet and NSG, and anything a crash left.
- list_tagged: the tagged resource groups (`tagName eq 'gpuplan:created-by'`), then the VMs inside each.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from decimal import Decimal
from typing import Any

from gpuplan.providers.azure.arm import ArmSession
from gpuplan.providers.azure.compute import VmSpec, split_instance_id, to_instance, vm_body
from gpuplan.providers.azure.errors import from_exception
from gpuplan.providers.azure.naming import (
    TAG_NODE_RANK,
    TAG_PRICE,
    TAG_SPOT,
    azure_tags,
    quota_family,
    resource_group_name,
    vm_name,
)
from gpuplan.providers.azure.network import NodeNic, ensure_network, ensure_nic, ensure_resource_group
from gpuplan.providers.azure.secrets import KeyVault
from gpuplan.providers.base import (
    CREATED_BY,
    TAG_CREATED_BY,
    TAG_RUN_ID,
    Instance,
    InstanceState,
    LaunchRequest,
    ProviderError,
)

log = logging.getLogger(__name__)
# The tag the VM puts on its run's resource group when it got the Spot eviction notice (providers/azure/boot.py).
TAG_EVICTED_PREFIX = "gpuplan:evicted-"
TAG_EXIT_PREFIX = "gpuplan:exit-code-"
# The run's storage folder (`az://ACCOUNT/CONTAINER/PREFIX/<run id>`), on its resource group: where
# providers/azure/outputs.py fetches the shipped outputs from, in any later process.
TAG_STORAGE = "gpuplan:storage"


def _not_found(exc: BaseException) -> bool:
    return type(exc).__name__ == "ResourceNotFoundError" or getattr(exc, "status_code", None) == 404


class AzureMachines:
    """The lifecycle on one subscription; AzureProvider delegates launch/describe/terminate/list_tagged here."""

    def __init__(self, session: ArmSession, *, provider: str, image: str, identity_id: str | None,
                 ssh_key: Callable[[], str], ssh_from: Callable[[], str | None], public_ip: bool,
                 spot_max_price: Decimal | None, os_disk_gb: int, vault: KeyVault | None = None) -> None:
        self.session = session
        self.provider = provider
        self.image = image
        self.identity_id = identity_id
        self.ssh_key = ssh_key
        self.ssh_from = ssh_from
        self.public_ip = public_ip
        self.spot_max_price = spot_max_price
        self.os_disk_gb = os_disk_gb
        self.vault = vault
        self.group_wait_seconds = 900.0  # deleting a resource group takes minutes
        self.group_poll_seconds = 10.0
        self._storage_of: dict[str, str] = {}

    # ---- launch -------------------------------------------------------------------------------------------

    def launch(self, request: LaunchRequest) -> list[Instance]:
        existing = [i for i in self.list_tagged(request.run_id) if i.state not in InstanceState.GONE]
        have = {i.node_rank for i in existing}
        missing = [rank for rank in range(request.nodes) if rank not in have]
        if not missing:
            for inst in existing:
                inst.price_per_hour = request.price_per_hour
            return sorted(existing, key=lambda i: i.node_rank)
        region = (existing[0].region if existing else None) or request.region
        if not region:
            raise ProviderError("azure: a launch needs a region", code="NoRegion")
        zone = request.zones[0] if request.zones else None
        zone_number = zone[len(region) + 1:] if zone and zone.startswith(region + "-") else None
        size = request.instance_type
        if not size:
            raise ProviderError("azure: a launch needs a VM size (instance_type)", code="NoSize")
        group = resource_group_name(request.run_id)
        tags = azure_tags(request.tags(), request.labels)
        generation = int(request.options.get("generation") or 0)
        started: list[str] = []
        try:
            storage = str(request.options.get("run_storage_url") or "")
            self._ensure_group(group, region, {**tags, TAG_STORAGE: storage} if storage else tags)
            if request.secrets:  # before any VM: its boot script reads them
                if self.vault is None:
                    raise ProviderError("azure: a run with secrets needs [providers.azure] key_vault",
                                        code="NoKeyVault")
                self.vault.put(request.run_id, request.secrets, tags)
            subnet = ensure_network(self.session, group, region, tags, self.ssh_from())
            # Every node's NIC first: their private addresses, in rank order, go into every node's boot script
            # (GPUPLAN_NODE_IPS / SKYPILOT_NODE_IPS, and rank 0's is MASTER_ADDR) before any VM boots.
            names = {i.node_rank: split_instance_id(i.instance_id)[1] for i in existing}
            nics: dict[int, NodeNic] = {}
            for rank in missing:
                names[rank] = vm_name(request.run_id, rank, generation)
                nics[rank] = ensure_nic(self.session, group, region, names[rank], subnet,
                                        self._node_tags(request, tags, rank), public_ip=self.public_ip)
            addrs = self._node_addresses(group, names, nics, request.nodes)
            for rank in missing:
                name = names[rank]
                node_tags = self._node_tags(request, tags, rank)
                # Rank 0 too gets its own NIC's address as MASTER_ADDR: `hostname -I` on the machine may list
                # another interface first (docker0, InfiniBand's ib0 on the HPC image).
                script = self._script(request, rank, addrs[0] if request.nodes > 1 else None,
                                      addrs if request.nodes > 1 else [])
                spec = VmSpec(name=name, region=region, zone=zone_number, size=size, nic_id=nics[rank].nic_id,
                              boot_script=script, ssh_public_key=self.ssh_key(), spot=request.spot,
                              max_price=self.spot_max_price, image=self.image, identity_id=self.identity_id,
                              os_disk_gb=self.os_disk_gb)
                poller = self.session.compute.virtual_machines.begin_create_or_update(
                    group, name, vm_body(spec, node_tags))
                started.append(name)
                poller.result()
        except Exception as exc:
            error = from_exception(exc, region=region, zone=zone, instance_type=size, family=quota_family(size),
                                   spot=request.spot)
            self._delete_vms(group, started)
            if not existing:
                self._delete_group_if_empty(group)
                if request.secrets and self.vault is not None:
                    self.vault.delete_run(request.run_id)
            raise error from exc
        instances = [*existing, *self.describe([f"{group}/{name}" for name in started])]
        for inst in instances:
            inst.price_per_hour = request.price_per_hour
        return sorted(instances, key=lambda i: i.node_rank)

    def _ensure_group(self, group: str, region: str, tags: dict[str, str]) -> None:
        """Create the run's group; if the previous generation's group is still being deleted (409
        ResourceGroupBeingDeleted), wait until it is gone and create it again."""
        import time

        deadline = time.monotonic() + self.group_wait_seconds
        while True:
            try:
                ensure_resource_group(self.session, group, region, tags)
                return
            except Exception as exc:
                if getattr(getattr(exc, "error", None), "code", None) != "ResourceGroupBeingDeleted" \
                        or time.monotonic() > deadline:
                    raise
                log.info("resource group %s is still being deleted; waiting", group)
                time.sleep(self.group_poll_seconds)

    @staticmethod
    def _node_tags(request: LaunchRequest, tags: dict[str, str], rank: int) -> dict[str, str]:
        node_tags = {**tags, TAG_NODE_RANK: str(rank), TAG_SPOT: str(request.spot).lower()}
        if request.price_per_hour is not None:
            node_tags[TAG_PRICE] = str(request.price_per_hour)
        return node_tags

    def _script(self, request: LaunchRequest, rank: int, master: str | None, node_addrs: Sequence[str]) -> str:
        per_node = request.options.get("boot_script_for")
        if callable(per_node):  # orchestration's renderer (gpuplan.launching.placements.boot_script_renderer)
            return str(per_node(rank, master, node_addrs=node_addrs))
        return request.boot_script or "#!/bin/bash\n"

    def _node_addresses(self, group: str, names: dict[int, str], nics: dict[int, NodeNic],
                        nodes: int) -> list[str]:
        """Every node's private address, rank 0 first: from the NICs this launch made (their create answers), and
        for the nodes already running, read back from their NICs.

        A NIC without an address (never seen: Azure assigns one when the NIC is created) is listed by its VM's
        name, which Azure-provided DNS resolves for every VM of the same virtual network ("Azure-provided name
        resolution ... between VMs that live in the same virtual network ... by host name": the VM's name is its
        host name, https://learn.microsoft.com/azure/virtual-network/virtual-networks-name-resolution-for-vms-and-role-instances);
        the boot script resolves names at boot (gpuplan.jobs.boot_node_ips)."""
        from gpuplan.providers.azure.network import nic_addresses

        out = []
        for rank in range(nodes):
            name = names.get(rank) or ""
            address = nics[rank].private_ip if rank in nics else nic_addresses(self.session, group, name)[0]
            out.append(address or name)
        return out

    # ---- describe ------------------------------------------------------------------------------------------

    def describe(self, instance_ids: Sequence[str]) -> list[Instance]:
        out: list[Instance] = []
        group_tags: dict[str, dict[str, str]] = {}
        for instance_id in instance_ids:
            group, name = split_instance_id(instance_id)
            try:
                vm = self.session.compute.virtual_machines.get(group, name, expand="instanceView")
            except Exception as exc:
                if not _not_found(exc):
                    raise from_exception(exc, region="") from exc
                if group not in group_tags:
                    group_tags[group] = self._group_tags(group)
                gone = self._gone(instance_id, group_tags[group])
                if gone.state == InstanceState.TERMINATED and group_tags[group]:
                    self._release_group(group)
                out.append(gone)
                continue
            inst = to_instance(vm, self.provider, group)
            if inst.state == InstanceState.TERMINATED and inst.tags.get(TAG_CREATED_BY) == CREATED_BY:
                # Stopped (still billed) or deallocated by its own shutdown: delete it, as the job is over.
                self._delete_nowait(group, name)
                inst.state_reason = f"{inst.state_reason}; deleted by gpuplan"
            out.append(inst)
        return out

    def _gone(self, instance_id: str, tags: dict[str, str]) -> Instance:
        _, name = split_instance_id(instance_id)
        rank = name.rsplit("-", 1)[-1]
        evicted = tags.get(f"{TAG_EVICTED_PREFIX}{rank}") == "true"
        code = tags.get(f"{TAG_EXIT_PREFIX}{rank}", "")
        inst = Instance(provider=self.provider, instance_id=instance_id, cloud=self.provider,
                        state=InstanceState.PREEMPTED if evicted else InstanceState.TERMINATED,
                        run_id=tags.get(TAG_RUN_ID), node_rank=int(rank) if rank.isdigit() else 0,
                        state_reason="evicted (spot)" if evicted else "deleted")
        if code.lstrip("-").isdigit() and not evicted:
            inst.exit_code = int(code)
        return inst

    def _release_group(self, group: str) -> None:
        """The VM ended and deleted itself (its NIC and disk went with it): once no VM is left in the run's group,
        delete the group, so its public IPs stop billing. Not waited for. An evicted VM's group is kept for the
        relaunch (`gpuplan stop` and terminate delete it)."""
        try:
            if not list(self.session.compute.virtual_machines.list(group)):
                self.session.resource.resource_groups.begin_delete(group)
        except Exception as exc:  # reconcile and stop try again
            if not _not_found(exc):
                log.warning("could not delete the resource group %s of an ended run: %s", group, exc)

    def run_storage(self, run_id: str) -> str | None:
        """The run's storage folder, from its resource group's tag (remembered once read)."""
        if run_id not in self._storage_of:
            found = self._group_tags(resource_group_name(run_id)).get(TAG_STORAGE)
            if not found:
                return None  # not remembered: the group may not carry it yet
            self._storage_of[run_id] = found
        return self._storage_of[run_id]

    def _group_tags(self, group: str) -> dict[str, str]:
        try:
            return dict(self.session.resource.resource_groups.get(group).tags or {})
        except Exception:
            return {}

    # ---- list / terminate ----------------------------------------------------------------------------------

    def run_groups(self, run_id: str | None) -> list[Any]:
        """The resource groups gpuplan made (of one run), by tag."""
        if run_id:
            flt = f"tagName eq '{TAG_RUN_ID}' and tagValue eq '{run_id.replace(chr(39), chr(39) * 2)}'"
        else:
            flt = f"tagName eq '{TAG_CREATED_BY}' and tagValue eq '{CREATED_BY}'"
        try:
            return list(self.session.resource.resource_groups.list(filter=flt))
        except Exception as exc:
            raise from_exception(exc, region="") from exc

    def list_tagged(self, run_id: str | None = None, *, include_ended: bool = False) -> list[Instance]:
        found: list[Instance] = []
        for group in self.run_groups(run_id):
            if (group.tags or {}).get(TAG_CREATED_BY) != CREATED_BY:
                continue
            try:
                vms = list(self.session.compute.virtual_machines.list(group.name, expand="instanceView"))
            except Exception as exc:
                if _not_found(exc):
                    continue  # deleted between the two calls
                raise from_exception(exc, region=group.location) from exc
            for vm in vms:
                if (vm.tags or {}).get(TAG_CREATED_BY) != CREATED_BY:
                    continue
                inst = to_instance(vm, self.provider, group.name)
                if include_ended or inst.state not in InstanceState.GONE:
                    found.append(inst)
        return sorted(found, key=lambda i: (i.run_id or "", i.node_rank, i.instance_id))

    def terminate(self, instance_ids: Sequence[str]) -> None:
        by_group: dict[str, list[str]] = {}
        for instance_id in instance_ids:
            group, name = split_instance_id(instance_id)
            by_group.setdefault(group, []).append(name)
        for group, names in by_group.items():
            run_id = self._group_tags(group).get(TAG_RUN_ID)
            self._delete_vms(group, names, strict=True)
            if self._delete_group_if_empty(group) and run_id and self.vault is not None:
                self.vault.delete_run(run_id)  # no VM of the run is left to read them

    def _delete_vms(self, group: str, names: Sequence[str], *, strict: bool = False) -> None:
        pollers = []
        for name in names:
            try:
                pollers.append(self.session.compute.virtual_machines.begin_delete(group, name))
            except Exception as exc:
                if _not_found(exc):
                    continue
                if strict:
                    raise from_exception(exc, region="") from exc
                log.warning("could not delete VM %s/%s: %s (reconcile will find it)", group, name, exc)
        for poller in pollers:
            try:
                poller.result()
            except Exception as exc:
                if _not_found(exc):
                    continue
                if strict:
                    raise from_exception(exc, region="") from exc
                log.warning("deleting a VM in %s failed: %s (reconcile will find it)", group, exc)

    def _delete_nowait(self, group: str, name: str) -> None:
        try:
            self.session.compute.virtual_machines.begin_delete(group, name)
        except Exception as exc:
            if not _not_found(exc):
                log.warning("could not delete the stopped VM %s/%s: %s", group, name, exc)

    def _delete_group_if_empty(self, group: str) -> bool:
        """Delete the run's resource group (and with it the VNet, NSG, public IPs, anything left) once it holds no
        VM: one call that cannot forget a resource. A group another process still launches into keeps its VMs."""
        try:
            if list(self.session.compute.virtual_machines.list(group)):
                return False
            self.session.resource.resource_groups.begin_delete(group).result()
        except Exception as exc:
            if _not_found(exc):
                return True
            raise from_exception(exc, region="") from exc
        return True
