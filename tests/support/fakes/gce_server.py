"""A small fake of the Compute Engine REST API (v1) on 127.0.0.1, for the real google-cloud-compute clients.

No GCE emulator exists, so the tests run the real `google.cloud.compute_v1` clients (REST transport) against this
werkzeug app, served from a thread of the test process on a free port. It answers what gpuplan uses:
instances insert/get/list/aggregatedList/delete, zoneOperations get/wait/list, zones, machineTypes and
acceleratorTypes, and it keeps the real API's rules that matter to gpuplan:

- `requestId` idempotency: the same requestId in the same zone returns the first operation, no second VM;
  a VM name that exists already is a 409 `alreadyExists`;
- validation as GCE does it: VM names, machine and accelerator types offered by the zone,
  no attached GPUs on accelerator-optimised types, GPUs need `onHostMaintenance=TERMINATE`, spot needs
  `automaticRestart=false`, `maxRunDuration` needs an `instanceTerminationAction`;
- operations start RUNNING and finish on `wait` (or after `polls_to_done` gets), so a client must really wait;
- list filters of the form `(labels.k = "v") (status != TERMINATED)`;
- images.getFromFamily answers an image for any (project, family): lenient on purpose.

Documented rules the fake itself does not keep (labels, image families that exist, Hyperdisk-only boot disks,
Spot/Flex-only shapes) are the strict layer's, tests/support/strict_gce.py, which the `gce` fixture puts in front.

Fault injection for tests: `fail_insert(zone, code)` makes the next insert(s) in a zone finish with an operation
error (ZONE_RESOURCE_POOL_EXHAUSTED, QUOTA_EXCEEDED, ...), `fail_http(zone, status, reason)` answers an insert with
an HTTP error, and `preempt(zone, name)` preempts a spot VM (deleted or stopped as its termination action says,
with a `compute.instances.preempted` system operation, as GCE records it).
"""

from __future__ import annotations

import datetime as dt
import itertools
import json
import re
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from werkzeug.exceptions import HTTPException
from werkzeug.routing import Map, Rule
from werkzeug.wrappers import Request, Response

from support.fakes.gce_errors import ApiError
from support.fakes.gce_filter import parse_filter
from support.fakes.gce_networks import network_call
from support.fakes.wsgi import serve_wsgi

BASE = "https://www.googleapis.com/compute/v1"
NAME_RE = re.compile(r"^[a-z]([-a-z0-9]{0,61}[a-z0-9])?$")

# zone -> accelerator types offered there (a subset of the real map, enough for failover tests).
DEFAULT_ZONES: dict[str, tuple[str, ...]] = {
    "us-central1-a": ("nvidia-tesla-t4", "nvidia-tesla-v100", "nvidia-tesla-a100", "nvidia-l4"),
    "us-central1-b": ("nvidia-tesla-t4", "nvidia-tesla-v100", "nvidia-tesla-a100", "nvidia-l4", "nvidia-h100-80gb"),
    "us-central1-c": ("nvidia-tesla-t4", "nvidia-tesla-a100", "nvidia-l4", "nvidia-a100-80gb", "nvidia-h100-80gb",
                      "nvidia-h200-141gb", "nvidia-b200"),
    "us-central1-f": ("nvidia-tesla-t4", "nvidia-tesla-v100", "nvidia-tesla-a100"),
    "us-east1-b": ("nvidia-tesla-t4", "nvidia-l4"),
    "us-east1-c": ("nvidia-tesla-t4", "nvidia-tesla-v100", "nvidia-l4"),
    "us-east1-d": ("nvidia-tesla-t4", "nvidia-l4"),
    "us-west1-a": ("nvidia-tesla-t4", "nvidia-tesla-v100", "nvidia-l4", "nvidia-h100-80gb", "nvidia-h100-mega-80gb"),
    "us-west1-b": ("nvidia-tesla-t4", "nvidia-tesla-v100", "nvidia-tesla-a100", "nvidia-l4"),
    "europe-west4-a": ("nvidia-tesla-t4", "nvidia-tesla-v100", "nvidia-tesla-a100", "nvidia-l4",
                       "nvidia-h100-80gb"),
    "europe-west4-b": ("nvidia-tesla-t4", "nvidia-tesla-v100", "nvidia-tesla-a100", "nvidia-l4"),
}

