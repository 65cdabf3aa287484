"""The fake ARM's state: resource groups, resources, long-running operations, and the faults a test injects.

Mechanics only (the documented rules a real Azure keeps are strict.py's): resources by lower-cased id, each PUT
of a compute or network resource answered 201 with an `Azure-AsyncOperation` URL that reports InProgress for
`polls` GETs and then the outcome, a resource group DELETE answered 202 with a `Location` URL (Azure's two LRO
patterns: https://learn.microsoft.com/azure/azure-resource-manager/management/async-operations).
"""

from __future__ import annotations

import copy
import datetime as dt
import itertools
import threading
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

Json = dict[str, Any]


class ArmError(Exception):
    """An ARM error answer: HTTP status and `{"error": {"code", "message", "target"}}`."""

    def __init__(self, status: int, code: str, message: str, target: str | None = None) -> None:
        super().__init__(f"{status} {code}: {message}")
        self.status = status
        self.code = code
        self.message = message
        self.target = target

    def body(self) -> Json:
        error: Json = {"code": self.code, "message": self.message}
        if self.target:
            error["target"] = self.target
        return {"error": error}


@dataclass
class Operation:
    """A long-running operation: InProgress for `polls` status reads, then `finish()` decides its outcome."""

    op_id: str
    finish: Callable[[], ArmError | None]
    polls: int
    status: str = "InProgress"
    error: ArmError | None = None

    def poll(self) -> Json:
        if self.status == "InProgress":
            if self.polls > 0:
                self.polls -= 1
            else:
                self.error = self.finish()
                self.status = "Failed" if self.error else "Succeeded"
        body: Json = {"name": self.op_id, "status": self.status,
                      "startTime": "2026-01-01T00:00:00Z"}
        if self.error is not None:
            body["error"] = self.error.body()["error"]
        return body


@dataclass
class Fault:
    """A VM create that fails: `code` at PUT time (sync) or as the operation's failed status (async)."""

    code: str
    message: str
    region: str | None = None
    size: str | None = None
    zone: str | None = None
    sync: bool = False
    times: int = 1


