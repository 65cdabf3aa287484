"""The strict GCE layer's `caller_permissions` rule: each Compute API request needs the IAM permissions GCE checks
for it, and a caller without one gets HTTP 403 `forbidden` "Required 'PERMISSION' permission for 'RESOURCE'"
(the shape: https://cloud.google.com/compute/docs/troubleshooting/troubleshooting-vm-creation, "Required
'compute.instances.create' permission"). Which permission each method needs: the Compute Engine IAM permissions
reference (https://cloud.google.com/compute/docs/reference/rest/v1/instances/insert and each method's
"Authorization" section, e.g. insert needs compute.instances.create, plus compute.disks.create for a new boot disk,
compute.instances.setMetadata / setLabels / setTags / setServiceAccount when the body sets them,
compute.subnetworks.use and useExternalIp for the interface and its access config, compute.images.useReadOnly for
the source image, iam.serviceAccounts.actAs for a service account; firewalls.insert also
compute.networks.updatePolicy). Secret Manager and Cloud Storage are separate fakes and not covered here.
"""

from __future__ import annotations

import re
from typing import Any

_P = r"^/compute/v1/projects/[^/]+"
ROUTES: tuple[tuple[str, str, str], ...] = (
    ("POST", _P + r"/zones/[^/]+/instances$", "compute.instances.create"),
    ("GET", _P + r"/zones/[^/]+/instances$", "compute.instances.list"),
    ("GET", _P + r"/aggregated/instances$", "compute.instances.list"),
    ("GET", _P + r"/zones/[^/]+/instances/[^/]+/getGuestAttributes$", "compute.instances.getGuestAttributes"),
    ("GET", _P + r"/zones/[^/]+/instances/[^/]+$", "compute.instances.get"),
    ("DELETE", _P + r"/zones/[^/]+/instances/[^/]+$", "compute.instances.delete"),
    ("GET", _P + r"/zones/[^/]+/operations$", "compute.zoneOperations.list"),
    ("GET", _P + r"/zones/[^/]+/operations/[^/]+$", "compute.zoneOperations.get"),
    ("POST", _P + r"/zones/[^/]+/operations/[^/]+/wait$", "compute.zoneOperations.get"),
    ("GET", _P + r"/zones$", "compute.zones.list"),
    ("GET", _P + r"/zones/[^/]+$", "compute.zones.get"),
    ("GET", _P + r"/zones/[^/]+/machineTypes$", "compute.machineTypes.list"),
    ("GET", _P + r"/zones/[^/]+/machineTypes/[^/]+$", "compute.machineTypes.get"),
    ("GET", _P + r"/zones/[^/]+/acceleratorTypes$", "compute.acceleratorTypes.list"),
    ("GET", _P + r"/zones/[^/]+/acceleratorTypes/[^/]+$", "compute.acceleratorTypes.get"),
    ("GET", _P + r"/global/images/family/[^/]+$", "compute.images.getFromFamily"),
    ("GET", _P + r"/global/firewalls/[^/]+$", "compute.firewalls.get"),
    ("POST", _P + r"/global/firewalls$", "compute.firewalls.create"),
    ("GET", _P + r"/global/operations/[^/]+$", "compute.globalOperations.get"),
    ("POST", _P + r"/global/operations/[^/]+/wait$", "compute.globalOperations.get"),
    ("POST", _P + r"/global/networks$", "compute.networks.create"),
    ("GET", _P + r"/global/networks/[^/]+$", "compute.networks.get"),
    ("POST", _P + r"/regions/[^/]+/subnetworks$", "compute.subnetworks.create"),
    ("GET", _P + r"/regions/[^/]+/subnetworks/[^/]+$", "compute.subnetworks.get"),
    ("GET", _P + r"/aggregated/subnetworks$", "compute.subnetworks.list"),
    ("POST", _P + r"/regions/[^/]+/resourcePolicies$", "compute.resourcePolicies.create"),
    ("GET", _P + r"/regions/[^/]+/resourcePolicies/[^/]+$", "compute.resourcePolicies.get"),
    ("DELETE", _P + r"/regions/[^/]+/resourcePolicies/[^/]+$", "compute.resourcePolicies.delete"),
    ("GET", _P + r"/regions/[^/]+/operations/[^/]+$", "compute.regionOperations.get"),
    ("POST", _P + r"/regions/[^/]+/operations/[^/]+/wait$", "compute.regionOperations.get"),
)


def needed(method: str, path: str, body: dict[str, Any] | None) -> list[str]:
    """The permissions one request needs (unknown requests: `compute.UNKNOWN`, so a test notices)."""
    first = next((perm for m, pattern, perm in ROUTES if m == method and re.match(pattern, path)), None)
    if first is None:
        return [f"compute.UNKNOWN {method} {path}"]
    perms = [first]
    if first == "compute.firewalls.create":
        perms.append("compute.networks.updatePolicy")
    if first == "compute.instances.create" and body is not None:
        perms += ["compute.disks.create", "compute.subnetworks.use", "compute.images.useReadOnly"]
        for key, perm in (("metadata", "compute.instances.setMetadata"), ("labels", "compute.instances.setLabels"),
                          ("tags", "compute.instances.setTags"),
                          ("serviceAccounts", "compute.instances.setServiceAccount"),
                          ("resourcePolicies", "compute.resourcePolicies.use")):
            if body.get(key):
                perms.append(perm)
        if body.get("serviceAccounts"):
            perms.append("iam.serviceAccounts.actAs")
        if any(nic.get("accessConfigs") for nic in body.get("networkInterfaces") or []):
            perms.append("compute.subnetworks.useExternalIp")
        if any((d.get("initializeParams") or {}).get("labels") for d in body.get("disks") or []):
            perms.append("compute.disks.setLabels")
    return perms