# machine type -> (vCPUs, memory MB, fixed accelerator type or None, fixed count)
MACHINE_TYPES: dict[str, tuple[int, int, str | None, int]] = {
    **{f"n1-standard-{n}": (n, n * 3840, None, 0) for n in (1, 2, 4, 8, 16, 32, 64, 96)},
    **{f"a2-highgpu-{g}g": (12 * g, 85 * 1024 * g, "nvidia-tesla-a100", g) for g in (1, 2, 4, 8)},
    "a2-megagpu-16g": (96, 1360 * 1024, "nvidia-tesla-a100", 16),
    **{f"a2-ultragpu-{g}g": (12 * g, 170 * 1024 * g, "nvidia-a100-80gb", g) for g in (1, 2, 4, 8)},
    **{f"a3-highgpu-{g}g": (26 * g, 234 * 1024 * g, "nvidia-h100-80gb", g) for g in (1, 2, 4, 8)},
    "a3-megagpu-8g": (208, 1872 * 1024, "nvidia-h100-mega-80gb", 8),
    "a3-ultragpu-8g": (224, 2952 * 1024, "nvidia-h200-141gb", 8),
    "a4-highgpu-8g": (224, 3968 * 1024, "nvidia-b200", 8),
    "g2-standard-4": (4, 16 * 1024, "nvidia-l4", 1),
    "g2-standard-8": (8, 32 * 1024, "nvidia-l4", 1),
    "g2-standard-12": (12, 48 * 1024, "nvidia-l4", 1),
    "g2-standard-16": (16, 64 * 1024, "nvidia-l4", 1),
    "g2-standard-24": (24, 96 * 1024, "nvidia-l4", 2),
    "g2-standard-32": (32, 128 * 1024, "nvidia-l4", 1),
    "g2-standard-48": (48, 192 * 1024, "nvidia-l4", 4),
    "g2-standard-96": (96, 384 * 1024, "nvidia-l4", 8),
}


@dataclass
class InsertFailure:
    """What the next insert(s) in a zone do: an operation error (GCE's way) or an HTTP error."""

    code: str
    message: str
    http_status: int = 0  # 0: the insert is accepted and its operation fails; else the HTTP call fails
    times: int | None = 1  # None: every insert until cleared
    skip: int = 0  # let this many inserts through first (e.g. fail only the second node of a run)
    after_create: bool = False  # the VM IS created, then the HTTP response is lost (the client sees the error)
    op_status: int = 0  # the failed operation's httpErrorStatusCode (0: 403 for quota, else 503)


