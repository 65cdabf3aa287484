"""A strict layer in front of the fake Compute API: documented GCE rules the plain fake does not keep.

The plain fake (tests/support/fakes/gce_server.py) is mechanics: VMs, operations, requestIds. A test that passes only
because a fake is lenient proves nothing about Google's API, so the rules below — each citing where it comes from —
answer the way GCE does, with GCE's error shape, and each can be switched off (`StrictGceRules`) so a test can show
the plain fake accepting what the rule refuses. The `gce` fixture (tests/conftest.py) serves the fake behind it.

Rules (notes, GCP 10-12):
- `labels`: at most 64 labels per resource; keys 1-63 characters starting with a lowercase (or international)
  letter; keys and values only lowercase letters, numeric characters, `_` and `-` (international allowed); values
  at most 63 characters; both under 128 bytes. https://cloud.google.com/compute/docs/labeling-resources#requirements
  (the API references add the byte limit). Error: HTTP 400, reason `invalid`, "Invalid value for field
  'resource.labels': ''. Label value '…' violates format constraints. …" (observed: oap-project/cloudtik#14; the key
  variant googleapis/gax-nodejs#1288). The message for more than 64 labels was not found: ours is made up, same shape.
- `image_families`: images.getFromFamily for a family its image project does not publish answers HTTP 404
  `notFound` "The resource 'projects/P/global/images/family/F' was not found"
  (https://cloud.google.com/compute/docs/reference/rest/v1/images/getFromFamily;
  observed: tensorflow/tensor2tensor#1660), and an instances.insert naming it answers the same 404 (observed:
  googlecodelabs/feedback#463, the insert's requestPath .../zones/us-east1-b/instances).
- `boot_disks`: a Persistent Disk (pd-*) boot disk on a Hyperdisk-only series (A4, A4X, A3 Ultra, G4) fails the
  insert operation with UNSUPPORTED_OPERATION "[pd-balanced, MACHINE] features are not compatible for creating
  instance." (observed for c4: astronomer/astronomer#2463; for a4x: "pd-balanced disk type cannot be used by
  a4x-highgpu-4g machine type", NVIDIA/aicr#2338; the message for a4 is extrapolated from the c4 one).
- `markets`: an on-demand (provisioningModel STANDARD) insert of a Spot/Flex-start-only shape (a3-highgpu-1g/2g/4g,
  a4-highgpu-8g) is refused — https://cloud.google.com/compute/docs/accelerator-optimized-machines#consumption_option_availability_by_machine_type
  (table not retrieved; maintainers citing it: dstackai/gpuhunt#176, dstackai/dstack#3100,
  GoogleCloudPlatform/cluster-toolkit#6279). GCE's error for it is UNDOCUMENTED and was not observed anywhere; this
  layer fails the operation with UNSUPPORTED_OPERATION (the code GCE uses for an incompatible configuration above)
  and a made-up message.
- `metadata`: each metadata value (the startup-script: the boot script) is at most 262144 bytes (256 KiB) and all
  keys and values together under 512 KB — https://cloud.google.com/compute/docs/reference/rest/v1/instances
  (Metadata.items[].value, Metadata.items). GCE's exact message was not found: HTTP 400 `invalid`, ours made up.
- `gpus_all_regions` (off: None; a new project's value is 0): the project-wide GPU quota. An insert whose GPUs (its
  guestAccelerators, or the GPUs an a2/a3/a4/g2 machine type comes with) would bring the project's live GPUs above it
  is refused at once: HTTP 403, reason `quotaExceeded`, "Quota 'GPUS_ALL_REGIONS' exceeded. Limit: 0.0 globally."
  (https://cloud.google.com/compute/resource-usage#gpu_quota; the HTTP shape:
  https://cloud.google.com/compute/docs/troubleshooting/troubleshooting-bulk-vm-creation "HTTP 403 reason
  quotaExceeded"; the message: fastai/course-v3#165). The plain fake has no quotas.
- `caller_permissions` (off: None): the caller's IAM permissions; a request needing another gets 403 `forbidden`
  "Required 'PERMISSION' permission for 'RESOURCE'" (support/gce_permissions.py maps methods to permissions).
- `nics`: an instance's network interfaces. "Each network interface of an instance must be in a different VPC
  network" (https://cloud.google.com/vpc/docs/multiple-interfaces-concepts): HTTP 400 `invalid` "Networks must be
  distinct for NICs attached to a VM." (GCE's message as seen in the wild, e.g. terraform-provider-google issues).
  At most 8 interfaces, except the machine types with more physical NICs: a3-highgpu-8g and a3-edgegpu-8g 1+4,
  a3-megagpu-8g 8+1 (https://cloud.google.com/compute/docs/gpus/gpu-network-bandwidth). A3 VMs use gVNIC: an
  interface of an A3 VM without nicType GVNIC is refused (same page; GCE's message was not found, ours is made up).
  A subnetwork must exist in the VM's region and belong to the interface's network (404 `notFound` / 400).
- `placement`: compact (COLLOCATED) placement policies without a maxDistance: at most 1,500 VMs per policy
  (https://cloud.google.com/compute/docs/instances/placement-policies-overview, table of maximum distance values,
  "Unspecified": 1,500; the older define-instance-placement page said 150; limits with a maxDistance, which gpuplan
  never sets, are not modelled), only the series
  "A4X Max, A4X, A4, A3 Ultra, A3 Mega, A3 High, A3 Edge, A2, G4, G2" among GPU VMs
  (https://cloud.google.com/ai-hypercomputer/docs/placement-policy-and-workload-policy; not N1), and no more VMs
  in a policy than its vmCount (https://cloud.google.com/compute/docs/reference/rest/v1/resourcePolicies,
  groupPlacementPolicy.vmCount). Messages made up, HTTP 400 `invalid`.
- `network_mtu`: networks.insert with an MTU outside 1300-8896 (https://cloud.google.com/vpc/docs/mtu: "an MTU of
  any value between 1300 bytes and 8896 bytes") is HTTP 400 `invalid` (message made up).
- `reachable(state, a, b)` (a check a test asks, like the AWS layer's): VPC firewall rules between two VMs; the
  `default` network's default-allow-internal, an implied deny-ingress everywhere else (docs at the function).
"""