@dataclass
class ArmState:
    subscription: str = "00000000-0000-0000-0000-000000000001"
    polls: int = 1  # InProgress answers before an operation finishes: the client must really poll
    groups: dict[str, Json] = field(default_factory=dict)  # lower-cased name -> group
    resources: dict[str, Json] = field(default_factory=dict)  # lower-cased id -> resource
    operations: dict[str, Operation] = field(default_factory=dict)
    faults: list[Fault] = field(default_factory=list)
    requests: list[tuple[str, str]] = field(default_factory=list)
    secrets: dict[str, Json] = field(default_factory=dict)  # Key Vault: lower-cased name -> {value, tags, ...}
    deleted_secrets: set[str] = field(default_factory=set)  # soft-deleted, not yet purged
    lock: threading.RLock = field(default_factory=threading.RLock)
    _ips: itertools.count = field(default_factory=lambda: itertools.count(4))

    # ---- test API -----------------------------------------------------------------------------------------

    def fail_vm_create(self, code: str, message: str = "", *, region: str | None = None, size: str | None = None,
                       zone: str | None = None, sync: bool = False, times: int = 1) -> None:
        self.faults.append(Fault(code, message or _MESSAGES.get(code, code), region, size, zone, sync, times))

    def take_fault(self, region: str, size: str, zone: str | None, *, sync: bool) -> Fault | None:
        for fault in self.faults:
            if fault.sync == sync and fault.times > 0 and (fault.region in (None, region)) \
                    and (fault.size in (None, size)) and (fault.zone in (None, zone)):
                fault.times -= 1
                return fault
        return None

    def vms(self) -> list[Json]:
        return [r for r in self.resources.values() if r["type"] == "Microsoft.Compute/virtualMachines"]

    def of_type(self, kind: str) -> list[Json]:
        return [r for r in self.resources.values() if r["type"].lower() == kind.lower()]

    def leftovers(self) -> list[str]:
        """Every resource and resource group still there (a teardown test wants [])."""
        return sorted([g["id"] for g in self.groups.values()] + [r["id"] for r in self.resources.values()])

    def evict(self, group: str, name: str) -> None:
        """Azure evicts a Spot VM with eviction policy Delete: the VM goes, with the disk/NIC marked Delete."""
        vm = self.resources[self.rid(group, "Microsoft.Compute/virtualMachines", name).lower()]
        assert vm["properties"].get("priority") == "Spot", "only Spot VMs are evicted"
        self.delete_vm(vm)

    def settle(self) -> None:
        """Azure finishes every pending operation (a client that does not poll still gets its delete done)."""
        for op in list(self.operations.values()):
            if op.status == "InProgress":
                op.polls = 0
                op.poll()

    def stop_from_guest(self, group: str, name: str) -> None:
        """A `shutdown -h now` inside the VM: stopped, still allocated (and billed)."""
        vm = self.resources[self.rid(group, "Microsoft.Compute/virtualMachines", name).lower()]
        vm["_power"] = "PowerState/stopped"

    # ---- mechanics ----------------------------------------------------------------------------------------

    def rid(self, group: str, kind: str, name: str) -> str:
        return f"/subscriptions/{self.subscription}/resourceGroups/{group}/providers/{kind}/{name}"

    def new_operation(self, finish: Callable[[], ArmError | None]) -> Operation:
        op = Operation(op_id=str(uuid.uuid4()), finish=finish, polls=self.polls)
        self.operations[op.op_id] = op
        return op

    def next_private_ip(self) -> str:
        n = next(self._ips)
        return f"10.64.{n // 256}.{n % 256}"

    def delete_vm(self, vm: Json) -> None:
        """The VM goes; its OS disk and NICs too where their deleteOption says Delete (else they stay, detached)."""
        self.resources.pop(vm["id"].lower(), None)
        props = vm["properties"]
        disk = props["storageProfile"]["osDisk"]
        disk_id = disk.get("managedDisk", {}).get("id", "").lower()
        if disk.get("deleteOption") == "Delete":
            self.resources.pop(disk_id, None)
        elif disk_id in self.resources:
            self.resources[disk_id]["properties"].pop("managedBy", None)
        for ref in props["networkProfile"].get("networkInterfaces", []):
            nic = self.resources.get(ref["id"].lower())
            if nic is None:
                continue
            nic["properties"].pop("virtualMachine", None)
            if (ref.get("properties") or {}).get("deleteOption") == "Delete":
                self.resources.pop(ref["id"].lower(), None)

    def public(self, resource: Json, *, expand: str | None = None) -> Json:
        """The resource as GET answers it: no private fields (`_...`), and never the VM's customData (Azure does
        not return it: https://learn.microsoft.com/azure/virtual-machines/custom-data)."""
        out = {k: copy.deepcopy(v) for k, v in resource.items() if not k.startswith("_")}
        if out["type"] == "Microsoft.Compute/virtualMachines":
            out["properties"].get("osProfile", {}).pop("customData", None)
            if expand and expand.lower() == "instanceview":
                out["properties"]["instanceView"] = {"statuses": [
                    {"code": f"ProvisioningState/{out['properties']['provisioningState'].lower()}"},
                    *([{"code": resource["_power"]}] if resource.get("_power") else [])]}
        return out


def now_iso() -> str:
    return dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


# Messages Azure gives for the capacity codes (see strict.py for the sources).
_MESSAGES = {
    "AllocationFailed": "Allocation failed. We do not have sufficient capacity for the requested VM size in this "
                        "region. Read more about improving likelihood of allocation success at "
                        "http://aka.ms/allocation-guidance",
    "ZonalAllocationFailed": "Allocation failed. We do not have sufficient capacity for the requested VM size in "
                             "this zone. Read more about improving likelihood of allocation success at "
                             "http://aka.ms/allocation-guidance",
    "SkuNotAvailable": "The requested VM size for resource 'Following SKUs have failed for Capacity Restrictions: "
                       "{size}' is currently not available in location '{region}'. Please try another size or "
                       "deploy to a different location or different zone. See https://aka.ms/azureskunotavailable "
                       "for details.",
}