@dataclass
class FakeCompute:
    """The fake's state: one project's zones, VMs and operations. Thread-safe (the server is threaded)."""

    project: str = "gpuplan-test"
    zones: dict[str, tuple[str, ...]] = field(default_factory=lambda: dict(DEFAULT_ZONES))
    polls_to_done: int = 1  # zoneOperations.get calls before an operation reports DONE (wait finishes it at once)
    hold: threading.Event = field(default_factory=threading.Event)  # set: operations stay RUNNING (slow GCE)
    instances: dict[tuple[str, str], dict[str, Any]] = field(default_factory=dict)
    operations: dict[tuple[str, str], dict[str, Any]] = field(default_factory=dict)
    request_ids: dict[tuple[str, str], str] = field(default_factory=dict)
    failures: dict[str, list[InsertFailure]] = field(default_factory=dict)
    guest: dict[tuple[str, str], dict[str, str]] = field(default_factory=dict)  # VM -> guest attributes
    calls: list[tuple[str, str, dict[str, str]]] = field(default_factory=list)
    firewalls: dict[str, dict[str, Any]] = field(default_factory=dict)  # global firewall rules by name
    firewall_insert_denied: bool = False  # the caller lacks compute.firewalls.create: 403 forbidden
    resource_policies: dict[tuple[str, str], dict[str, Any]] = field(default_factory=dict)  # (region, name)
    networks: dict[str, dict[str, Any]] = field(default_factory=dict)  # VPC networks but `default`, by name
    subnetworks: dict[tuple[str, str], dict[str, Any]] = field(default_factory=dict)  # (region, name)
    _ids: Iterator[int] = field(default_factory=lambda: itertools.count(7_000_000_000_000_000_001))
    _lock: threading.RLock = field(default_factory=threading.RLock)
    _polls: dict[tuple[str, str], int] = field(default_factory=dict)
    _on_done: dict[tuple[str, str], Any] = field(default_factory=dict)

    # ---- fault injection (called by tests) ----------------------------------------------------------------

    def fail_insert(self, zone: str, code: str = "ZONE_RESOURCE_POOL_EXHAUSTED", message: str | None = None,
                    times: int | None = 1, skip: int = 0) -> None:
        """The next `times` inserts in `zone` (None: all) are accepted, then their operation fails with `code`."""
        message = message or (f"The zone 'projects/{self.project}/zones/{zone}' does not have enough resources "
                              "available to fulfill the request. Try a different zone, or try again later."
                              if "EXHAUSTED" in code else f"{code} in {zone}")
        with self._lock:
            self.failures.setdefault(zone, []).append(InsertFailure(code, message, 0, times, skip))

    def fail_http(self, zone: str, status: int, reason: str, message: str | None = None,
                  times: int | None = 1) -> None:
        """The next `times` inserts in `zone` fail at once with an HTTP error (403 quotaExceeded, 429, ...)."""
        with self._lock:
            self.failures.setdefault(zone, []).append(
                InsertFailure(reason, message or f"{reason} ({status})", status, times))

    def lose_insert_response(self, zone: str, times: int = 1) -> None:
        """The next insert(s) in `zone` create the VM, but the client gets a 503 instead of the operation.

        A client that retries with the same requestId must get the first operation back, not a second VM.
        """
        with self._lock:
            self.failures.setdefault(zone, []).append(
                InsertFailure("backendError", "The service is currently unavailable.", 503, times,
                              after_create=True))

    def preempt(self, zone: str, name: str) -> None:
        """Preempt a spot VM as GCE does: a system operation, then delete or stop per its termination action."""
        with self._lock:
            inst = self.instances[(zone, name)]
            op = self._new_operation(zone, "compute.instances.preempted", inst, status="DONE")
            op["user"] = "system"
            action = inst.get("scheduling", {}).get("instanceTerminationAction", "STOP")
            if action == "DELETE":
                del self.instances[(zone, name)]
            else:
                inst["status"] = "TERMINATED"
                inst["lastStopTimestamp"] = _now()

    def set_guest_attribute(self, zone: str, name: str, path: str, value: str) -> None:
        """What a VM's startup script does with PUT .../guest-attributes/NAMESPACE/KEY (`path` = NAMESPACE/KEY)."""
        with self._lock:
            self.get(zone, name)
            self.guest.setdefault((zone, name), {})[path] = value

    def guest_attributes(self, zone: str, name: str, query_path: str | None) -> dict[str, Any]:
        """instances.getGuestAttributes with a `queryPath` (namespace prefix); 404 when the VM wrote none."""
        with self._lock:
            self.get(zone, name)
            prefix = query_path or ""
            found = {k: v for k, v in self.guest.get((zone, name), {}).items() if k.startswith(prefix)}
            if not found:
                raise ApiError(404, f"The resource 'projects/{self.project}/zones/{zone}/instances/{name}/"
                               f"guestAttributes/{prefix}' was not found", "notFound")
            items = [{"namespace": k.split("/", 1)[0], "key": k.split("/", 1)[1], "value": v}
                     for k, v in sorted(found.items())]
            return {"kind": "compute#guestAttributes", "queryPath": prefix, "queryValue": {"items": items}}

    def set_status(self, zone: str, name: str, status: str) -> None:
        with self._lock:
            self.instances[(zone, name)]["status"] = status

    def live(self) -> list[dict[str, Any]]:
        """Every VM the fake holds, whatever its status (what a bill would show)."""
        with self._lock:
            return [dict(v) for v in self.instances.values()]

    def operations_of(self, kind: str) -> list[str]:
        """Names of the operations of one type (insert, delete, ...), oldest first."""
        with self._lock:
            return [name for (_, name), op in self.operations.items() if op["operationType"] == kind]

    def count_calls(self, method: str, path_suffix: str) -> int:
        with self._lock:
            return sum(1 for m, p, _ in self.calls if m == method and p.endswith(path_suffix))

    # ---- helpers ------------------------------------------------------------------------------------------

    def _zone_url(self, zone: str) -> str:
        return f"{BASE}/projects/{self.project}/zones/{zone}"

    def _check_zone(self, zone: str) -> None:
        if zone not in self.zones:
            raise ApiError(404, f"The resource 'projects/{self.project}/zones/{zone}' was not found", "notFound")

    def _new_operation(self, zone: str, kind: str, inst: dict[str, Any], status: str = "RUNNING",
                       req_id: str | None = None) -> dict[str, Any]:
        name = f"operation-{uuid.uuid4().hex[:20]}"
        op = {
            "kind": "compute#operation", "id": str(next(self._ids)), "name": name,
            "zone": self._zone_url(zone), "operationType": kind, "targetLink": inst["selfLink"],
            "targetId": inst["id"], "status": status, "user": "gpuplan-test@example.com",
            "progress": 100 if status == "DONE" else 0, "insertTime": _now(), "startTime": _now(),
            "selfLink": f"{self._zone_url(zone)}/operations/{name}",
        }
        if status == "DONE":
            op["endTime"] = _now()
        if req_id:
            op["clientOperationId"] = req_id  # GCE echoes the requestId here
        self.operations[(zone, name)] = op
        return op

    def _finish(self, zone: str, name: str) -> dict[str, Any]:
        op = self.operations[(zone, name)]
        if op["status"] != "DONE":
            op["status"] = "DONE"
            op["progress"] = 100
            op["endTime"] = _now()
            action = self._on_done.pop((zone, name), None)
            if action is not None:
                action(op)
        return op

    # ---- instances ----------------------------------------------------------------------------------------

    def insert(self, zone: str, body: dict[str, Any], req_id: str | None) -> dict[str, Any]:
        with self._lock:
            self._check_zone(zone)
            if req_id:
                _validate_uuid(req_id)
                previous = self.request_ids.get((zone, req_id))
                if previous is not None:
                    return self.operations[(zone, previous)]
            failure = self._take_failure(zone)
            if failure is not None and failure.http_status and not failure.after_create:
                raise ApiError(failure.http_status, failure.message, failure.code)
            inst = self._validate(zone, body)
            if (zone, inst["name"]) in self.instances:
                raise ApiError(409, f"The resource '{inst['selfLink'].removeprefix(BASE + '/')}' already exists",
                               "alreadyExists")
            op = self._new_operation(zone, "insert", inst, req_id=req_id)
            if failure is not None and not failure.after_create:
                def fail(op: dict[str, Any], failure: InsertFailure = failure) -> None:
                    op["error"] = {"errors": [{"code": failure.code, "message": failure.message}]}
                    status = failure.op_status or (403 if "QUOTA" in failure.code else 503)
                    op["httpErrorStatusCode"] = status
                    op["httpErrorMessage"] = {400: "BAD REQUEST", 403: "FORBIDDEN"}.get(status, "SERVICE UNAVAILABLE")
                self._on_done[(zone, op["name"])] = fail
            else:
                self.instances[(zone, inst["name"])] = inst

                def boot(op: dict[str, Any], key: tuple[str, str] = (zone, inst["name"])) -> None:
                    if key in self.instances and self.instances[key]["status"] == "PROVISIONING":
                        self.instances[key]["status"] = "RUNNING"
                        self.instances[key]["lastStartTimestamp"] = _now()
                self._on_done[(zone, op["name"])] = boot
            if req_id:
                self.request_ids[(zone, req_id)] = op["name"]
            if failure is not None and failure.after_create:
                raise ApiError(failure.http_status, failure.message, failure.code)
            return op

    def _take_failure(self, zone: str) -> InsertFailure | None:
        queue = self.failures.get(zone) or []
        if not queue:
            return None
        failure = queue[0]
        if failure.skip > 0:
            failure.skip -= 1
            return None
        if failure.times is not None:
            failure.times -= 1
            if failure.times <= 0:
                queue.pop(0)
        return failure

    def _validate(self, zone: str, body: dict[str, Any]) -> dict[str, Any]:
        """GCE's own checks on an Instance resource; returns the stored instance (what get answers)."""
        name = body.get("name", "")
        if not NAME_RE.match(name):
            raise ApiError(400, f"Invalid value for field 'resource.name': '{name}'. Must be a match of regex "
                           "'(?:[a-z](?:[-a-z0-9]{0,61}[a-z0-9])?)'")
        machine = _last(body.get("machineType", ""))
        if machine not in MACHINE_TYPES:
            raise ApiError(400, f"Invalid value for field 'resource.machineType': '{body.get('machineType')}'. "
                           f"Machine type with name '{machine}' does not exist in zone '{zone}'.")
        _, _, fixed_acc, fixed_count = MACHINE_TYPES[machine]
        accelerators = body.get("guestAccelerators") or []
        if fixed_acc and accelerators:
            raise ApiError(400, f"Machine type '{machine}' comes with its accelerators; guestAccelerators must "
                           "not be specified")
        scheduling = dict(body.get("scheduling") or {})
        for acc in accelerators:
            acc_name = _last(acc.get("acceleratorType", ""))
            if acc_name not in self.zones[zone]:
                raise ApiError(400, f"Invalid value for field 'resource.guestAccelerators[0].acceleratorType': "
                               f"'{acc.get('acceleratorType')}'. Accelerator type '{acc_name}' does not exist in "
                               f"zone '{zone}'.")
            if not machine.startswith("n1-"):
                raise ApiError(400, f"Accelerators can only be attached to N1 machine types, not {machine}")
        if fixed_acc and fixed_acc not in self.zones[zone]:
            raise ApiError(400, f"Machine type '{machine}' does not exist in zone '{zone}'.")
        if (accelerators or fixed_acc) and scheduling.get("onHostMaintenance", "MIGRATE") != "TERMINATE":
            raise ApiError(400, "Instances with guest accelerators do not support live migration.")
        if scheduling.get("provisioningModel") == "SPOT" and scheduling.get("automaticRestart", True):
            raise ApiError(400, "Invalid value for field 'resource.scheduling.automaticRestart': 'true'. Spot VMs "
                           "cannot be restarted automatically.")
        if scheduling.get("maxRunDuration") and not scheduling.get("instanceTerminationAction"):
            raise ApiError(400, "Invalid value for field 'resource.scheduling.maxRunDuration': an "
                           "instanceTerminationAction is required with maxRunDuration.")
        disks = body.get("disks") or []
        if not any(d.get("boot") for d in disks):
            raise ApiError(400, "Invalid value for field 'resource.disks': a boot disk is required.")
        for d in disks:
            source = (d.get("initializeParams") or {}).get("sourceImage", "")
            if d.get("boot") and not re.match(r"^(https://.*/)?projects/[^/]+/global/images/(family/)?[^/]+$", source):
                raise ApiError(400, f"Invalid value for field 'resource.disks[0].initializeParams.sourceImage': "
                               f"'{source}'.")
        for path in body.get("resourcePolicies") or []:  # a placement policy of the zone's region, made before
            if (zone.rsplit("-", 1)[0], _last(path)) not in self.resource_policies:
                raise ApiError(404, f"The resource '{path}' was not found", "notFound")
        inst_id = str(next(self._ids))
        stored = json.loads(json.dumps(body))
        stored.update({
            "kind": "compute#instance", "id": inst_id, "status": "PROVISIONING", "creationTimestamp": _now(),
            "zone": self._zone_url(zone), "machineType": f"{self._zone_url(zone)}/machineTypes/{machine}",
            "selfLink": f"{self._zone_url(zone)}/instances/{name}", "scheduling": scheduling,
            "labelFingerprint": "42WmSpB8rSM=",
        })
        if fixed_acc:
            stored["guestAccelerators"] = [{
                "acceleratorType": f"{self._zone_url(zone)}/acceleratorTypes/{fixed_acc}",
                "acceleratorCount": fixed_count}]
        else:
            stored["guestAccelerators"] = [
                {**a, "acceleratorType": f"{self._zone_url(zone)}/acceleratorTypes/{_last(a['acceleratorType'])}"}
                for a in accelerators]
        return stored

    def get(self, zone: str, name: str) -> dict[str, Any]:
        with self._lock:
            self._check_zone(zone)
            inst = self.instances.get((zone, name))
            if inst is None:
                raise ApiError(404, f"The resource 'projects/{self.project}/zones/{zone}/instances/{name}' "
                               "was not found", "notFound")
            return inst

    def delete(self, zone: str, name: str, req_id: str | None) -> dict[str, Any]:
        with self._lock:
            if req_id and (zone, req_id) in self.request_ids:
                return self.operations[(zone, self.request_ids[(zone, req_id)])]
            inst = self.get(zone, name)
            inst["status"] = "STOPPING"
            op = self._new_operation(zone, "delete", inst, req_id=req_id)

            def remove(op: dict[str, Any], key: tuple[str, str] = (zone, name)) -> None:
                self.instances.pop(key, None)
                self.guest.pop(key, None)
            self._on_done[(zone, op["name"])] = remove
            if req_id:
                self.request_ids[(zone, req_id)] = op["name"]
            return op

    def list(self, zone: str, flt: str | None) -> list[dict[str, Any]]:
        with self._lock:
            self._check_zone(zone)
            match = parse_filter(flt)
            return [i for (z, _), i in sorted(self.instances.items()) if z == zone and match(i)]

    # ---- operations ---------------------------------------------------------------------------------------

    def get_operation(self, zone: str, name: str, wait: bool) -> dict[str, Any]:
        with self._lock:
            self._check_zone(zone)
            if (zone, name) not in self.operations:
                raise ApiError(404, f"The resource 'projects/{self.project}/zones/{zone}/operations/{name}' was "
                               "not found", "notFound")
            if self.hold.is_set():
                op = self.operations[(zone, name)]
                if op["status"] != "DONE":
                    return op  # like GCE's wait returning at its deadline with the operation still RUNNING
            if wait:
                return self._finish(zone, name)
            polls = self._polls.get((zone, name), 0) + 1
            self._polls[(zone, name)] = polls
            if polls >= self.polls_to_done:
                return self._finish(zone, name)
            return self.operations[(zone, name)]

    def list_operations(self, zone: str, flt: str | None) -> list[dict[str, Any]]:
        with self._lock:
            self._check_zone(zone)
            match = parse_filter(flt)
            return [op for (z, _), op in sorted(self.operations.items()) if z == zone and match(op)]