from __future__ import annotations

import io
import json
import re
import unicodedata
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from support.fakes.gce_errors import ApiError
from support.fakes.gce_server import FakeCompute, GceApp, InsertFailure, RunningFake
from support.fakes.wsgi import serve_wsgi
from support.gce_permissions import needed

# Image families the strict layer treats as published (notes, GCP 11: Deep Learning VM families seen in 2024-2026
# public code, and gpuplan's default). Listed literally, not imported from gpuplan: if the product's default family
# changes to one not known here, the launch tests fail and the new family must be checked and added by hand.
PUBLISHED_FAMILIES: frozenset[tuple[str, str]] = frozenset({
    ("deeplearning-platform-release", "common-cu128-ubuntu-2204-nvidia-570"),
    ("deeplearning-platform-release", "common-cu129-ubuntu-2204-nvidia-580"),
    ("deeplearning-platform-release", "pytorch-2-7-cu128-ubuntu-2204-nvidia-570"),
    ("debian-cloud", "debian-12"),
    ("ubuntu-os-cloud", "ubuntu-2204-lts"),
})
HYPERDISK_ONLY = ("a4-", "a4x-", "a3-ultragpu-", "g4-")
NOT_ON_DEMAND = frozenset({"a3-highgpu-1g", "a3-highgpu-2g", "a3-highgpu-4g", "a4-highgpu-8g"})
MAX_LABELS = 64
MAX_METADATA_VALUE = 262144
MAX_METADATA_TOTAL = 512 * 1024

_INSERT = re.compile(r"^/compute/v1/projects/([^/]+)/zones/([^/]+)/instances$")
_FAMILY = re.compile(r"^/compute/v1/projects/([^/]+)/global/images/family/([^/]+)$")
_NETWORKS = re.compile(r"^/compute/v1/projects/([^/]+)/global/networks$")
_POLICIES = re.compile(r"^/compute/v1/projects/([^/]+)/regions/([^/]+)/resourcePolicies$")
MAX_NICS = 8
MORE_NICS = {"a3-highgpu-8g": 5, "a3-edgegpu-8g": 5, "a3-edgegpu-8g-nolssd": 5, "a3-megagpu-8g": 9}
COMPACT_SERIES = ("a4x-", "a4-", "a3-", "a2-", "g4-", "g2-")  # GPU series only: the CPU ones are not used here
MAX_COMPACT_VMS = 1500
_SOURCE_FAMILY = re.compile(r"^(?:https?://[^/]+/compute/v1/)?projects/([^/]+)/global/images/family/([^/]+)$")


