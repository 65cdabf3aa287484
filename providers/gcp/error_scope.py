"""Which placements a GCE error rules out: GCE's quota and error reasons mapped by their scope (issue 32, item 4).

Why: a project-wide quota answered like one zone's stockout makes failover walk every region of GCP and end "no
capacity" while the only fix is a quota request. The reasons and their scopes:

- Quotas: "Quota 'NAME' exceeded. Limit: L globally." is a project-wide (global) quota: GPUS_ALL_REGIONS, which every
  new project has at 0 ("GPUs (all regions)", https://cloud.google.com/compute/resource-usage#gpu_quota: "you must also
  request ... GPUS_ALL_REGIONS"; the message as gcloud and the API print it: fastai/course-v3#165), or
  CPUS_ALL_REGIONS. No region of GCP can start the VM until it is raised, so it rules out GCP (Scope() covers every
  placement of the provider) and the message names the quota and the console page that raises it
  (https://cloud.google.com/docs/quotas/view-manage). "... in region R." is regional: the failover's default quota
  scope (the family in that region). SkyPilot draws the same line (sky/backends/cloud_vm_ray_backend.py, the GCP
  failover handler: GPUS_ALL_REGIONS blocks all of GCP, other quotas the region).
- Zone-level, any moment now: ZONE_RESOURCE_POOL_EXHAUSTED(_WITH_DETAILS) (a stockout,
  https://cloud.google.com/compute/docs/troubleshooting/troubleshooting-resource-availability) and
  `insufficientCapacity` (HTTP 503, https://cloud.google.com/compute/docs/troubleshooting/troubleshooting-bulk-vm-creation)
  are capacity for this type in this zone; RESOURCE_NOT_READY (a resource still changing state) and
  RESOURCE_OPERATION_RATE_EXCEEDED (too frequent operations on one resource,
  https://cloud.google.com/compute/docs/troubleshooting/troubleshoot-operation-limits) are this zone's, for any type,
  not capacity (SkyPilot blocks the zone for both).
- UNSUPPORTED_OPERATION says the request as built cannot run there (an incompatible disk and machine series, a feature
  the zone lacks: strict layer tests/support/strict_gce.py): a placement error for the exact placement, never capacity,
  so it is not counted as a stockout nor retried as one.
"""

from __future__ import annotations

import re
from urllib.parse import quote

from gpuplan.providers.base import CapacityError, PlacementError, ProviderError, QuotaError, Scope

ZONE_CAPACITY = frozenset({"ZONE_RESOURCE_POOL_EXHAUSTED", "ZONE_RESOURCE_POOL_EXHAUSTED_WITH_DETAILS",
                           "RESOURCE_POOL_EXHAUSTED", "insufficientCapacity"})
ZONE_BUSY = frozenset({"RESOURCE_NOT_READY", "RESOURCE_OPERATION_RATE_EXCEEDED"})
NOT_CAPACITY = frozenset({"UNSUPPORTED_OPERATION"})
QUOTA_CONSOLE = "https://console.cloud.google.com/iam-admin/quotas"
_QUOTA = re.compile(r"Quota '([A-Za-z0-9_]+)' exceeded\.\s*Limit:\s*([0-9.]+)\s+(globally|in region ([a-z0-9-]+))")


def quota_link(name: str, project: str | None) -> str:
    """The console page listing this quota (Compute Engine's metric names are the quota's, lower-cased)."""
    metric = quote(f"compute.googleapis.com/{name.lower()}", safe="")
    where = f"project={quote(project)}&" if project else ""
    return f"{QUOTA_CONSOLE}?{where}metric={metric}"


def scoped_error(code: str, message: str, *, zone: str | None, region: str | None,
                 project: str | None = None) -> ProviderError | None:
    """The typed error for a GCE reason by its scope (module docstring), None when this module does not know it."""
    quota = _QUOTA.search(message)
    if quota and quota.group(3) == "globally":
        name, limit = quota.group(1), quota.group(2)
        return QuotaError(f"GCP project-wide quota {name} is {limit} (\"{message.strip()}\"): no GCP region can start "
                          f"this until it is raised; request more at {quota_link(name, project)}",
                          scope=Scope(), code=name, zone=zone, region=region)
    if quota:
        return QuotaError(f"{code} in {zone or region}: {message}", code=code, zone=zone, region=region)
    where = zone or region or "gcp"
    if code in ZONE_CAPACITY:
        return CapacityError(f"{code} in {where}: {message}", code=code, zone=zone, region=region)
    if code in ZONE_BUSY:
        return PlacementError(f"{code} in {where}: {message}", scope=Scope(region=region, zone=zone), code=code,
                              zone=zone, region=region)
    if code in NOT_CAPACITY:
        return PlacementError(f"{code} in {where}: {message}", code=code, zone=zone, region=region)
    return None
