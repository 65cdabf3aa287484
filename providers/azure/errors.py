"""Azure's error codes mapped to the provider errors failover acts on, each with the Scope it rules out.

Where the codes come from (Azure Resource Manager answers `{"error": {"code", "message"}}`, synchronously on the PUT
or as the failed status of its long-running operation):

- `SkuNotAvailable` (HTTP 409 on the VM's PUT): "The requested VM size for resource ... is currently not available
  in location 'eastus' zones '...'" — the size is restricted for this subscription in this region (or zone), or
  has no capacity there. https://learn.microsoft.com/azure/azure-resource-manager/troubleshooting/error-sku-not-available
  -> CapacityError for this size in this zone (or region when no zone was asked).
- `AllocationFailed` / `ZonalAllocationFailed` (the operation's failed status): "Allocation failed. We do not have
  sufficient capacity for the requested VM size in this region/zone."
  https://learn.microsoft.com/troubleshoot/azure/virtual-machines/allocation-failure -> CapacityError (zone for the
  zonal one, the region's size otherwise).
- `OperationNotAllowed` naming a quota (HTTP 409): "Operation could not be completed as it results in exceeding
  approved <family> Cores quota" — vCPU quotas are per region at two tiers, the VM family and the Total Regional
  vCPUs, and Spot VMs count against the separate Low-priority vCPUs quota.
  https://learn.microsoft.com/azure/virtual-machines/quotas,
  https://learn.microsoft.com/azure/azure-resource-manager/troubleshooting/error-resource-quota,
  https://learn.microsoft.com/azure/virtual-machines/spot-vms#quota
  -> QuotaError: the family in the region and market; the whole region's market for the regional/low-priority one.
- `AuthorizationFailed` (403), `InvalidAuthenticationToken*` (401), `SubscriptionNotFound`: the identity is refused
  everywhere -> AuthError. https://learn.microsoft.com/azure/azure-resource-manager/troubleshooting/error-register-resource-provider
  (`MissingSubscriptionRegistration`, the Microsoft.Compute provider not registered: also the user's to fix).
- `OverconstrainedAllocationRequest` / `OverconstrainedZonalAllocationRequest`: the size exists but not with the
  constraints asked (zone, accelerated networking): CapacityError like the allocation failures (same page).
"""

from __future__ import annotations

import re

from gpuplan.providers.base import (
    AuthError,
    CapacityError,
    PlacementError,
    ProviderError,
    QuotaError,
    Scope,
)

CAPACITY_CODES = frozenset({"SkuNotAvailable", "AllocationFailed", "ZonalAllocationFailed",
                            "OverconstrainedAllocationRequest", "OverconstrainedZonalAllocationRequest"})
ZONAL_CODES = frozenset({"ZonalAllocationFailed", "OverconstrainedZonalAllocationRequest"})
AUTH_CODES = frozenset({"AuthorizationFailed", "InvalidAuthenticationToken", "InvalidAuthenticationTokenTenant",
                        "ExpiredAuthenticationToken", "AuthenticationFailed", "SubscriptionNotFound",
                        "MissingSubscriptionRegistration", "LinkedAuthorizationFailed"})
QUOTA_CODES = frozenset({"OperationNotAllowed", "QuotaExceeded"})
# "... exceeding approved standardNCADSA100v4Family Cores quota", "... approved Total Regional Cores quota",
# "... approved LowPriorityCores quota" (the quota's name is the part before " Cores quota" / " quota").
_QUOTA_NAME = re.compile(r"exceeding approved (.+?) (?:Cores |vCPUs )?quota", re.IGNORECASE)
_LOW_PRIORITY = ("lowpriority", "low-priority", "low priority")


def quota_name(message: str) -> str | None:
    """The quota an `OperationNotAllowed` message names (`standardNCADSA100v4Family`, `Total Regional`,
    `LowPriorityCores`), or None when the message is about something else than a quota."""
    match = _QUOTA_NAME.search(message or "")
    return match.group(1).strip() if match else None


def map_error(code: str | None, message: str, *, region: str, zone: str | None, instance_type: str | None,
              family: str | None, spot: bool) -> ProviderError:
    """The typed error for one ARM error (`code`, `message`) on a VM create at this placement."""
    code = code or "Unknown"
    text = f"{code}: {message}".strip()
    if code in CAPACITY_CODES:
        zonal = code in ZONAL_CODES or (code == "SkuNotAvailable" and zone is not None)
        return CapacityError(text, code=code, zone=zone, region=region,
                             scope=Scope(region=region, zone=zone if zonal else None, instance_type=instance_type))
    if code in QUOTA_CODES:
        name = quota_name(message)
        if name is not None:
            lowered = name.lower().replace(" ", "")
            if any(word.replace(" ", "") in lowered for word in _LOW_PRIORITY):
                scope = Scope(region=region, spot=True)  # every Spot VM of the region counts against it
            elif lowered.startswith("totalregional"):
                scope = Scope(region=region, spot=False)
            else:
                scope = Scope(region=region, family=family, spot=spot)
            return QuotaError(text, code=code, zone=zone, region=region, scope=scope)
        return ProviderError(text, code=code, zone=zone, region=region)
    if code in AUTH_CODES:
        return AuthError(text, code=code, zone=zone, region=region)
    if code in ("InvalidParameter", "BadRequest", "InvalidRequestFormat", "PropertyChangeNotAllowed"):
        return ProviderError(text, code=code, zone=zone, region=region)
    if code == "LocationNotAvailableForResourceType" or code == "NoRegisteredProviderFound":
        return PlacementError(text, code=code, zone=zone, region=region, scope=Scope(region=region))
    return ProviderError(text, code=code, zone=zone, region=region)


def error_of(exc: BaseException) -> tuple[str | None, str, int | None]:
    """(code, message, HTTP status) of an azure-core HttpResponseError (or anything else: (None, str, None)).

    azure-core parses ARM's `{"error": {"code", "message"}}` body into `exc.error` (ODataV4Format), both on a
    synchronous error and on a long-running operation whose status came back Failed."""
    status = getattr(getattr(exc, "response", None), "status_code", None) or getattr(exc, "status_code", None)
    error = getattr(exc, "error", None)
    code = getattr(error, "code", None)
    message = getattr(error, "message", None) or getattr(exc, "message", None) or str(exc)
    return code, str(message).splitlines()[0] if message else "", status


def from_exception(exc: BaseException, *, region: str, zone: str | None = None, instance_type: str | None = None,
                   family: str | None = None, spot: bool = False) -> ProviderError:
    """`map_error` for an SDK exception; a connection failure is a ProviderError naming the endpoint's problem."""
    if isinstance(exc, ProviderError):
        return exc
    code, message, status = error_of(exc)
    if code is None and status in (401, 403):
        return AuthError(f"Azure refused the credentials (HTTP {status}): {message}", code=str(status),
                         region=region, zone=zone)
    if code is None:
        return ProviderError(f"Azure request failed: {type(exc).__name__}: {message}", region=region, zone=zone)
    return map_error(code, message, region=region, zone=zone, instance_type=instance_type, family=family, spot=spot)