@dataclass
class StrictGceRules:
    """Which documented rules are on (all by default), the published image families, and what was refused."""

    labels: bool = True
    image_families: bool = True
    boot_disks: bool = True
    markets: bool = True
    metadata: bool = True
    nics: bool = True
    placement: bool = True
    network_mtu: bool = True
    families: set[tuple[str, str]] = field(default_factory=lambda: set(PUBLISHED_FAMILIES))
    gpus_all_regions: float | None = None
    caller_permissions: set[str] | None = None  # None: the caller may do anything (support/gce_permissions.py)
    denied: list[str] = field(default_factory=list)  # permissions the caller lacked, in order
    refused: list[str] = field(default_factory=list)  # the rule of each refusal, in order

    def off(self) -> StrictGceRules:
        """Every rule off: the plain fake's behaviour."""
        self.labels = self.image_families = self.boot_disks = self.markets = self.metadata = False
        self.nics = self.placement = self.network_mtu = False
        self.gpus_all_regions = None
        self.caller_permissions = None
        return self


# GPUs a G2 machine type comes with (https://cloud.google.com/compute/docs/gpus#l4-gpus); a2/a3/a4 say it: `-8g`.
G2_GPUS = {"g2-standard-4": 1, "g2-standard-8": 1, "g2-standard-12": 1, "g2-standard-16": 1, "g2-standard-32": 1,
           "g2-standard-24": 2, "g2-standard-48": 4, "g2-standard-96": 8}


def gpus_of(body: dict[str, Any]) -> int:
    """The GPUs one instances.insert body asks for."""
    machine = str(body.get("machineType") or "").rstrip("/").rsplit("/", 1)[-1]
    attached = sum(int(a.get("acceleratorCount") or 0) for a in body.get("guestAccelerators") or [])
    fixed = re.search(r"^a\d[a-z]?-\w+-(\d+)g$", machine)
    return attached + (int(fixed.group(1)) if fixed else G2_GPUS.get(machine, 0))


def _label_char(ch: str) -> bool:
    category = unicodedata.category(ch)
    return ch in "_-" or category in ("Ll", "Lo") or category.startswith("N")


def _key_ok(key: str) -> bool:
    return (0 < len(key) <= 63 and len(key.encode()) < 128 and unicodedata.category(key[0]) in ("Ll", "Lo")
            and all(_label_char(c) for c in key))


def _value_ok(value: str) -> bool:
    return len(value) <= 63 and len(value.encode()) < 128 and all(_label_char(c) for c in value)


def label_error(labels: dict[str, Any], field_name: str) -> ApiError | None:
    """GCE's 400 for a labels map that breaks the rules (module docstring), or None."""
    if len(labels) > MAX_LABELS:
        return ApiError(400, f"Invalid value for field '{field_name}': ''. Too many labels: {len(labels)}; a "
                        f"resource can have at most {MAX_LABELS} labels.", "invalid")
    for key, value in labels.items():
        if not _key_ok(key):
            return ApiError(400, f"Invalid value for field '{field_name}': ''. Label key '{key}' violates format "
                            "constraints. The key must start with a lowercase character, can only contain lowercase "
                            "letters, numeric characters, underscores and dashes. The key can be at most 63 "
                            "characters long. International characters are allowed.", "invalid")
        if not _value_ok(str(value)):
            return ApiError(400, f"Invalid value for field '{field_name}': ''. Label value '{value}' violates "
                            "format constraints. The value can only contain lowercase letters, numeric "
                            "characters, underscores and dashes. The value can be at most 63 characters long. "
                            "International characters are allowed.", "invalid")
    return None