def _now() -> str:
    return dt.datetime.now(dt.timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _last(url: str) -> str:
    return url.rstrip("/").rsplit("/", 1)[-1]


def _validate_uuid(value: str) -> None:
    try:
        parsed = uuid.UUID(value)
    except ValueError as exc:
        raise ApiError(400, f"Invalid value for field 'requestId': '{value}'. Must be a valid UUID.") from exc
    if parsed.int == 0:
        raise ApiError(400, "Invalid value for field 'requestId': the zero UUID is not supported.")


class GceApp:
    """The WSGI app: URL routing onto FakeCompute, JSON in and out, GCE's error shape."""

    def __init__(self, state: FakeCompute) -> None:
        self.state = state
        prefix = "/compute/v1/projects/<project>"
        self.urls = Map([
            Rule(f"{prefix}/zones", endpoint="zones", methods=["GET"]),
            Rule(f"{prefix}/zones/<zone>", endpoint="zone", methods=["GET"]),
            Rule(f"{prefix}/zones/<zone>/instances", endpoint="instances", methods=["GET", "POST"]),
            Rule(f"{prefix}/zones/<zone>/instances/<name>", endpoint="instance", methods=["GET", "DELETE"]),
            Rule(f"{prefix}/zones/<zone>/instances/<name>/getGuestAttributes", endpoint="guest_attributes",
                 methods=["GET"]),
            Rule(f"{prefix}/aggregated/instances", endpoint="aggregated", methods=["GET"]),
            Rule(f"{prefix}/zones/<zone>/operations", endpoint="operations", methods=["GET"]),
            Rule(f"{prefix}/zones/<zone>/operations/<name>", endpoint="operation", methods=["GET"]),
            Rule(f"{prefix}/zones/<zone>/operations/<name>/wait", endpoint="wait", methods=["POST"]),
            Rule(f"{prefix}/zones/<zone>/machineTypes", endpoint="machine_types", methods=["GET"]),
            Rule(f"{prefix}/zones/<zone>/machineTypes/<name>", endpoint="machine_type", methods=["GET"]),
            Rule(f"{prefix}/zones/<zone>/acceleratorTypes", endpoint="accelerator_types", methods=["GET"]),
            Rule(f"{prefix}/zones/<zone>/acceleratorTypes/<name>", endpoint="accelerator_type", methods=["GET"]),
            Rule(f"{prefix}/global/images/family/<family>", endpoint="image_family", methods=["GET"]),
            Rule(f"{prefix}/global/firewalls", endpoint="firewalls", methods=["GET", "POST"]),
            Rule(f"{prefix}/global/firewalls/<name>", endpoint="firewall", methods=["GET"]),
            Rule(f"{prefix}/global/operations/<name>", endpoint="global_operation", methods=["GET"]),
            Rule(f"{prefix}/global/operations/<name>/wait", endpoint="global_operation", methods=["POST"]),
            Rule(f"{prefix}/regions/<region>/resourcePolicies", endpoint="policies", methods=["POST"]),
            Rule(f"{prefix}/global/networks", endpoint="networks", methods=["GET", "POST"]),
            Rule(f"{prefix}/global/networks/<name>", endpoint="network", methods=["GET"]),
            Rule(f"{prefix}/regions/<region>/subnetworks", endpoint="subnetworks", methods=["POST"]),
            Rule(f"{prefix}/regions/<region>/subnetworks/<name>", endpoint="subnetwork", methods=["GET"]),
            Rule(f"{prefix}/aggregated/subnetworks", endpoint="aggregated_subnetworks", methods=["GET"]),
            Rule(f"{prefix}/regions/<region>/resourcePolicies/<name>", endpoint="policy", methods=["GET", "DELETE"]),
            Rule(f"{prefix}/regions/<region>/operations/<name>", endpoint="region_operation", methods=["GET"]),
            Rule(f"{prefix}/regions/<region>/operations/<name>/wait", endpoint="region_operation",
                 methods=["POST"]),
        ])

    def __call__(self, environ: dict[str, Any], start_response: Any) -> Any:
        request = Request(environ)
        try:
            response = self.dispatch(request)
        except ApiError as exc:
            response = exc.response()
        except HTTPException as exc:
            response = ApiError(exc.code or 500, exc.description or "error", "notFound").response()
        return response(environ, start_response)

    def dispatch(self, request: Request) -> Response:
        adapter = self.urls.bind_to_environ(request.environ)
        endpoint, args = adapter.match()
        state = self.state
        with state._lock:
            state.calls.append((request.method, request.path, dict(request.args)))
        if endpoint == "image_family":  # public image projects (deeplearning-platform-release) are not ours
            return _json(image_from_family(args["project"], args["family"]))
        if args.get("project") != state.project:
            raise ApiError(404, f"The resource 'projects/{args.get('project')}' was not found", "notFound")
        zone = args.get("zone")
        flt = request.args.get("filter")
        if endpoint == "zones":
            return _json({"kind": "compute#zoneList", "items": [self._zone(z) for z in state.zones]})
        if endpoint == "zone":
            state._check_zone(zone)
            return _json(self._zone(zone))
        if endpoint == "instances" and request.method == "POST":
            return _json(state.insert(zone, request.get_json(force=True), request.args.get("requestId")))
        if endpoint == "instances":
            return _json({"kind": "compute#instanceList", "items": state.list(zone, flt)})
        if endpoint == "instance" and request.method == "DELETE":
            return _json(state.delete(zone, args["name"], request.args.get("requestId")))
        if endpoint == "instance":
            return _json(state.get(zone, args["name"]))
        if endpoint == "guest_attributes":
            return _json(state.guest_attributes(zone, args["name"], request.args.get("queryPath")))
        if endpoint == "aggregated":
            items: dict[str, Any] = {}
            for z in state.zones:
                found = state.list(z, flt)
                items[f"zones/{z}"] = {"instances": found} if found else {"warning": {
                    "code": "NO_RESULTS_ON_PAGE", "message": "There are no results for scope 'zones/" + z + "'"}}
            return _json({"kind": "compute#instanceAggregatedList", "items": items})
        if endpoint == "operations":
            return _json({"kind": "compute#operationList", "items": state.list_operations(zone, flt)})
        if endpoint == "wait" and state.hold.is_set():
            time.sleep(0.05)  # a held wait answers RUNNING after a moment; the client keeps waiting
        if endpoint in ("operation", "wait"):
            return _json(state.get_operation(zone, args["name"], wait=endpoint == "wait"))
        if endpoint in ("policies", "policy", "region_operation"):
            return _json(policy_call(state, endpoint, request, args["region"], args.get("name")))
        if endpoint in ("networks", "network", "subnetworks", "subnetwork", "aggregated_subnetworks"):
            return _json(network_call(state, endpoint, request, args.get("region"), args.get("name")))
        if endpoint in ("firewalls", "firewall", "global_operation"):
            return _json(firewall_call(state, endpoint, request, args.get("name")))
        if endpoint == "machine_types":
            state._check_zone(zone)
            return _json({"items": [self._machine_type(zone, m) for m in MACHINE_TYPES
                                    if self._offers_machine(zone, m)]})
        if endpoint == "machine_type":
            state._check_zone(zone)
            if args["name"] not in MACHINE_TYPES or not self._offers_machine(zone, args["name"]):
                raise ApiError(404, f"The resource 'projects/{state.project}/zones/{zone}/machineTypes/"
                               f"{args['name']}' was not found", "notFound")
            return _json(self._machine_type(zone, args["name"]))
        if endpoint == "accelerator_types":
            state._check_zone(zone)
            return _json({"items": [self._accelerator(zone, a) for a in state.zones[zone]]})
        if endpoint == "accelerator_type":
            state._check_zone(zone)
            if args["name"] not in state.zones[zone]:
                raise ApiError(404, f"The resource 'projects/{state.project}/zones/{zone}/acceleratorTypes/"
                               f"{args['name']}' was not found", "notFound")
            return _json(self._accelerator(zone, args["name"]))
        raise ApiError(404, "not found", "notFound")

    def _zone(self, zone: str) -> dict[str, Any]:
        region = zone.rsplit("-", 1)[0]
        return {"kind": "compute#zone", "name": zone, "status": "UP", "id": str(abs(hash(zone)) % 10**12),
                "region": f"{BASE}/projects/{self.state.project}/regions/{region}",
                "selfLink": f"{BASE}/projects/{self.state.project}/zones/{zone}"}

    def _offers_machine(self, zone: str, machine: str) -> bool:
        fixed = MACHINE_TYPES[machine][2]
        return fixed is None or fixed in self.state.zones[zone]

    def _machine_type(self, zone: str, machine: str) -> dict[str, Any]:
        cpus, mem, acc, count = MACHINE_TYPES[machine]
        out: dict[str, Any] = {"kind": "compute#machineType", "name": machine, "guestCpus": cpus, "memoryMb": mem,
                               "zone": zone, "selfLink": f"{self.state._zone_url(zone)}/machineTypes/{machine}"}
        if acc:
            out["accelerators"] = [{"guestAcceleratorType": acc, "guestAcceleratorCount": count}]
        return out

    def _accelerator(self, zone: str, name: str) -> dict[str, Any]:
        return {"kind": "compute#acceleratorType", "name": name, "zone": f"{self.state._zone_url(zone)}",
                "maximumCardsPerInstance": 8, "selfLink": f"{self.state._zone_url(zone)}/acceleratorTypes/{name}"}


def image_from_family(project: str, family: str) -> dict[str, Any]:
    """An Image resource as images.getFromFamily returns it (the newest, not deprecated, image of the family)."""
    name = f"{family}-v20260416"[:63]
    return {"kind": "compute#image", "id": str(abs(hash((project, family))) % 10**18), "name": name,
            "family": family, "status": "READY", "archiveSizeBytes": "21474836480", "diskSizeGb": "50",
            "architecture": "X86_64", "selfLink": f"{BASE}/projects/{project}/global/images/{name}"}


def firewall_call(state: FakeCompute, endpoint: str, request: Request, name: str | None) -> dict[str, Any]:
    """firewalls.insert/get/list and globalOperations.get/wait: mechanics only (an insert is DONE at once)."""
    base = f"{BASE}/projects/{state.project}/global"
    if endpoint == "global_operation":
        return {"kind": "compute#operation", "name": name, "status": "DONE", "progress": 100,
                "selfLink": f"{base}/operations/{name}"}
    if endpoint == "firewall":
        with state._lock:
            found = state.firewalls.get(str(name))
        if found is None:
            raise ApiError(404, f"The resource 'projects/{state.project}/global/firewalls/{name}' was not found",
                           "notFound")
        return found
    if request.method == "GET":
        with state._lock:
            return {"kind": "compute#firewallList", "items": list(state.firewalls.values())}
    if state.firewall_insert_denied:
        raise ApiError(403, f"Required 'compute.firewalls.create' permission for 'projects/{state.project}/global/"
                       "firewalls'", "forbidden")
    body = request.get_json(force=True)
    with state._lock:
        if body["name"] in state.firewalls:
            raise ApiError(409, f"The resource 'projects/{state.project}/global/firewalls/{body['name']}' already "
                           "exists", "alreadyExists")
        state.firewalls[body["name"]] = {**body, "kind": "compute#firewall", "selfLink": f"{base}/firewalls/"
                                         f"{body['name']}", "direction": body.get("direction") or "INGRESS"}
    op = f"operation-{uuid.uuid4().hex[:20]}"
    return {"kind": "compute#operation", "name": op, "status": "DONE", "progress": 100, "operationType": "insert",
            "targetLink": f"{base}/firewalls/{body['name']}", "selfLink": f"{base}/operations/{op}"}


def policy_call(state: FakeCompute, endpoint: str, request: Request, region: str, name: str | None) -> dict[str, Any]:
    """resourcePolicies.insert/get/delete and regionOperations.get/wait (DONE at once). A policy a VM still names
    cannot be deleted (400 resourceInUseByAnotherResource), as on GCE."""
    base = f"{BASE}/projects/{state.project}/regions/{region}"
    op = {"kind": "compute#operation", "name": f"operation-{uuid.uuid4().hex[:20]}", "status": "DONE",
          "progress": 100}
    if endpoint == "region_operation":
        return {**op, "name": name}
    with state._lock:
        if endpoint == "policies":
            body = request.get_json(force=True)
            if (region, body["name"]) in state.resource_policies:
                raise ApiError(409, f"The resource '{base}/resourcePolicies/{body['name']}' already exists",
                               "alreadyExists")
            state.resource_policies[(region, body["name"])] = {**body, "selfLink": f"{base}/resourcePolicies/"
                                                               f"{body['name']}", "status": "READY"}
            return op
        found = state.resource_policies.get((region, str(name)))
        if found is None:
            raise ApiError(404, f"The resource 'projects/{state.project}/regions/{region}/resourcePolicies/{name}' "
                           "was not found", "notFound")
        if request.method == "GET":
            return found
        users = [vm["name"] for vm in state.instances.values()
                 if any(str(p).endswith(f"/resourcePolicies/{name}") for p in vm.get("resourcePolicies") or [])]
        if users:
            raise ApiError(400, f"The resource_policy resource '{name}' is already being used by "
                           f"'{users[0]}'", "resourceInUseByAnotherResource")
        del state.resource_policies[(region, str(name))]
        return op


def _json(body: Any) -> Response:
    return Response(json.dumps(body), status=200, mimetype="application/json")


@dataclass
class RunningFake:
    """A served fake: `state` to inject faults and inspect, `endpoint` in gcloud's override form, `strict` the
    documented rules in front of it (tests/support/strict_gce.py; None: the plain fake)."""

    state: FakeCompute
    host: str
    port: int
    strict: Any = None

    @property
    def api_endpoint(self) -> str:
        return f"http://{self.host}:{self.port}"

    @property
    def endpoint(self) -> str:
        """The value for CLOUDSDK_API_ENDPOINT_OVERRIDES_COMPUTE, as gcloud writes it."""
        return f"{self.api_endpoint}/compute/v1/"


@contextmanager
def serve(state: FakeCompute | None = None, host: str = "127.0.0.1") -> Iterator[RunningFake]:
    """Serve a fake Compute API on a free loopback port in a thread of this process."""
    state = state or FakeCompute()
    with serve_wsgi(GceApp(state), host, "fake-gce") as port:
        yield RunningFake(state, host, port)