def metadata_error(items: list[dict[str, Any]]) -> ApiError | None:
    """GCE's 400 for metadata over its size limits (module docstring; the message is made up), or None."""
    sizes = [(str(i.get("key") or ""), len(str(i.get("value") or "").encode())) for i in items]
    for key, size in sizes:
        if size > MAX_METADATA_VALUE:
            return ApiError(400, f"Invalid value for field 'resource.metadata': metadata value for key {key!r} is "
                            f"{size} bytes; the limit is {MAX_METADATA_VALUE} (made-up message).", "invalid")
    if sum(len(k.encode()) + size for k, size in sizes) >= MAX_METADATA_TOTAL:
        return ApiError(400, "Invalid value for field 'resource.metadata': all metadata keys and values must be "
                        "under 512 KB (made-up message).", "invalid")
    return None


def _not_found(project: str, family: str) -> ApiError:
    return ApiError(404, f"The resource 'projects/{project}/global/images/family/{family}' was not found", "notFound")


class StrictGceApp:
    """WSGI middleware: checks a request against the rules that are on, answers GCE's error or passes it on."""

    def __init__(self, inner: GceApp, rules: StrictGceRules) -> None:
        self.inner = inner
        self.rules = rules

    @property
    def state(self) -> FakeCompute:
        return self.inner.state

    def __call__(self, environ: dict[str, Any], start_response: Any) -> Any:
        path, method = environ.get("PATH_INFO", ""), environ.get("REQUEST_METHOD", "GET")
        try:
            if self.rules.caller_permissions is not None:
                self._check_caller(environ, method, path)
            family = _FAMILY.match(path)
            if family and method == "GET":
                self._check_family(family.group(1), family.group(2))
            insert = _INSERT.match(path)
            if method == "POST" and (insert or _NETWORKS.match(path) or _POLICIES.match(path)):
                length = int(environ.get("CONTENT_LENGTH") or 0)
                raw = environ["wsgi.input"].read(length) if length else b""
                environ["wsgi.input"] = io.BytesIO(raw)  # the fake reads it again
                body = json.loads(raw or b"{}")
                query = dict(p.split("=", 1) for p in (environ.get("QUERY_STRING") or "").split("&") if "=" in p)
                if insert:
                    self._check_insert(insert.group(2), body, query.get("requestId"))
                elif _NETWORKS.match(path):
                    self._check_network(body)
                else:
                    self._check_policy(body)
        except ApiError as exc:
            return exc.response()(environ, start_response)
        return self.inner(environ, start_response)

    def _check_caller(self, environ: dict[str, Any], method: str, path: str) -> None:
        """HTTP 403 for a request needing a permission the caller lacks (support/gce_permissions.py)."""
        body = None
        if method == "POST":
            length = int(environ.get("CONTENT_LENGTH") or 0)
            raw = environ["wsgi.input"].read(length) if length else b""
            environ["wsgi.input"] = io.BytesIO(raw)
            body = json.loads(raw or b"{}")
        allowed = self.rules.caller_permissions or set()
        for permission in needed(method, path, body):
            if permission not in allowed:
                self.rules.denied.append(permission)
                self._refuse("caller_permissions", ApiError(
                    403, f"Required '{permission}' permission for '{path.removeprefix('/compute/v1/')}'", "forbidden"))

    def _refuse(self, rule: str, error: ApiError) -> None:
        self.rules.refused.append(rule)
        raise error

    def _check_family(self, project: str, family: str) -> None:
        if self.rules.image_families and (project, family) not in self.rules.families:
            self._refuse("image_families", _not_found(project, family))

    def _check_insert(self, zone: str, body: dict[str, Any], request_id: str | None) -> None:
        rules = self.rules
        boot = next((d for d in body.get("disks") or [] if d.get("boot")), {})
        params = boot.get("initializeParams") or {}
        if rules.labels:
            error = (label_error(body.get("labels") or {}, "resource.labels")
                     or label_error(params.get("labels") or {}, "resource.disks[0].initializeParams.labels"))
            if error is not None:
                self._refuse("labels", error)
        if rules.gpus_all_regions is not None:
            live = sum(gpus_of(vm) for vm in self.state.live())
            if gpus_of(body) and live + gpus_of(body) > rules.gpus_all_regions:
                self._refuse("gpus_all_regions", ApiError(
                    403, f"Quota 'GPUS_ALL_REGIONS' exceeded. Limit: {rules.gpus_all_regions:.1f} globally.",
                    "quotaExceeded"))
        if rules.metadata:
            error = metadata_error((body.get("metadata") or {}).get("items") or [])
            if error is not None:
                self._refuse("metadata", error)
        machine = str(body.get("machineType") or "").rstrip("/").rsplit("/", 1)[-1]
        if rules.nics:
            error = self._nic_error(zone, machine, body.get("networkInterfaces") or [{}])
            if error is not None:
                self._refuse("nics", error)
        if rules.placement:
            error = self._placement_error(zone, machine, body.get("resourcePolicies") or [])
            if error is not None:
                self._refuse("placement", error)
        source = _SOURCE_FAMILY.match(str(params.get("sourceImage") or ""))
        if rules.image_families and source and (source.group(1), source.group(2)) not in rules.families:
            self._refuse("image_families", _not_found(source.group(1), source.group(2)))
        disk_type = str(params.get("diskType") or "pd-standard").rstrip("/").rsplit("/", 1)[-1]
        model = str((body.get("scheduling") or {}).get("provisioningModel") or "STANDARD")
        if rules.boot_disks and machine.startswith(HYPERDISK_ONLY) and disk_type.startswith("pd-"):
            self._fail_operation(zone, request_id, "boot_disks", f"[{disk_type}, {machine}] features are not "
                                 "compatible for creating instance.")
        elif rules.markets and machine in NOT_ON_DEMAND and model == "STANDARD":
            self._fail_operation(zone, request_id, "markets", f"The machine type {machine} is not available with "
                                 "provisioning model STANDARD; use SPOT or FLEX_START. (made-up message: GCE's "
                                 "error for this is undocumented)")

    def _nic_error(self, zone: str, machine: str, nics: list[dict[str, Any]]) -> ApiError | None:
        """The `nics` rule (module docstring) for one insert's networkInterfaces."""
        limit = MORE_NICS.get(machine, MAX_NICS)
        if len(nics) > limit:
            return ApiError(400, f"Invalid value for field 'resource.networkInterfaces': {len(nics)} network "
                            f"interfaces; machine type {machine} supports at most {limit} (made-up message).",
                            "invalid")
        seen: set[str] = set()
        region = zone.rsplit("-", 1)[0]
        for i, nic in enumerate(nics):
            network = _last(str(nic.get("network") or "default"))
            if network in seen:
                return ApiError(400, f"Invalid value for field 'resource.networkInterfaces[{i}].network': "
                                f"'{nic.get('network')}'. Networks must be distinct for NICs attached to a VM.",
                                "invalid")
            seen.add(network)
            if machine.startswith("a3-") and nic.get("nicType") != "GVNIC":
                return ApiError(400, f"Invalid value for field 'resource.networkInterfaces[{i}].nicType': "
                                f"'{nic.get('nicType', '')}'. Machine type {machine} requires GVNIC (made-up message).",
                                "invalid")
            subnet = str(nic.get("subnetwork") or "")
            if subnet:
                with self.state._lock:
                    found = self.state.subnetworks.get((region, _last(subnet)))
                if found is None or f"/regions/{region}/" not in f"/{subnet}":
                    return ApiError(404, f"The resource '{subnet}' was not found", "notFound")
                if _last(str(found.get("network") or "")) != network:
                    return ApiError(400, f"Invalid value for field 'resource.networkInterfaces[{i}].subnetwork': "
                                    f"'{subnet}'. Subnetwork does not belong to network {network} (made-up message).",
                                    "invalid")
        return None

    def _placement_error(self, zone: str, machine: str, policies: list[str]) -> ApiError | None:
        """The `placement` rule for an insert naming resource policies."""
        region = zone.rsplit("-", 1)[0]
        for path in policies:
            with self.state._lock:
                policy = self.state.resource_policies.get((region, _last(path)))
                users = sum(1 for vm in self.state.live() if any(_last(p) == _last(path)
                                                                 for p in vm.get("resourcePolicies") or []))
            group = (policy or {}).get("groupPlacementPolicy") or {}
            if group.get("collocation") != "COLLOCATED":
                continue
            if not machine.startswith(COMPACT_SERIES):
                return ApiError(400, f"Compact placement policy {_last(path)} cannot be applied to machine type "
                                f"{machine} (made-up message).", "invalid")
            if group.get("vmCount") and users >= int(group["vmCount"]):
                return ApiError(400, f"Placement policy {_last(path)} already holds its vmCount of "
                                f"{group['vmCount']} VMs (made-up message).", "invalid")
        return None

    def _check_network(self, body: dict[str, Any]) -> None:
        mtu = body.get("mtu")
        if self.rules.network_mtu and mtu is not None and not 1300 <= int(mtu) <= 8896:
            self._refuse("network_mtu", ApiError(400, f"Invalid value for field 'resource.mtu': '{mtu}'. The MTU must "
                                                 "be between 1300 and 8896 (made-up message).", "invalid"))

    def _check_policy(self, body: dict[str, Any]) -> None:
        group = body.get("groupPlacementPolicy") or {}
        if self.rules.placement and group.get("collocation") == "COLLOCATED" and not group.get("maxDistance") \
                and int(group.get("vmCount") or 0) > MAX_COMPACT_VMS:
            self._refuse("placement", ApiError(
                400, f"Invalid value for field 'resource.groupPlacementPolicy.vmCount': '{group['vmCount']}'. A "
                f"compact placement policy holds at most {MAX_COMPACT_VMS} VMs (made-up message).", "invalid"))

    def _fail_operation(self, zone: str, request_id: str | None, rule: str, message: str) -> None:
        """GCE accepts the insert and its operation fails: queue the failure first in line for this very insert
        (not for a replayed requestId, which gets its first operation back and must not leave a failure queued)."""
        state = self.state
        with state._lock:
            if request_id and (zone, request_id) in state.request_ids:
                return
            state.failures.setdefault(zone, []).insert(
                0, InsertFailure("UNSUPPORTED_OPERATION", message, 0, 1, op_status=400))
        self.rules.refused.append(rule)


def _last(url: str) -> str:
    return url.rstrip("/").rsplit("/", 1)[-1]


def _network(vm: dict[str, Any]) -> str:
    nics = vm.get("networkInterfaces") or [{}]
    return str(nics[0].get("network") or "default").rstrip("/").rsplit("/", 1)[-1]


def reachable(state: FakeCompute, source: dict[str, Any], destination: dict[str, Any], *,
              protocol: str = "tcp") -> bool:
    """Whether `source` can open a connection to `destination` (rank 1 to rank 0's rendezvous port), as VPC firewall
    rules decide. Every network has the implied rule denying all ingress
    (https://cloud.google.com/firewall/docs/firewalls#default_firewall_rules); the auto-created `default` network
    also comes with `default-allow-internal`, allowing "ingress connections for all protocols and ports among
    instances in the network" (https://cloud.google.com/firewall/docs/firewalls#more_rules_default_vpc), which the
    fake models; any other network needs an INGRESS rule of its own whose sourceTags hold a tag of the source
    (or sourceRanges 0.0.0.0/0) and whose targetTags are empty or hold a tag of the destination. Egress is allowed
    by the implied rule. The plain fake has no firewalls: everything reaches everything."""
    network = _network(source)
    if network != _network(destination):
        return False
    if network == "default":
        return True
    source_tags = set((source.get("tags") or {}).get("items") or [])
    target_tags = set((destination.get("tags") or {}).get("items") or [])
    with state._lock:
        rules = list(state.firewalls.values())
    for rule in rules:
        if str(rule.get("network") or "").rstrip("/").rsplit("/", 1)[-1] != network:
            continue
        if rule.get("direction", "INGRESS") != "INGRESS" or rule.get("disabled"):
            continue
        protocols = {str(a.get("IPProtocol") or a.get("I_p_protocol") or "") for a in rule.get("allowed") or []}
        if not protocols & {"all", protocol}:
            continue
        from_source = bool(source_tags & set(rule.get("sourceTags") or [])) or "0.0.0.0/0" in (
            rule.get("sourceRanges") or [])
        to_target = not rule.get("targetTags") or bool(target_tags & set(rule["targetTags"]))
        if from_source and to_target:
            return True
    return False


@contextmanager
def serve(state: FakeCompute | None = None, rules: StrictGceRules | None = None,
          host: str = "127.0.0.1") -> Iterator[RunningFake]:
    """Serve the fake Compute API behind the strict layer on a free loopback port; `fake.strict` holds the rules."""
    state = state or FakeCompute()
    rules = rules or StrictGceRules()
    with serve_wsgi(StrictGceApp(GceApp(state), rules), host, "strict-gce") as port:
        yield RunningFake(state, host, port, strict=rules)
