"""EC2's rules as gpuplan applies them: error mapping (with the scope each error rules out), states, tags, addresses.

Pure functions and constants (no client calls, except map_region_error, which asks DescribeRegions once through
AccountRegions when a credential error needs the region's opt-in status), split from the provider so the provider
class reads as the launch/describe/terminate flow and these rules can be tested on their own. ClientTokens are
gpuplan.providers.aws.launch_call's.
"""

from __future__ import annotations

import datetime as dt
import ipaddress
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from gpuplan.providers.aws.zones import OPT_IN_REGION, AccountRegions, instance_family
from gpuplan.providers.base import (
    AuthError,
    CapacityError,
    InstanceState,
    LaunchRequest,
    PlacementError,
    ProviderError,
    QuotaError,
    Scope,
)

# AWS's Deep Learning Base GPU AMI (NVIDIA driver, CUDA, Docker and the NVIDIA container toolkit), published as a
# public SSM parameter in every commercial region, so gpuplan never hard-codes a per-region AMI id.
DEFAULT_AMI_PARAMETER = "/aws/service/deeplearning/ami/x86_64/base-oss-nvidia-driver-gpu-ubuntu-22.04/latest/ami-id"
DEFAULT_REGION = "us-east-1"
SECURITY_GROUP_NAME = "gpuplan"
TAG_NODE_RANK = "gpuplan:node-rank"
# The price recorded at launch travels with the machine, so a run adopted after a crash is billed correctly.
TAG_PRICE = "gpuplan:price-per-hour"

# EC2 error codes -> what failover should do with them, with the scope each one rules out. The codes and their
# meanings are from "Error codes for the Amazon EC2 API"
# (https://docs.aws.amazon.com/AWSEC2/latest/APIReference/errors-overview.html); the scopes are gpuplan's reading:
# Capacity: this instance type in this zone ("There is not enough capacity ... try launching an instance by
# selecting different instance types", and Unsupported: "an Availability Zone that currently has constraints on
# that instance type").
CAPACITY_CODES = frozenset({
    "InsufficientInstanceCapacity",
    "InsufficientHostCapacity",
    "InsufficientReservedInstanceCapacity",
    "InsufficientCapacity",
    "InsufficientSpotInstanceCapacity",
    "UnfulfillableCapacity",
    "SpotMaxPriceTooLow",
    "Unsupported",
})
# Quota: the instance family's vCPU quota in this region and market (https://aws.amazon.com/ec2/faqs/: "each
# defines the amount of capacity you can use of a given instance family", "set on a per-region basis").
QUOTA_CODES = frozenset({
    "InstanceLimitExceeded",
    "MaxSpotInstanceCountExceeded",
    "VcpuLimitExceeded",
})
# The zone, any type: its subnet is full or missing, or the zone is not one this account can launch into
# ("InvalidZone.NotFound: The specified Availability Zone does not exist, or is not available for you to use").
ZONE_CODES = frozenset({
    "InsufficientFreeAddressesInSubnet",
    "InvalidZone.NotFound",
    "InvalidAvailabilityZone",
    "NoSubnet",  # gpuplan's own: no default subnet in the zone
    "InvalidInput",  # "No default subnet for availability zone" (as moto answers; no documented code)
})
# This request as built for this region and type: a parameter the type or its AMI refuses ("InvalidParameterValue:
# A value specified in a parameter is not valid, is unsupported, or cannot be used"; an AMI/type architecture
# mismatch comes back as one). The next type or region is built anew, with its own AMI.
REGION_TYPE_CODES = frozenset({
    "InvalidParameterValue",
    "InvalidParameterCombination",
    "UnsupportedOperation",
    "InvalidInstanceType",
    "IdempotentInstanceTerminated",  # see launch_call.client_token: a new attempt gets a new token
})
# The whole region: AMI ids are regional ("ensure that you specify the AWS Region in which the AMI is located"),
# no default VPC ("VPCIdNotSpecified: You have no default VPC"), OptInRequired ("You are not authorized to use the
# requested service ... your account might take some time to be activated": a service or region not activated for
# this account; when it is account-wide every region refuses it fast, and failover's attempt cap bounds the cost).
REGION_CODES = frozenset({
    "VPCIdNotSpecified",
    "MissingInput",
    "InvalidSubnetID.NotFound",
    "OptInRequired",
    "ParameterNotFound",  # the AMI's SSM parameter is not published in this region
    "PlacementGroupLimitExceeded",
})
# Credentials refused. In a region the account had to enable (OptInStatus opted-in or not-opted-in) AuthFailure
# means the region refuses them, not that they are bad: a disabled region answers AuthFailure, and so does an
# enabled opt-in region to version 1 STS session tokens ("New AWS Regions ... are not enabled by default and only
# accept the updated version of session tokens", https://repost.aws/knowledge-center/iam-validate-access-credentials).
# In a default region they are bad credentials: every region will refuse them.
CREDENTIAL_CODES = frozenset({
    "AuthFailure",
    "InvalidClientTokenId",
    "SignatureDoesNotMatch",
    "ExpiredToken",
    "RequestExpired",
    "UnrecognizedClientException",
})
# The identity may not do this anywhere (IAM policy, a blocked or unverified account): stop and tell the user.
AUTH_CODES = frozenset({
    "UnauthorizedOperation",
    "Blocked",
    "PendingVerification",
    "AccessDenied",
    "AccessDeniedException",
}) | CREDENTIAL_CODES
NOT_FOUND_CODES = frozenset({"InvalidInstanceID.NotFound", "InvalidInstanceID.Malformed"})

SPOT_INTERRUPTION_REASON = "Server.SpotInstanceTermination"
LIVE_EC2_STATES = ("pending", "running", "stopping", "stopped")
ENDED_EC2_STATES = ("shutting-down", "terminated")  # listed by EC2 for about an hour after termination

STATE_MAP = {
    "pending": InstanceState.PENDING,
    "running": InstanceState.RUNNING,
    "stopping": InstanceState.STOPPING,
    "stopped": InstanceState.STOPPING,
    "shutting-down": InstanceState.STOPPING,
    "terminated": InstanceState.TERMINATED,
}


def map_state(ec2_state: str, reason_code: str | None) -> str:
    """EC2 state name + StateReason code -> a provider-neutral InstanceState.

    A spot interruption is PREEMPTED from the moment EC2 starts shutting the machine down, so the watch loop can
    plan the relaunch while the old machine is still going away.
    """
    if reason_code == SPOT_INTERRUPTION_REASON and ec2_state in ("shutting-down", "terminated", "stopping",
                                                                 "stopped"):
        return InstanceState.PREEMPTED
    return STATE_MAP.get(ec2_state, InstanceState.UNKNOWN)


@dataclass(frozen=True)
class Where:
    """The placement a call was for: what an error's scope is built from. `opt_in` is the region's OptInStatus
    (DescribeRegions; None: unknown), asked only when a credential error needs it."""

    region: str | None = None
    zone: str | None = None
    instance_type: str | None = None
    spot: bool | None = None
    opt_in: str | None = None


def error_scope(code: str, message: str, w: Where) -> tuple[type[PlacementError], Scope] | None:
    """Which placements an EC2 error code rules out (see the code tables above), or None: not a placement error."""
    if code in CAPACITY_CODES:
        return CapacityError, Scope(region=w.region, zone=w.zone, instance_type=w.instance_type, spot=w.spot)
    if code in QUOTA_CODES:
        return QuotaError, Scope(region=w.region, family=instance_family(w.instance_type), spot=w.spot)
    if code == "InvalidParameterValue" and "iam instance profile" in message.lower():
        # The profile, not the placement: still unknown to EC2 after launch_call's wait, so no placement will do.
        return None
    if code in ZONE_CODES or (code == "InvalidParameterValue" and "availability zone" in message.lower()):
        return PlacementError, Scope(region=w.region, zone=w.zone)
    if code in REGION_TYPE_CODES:
        return PlacementError, Scope(region=w.region, zone=w.zone if code == "IdempotentInstanceTerminated" else None,
                                     instance_type=w.instance_type)
    if code in REGION_CODES or code.startswith("InvalidAMIID."):
        return PlacementError, Scope(region=w.region)
    if code in CREDENTIAL_CODES and w.opt_in in OPT_IN_REGION:
        return PlacementError, Scope(region=w.region)
    return None


def map_client_error(exc: Exception, *, region: str | None = None, zone: str | None = None,
                     where: Where | None = None) -> ProviderError:
    """A botocore error -> the typed error failover understands; the EC2 message is kept (it holds no secrets).

    With `where` (a launch-path call: its region, zone, type, market and the region's opt-in status) an error a
    later placement may not share becomes a PlacementError carrying the scope it rules out (`error_scope`).
    """
    from botocore.exceptions import ClientError, EndpointConnectionError, NoCredentialsError, PartialCredentialsError

    if where is not None:
        region, zone = where.region, where.zone
    where_text = zone or region or "aws"
    if isinstance(exc, (NoCredentialsError, PartialCredentialsError)):
        return AuthError(f"AWS credentials not found ({exc}); configure them with `aws configure` or AWS_PROFILE",
                         code="NoCredentials", region=region, zone=zone)
    if isinstance(exc, EndpointConnectionError):
        return ProviderError(f"cannot reach AWS in {where_text}: {exc}", code="EndpointConnectionError",
                             region=region, zone=zone)
    if isinstance(exc, ClientError):
        error = exc.response.get("Error", {})
        code = str(error.get("Code") or "Unknown")
        text = str(error.get("Message") or exc)
        message = f"{code} in {where_text}: {text}"
        scoped = error_scope(code, text, where or Where(region=region, zone=zone))
        if scoped is not None:
            kind, scope = scoped
            return kind(message, scope=scope, code=code, region=region, zone=zone)
        if code in AUTH_CODES:
            return AuthError(message, code=code, region=region, zone=zone)
        return ProviderError(message, code=code, region=region, zone=zone)
    return ProviderError(f"AWS call failed in {where_text}: {type(exc).__name__}: {exc}", region=region, zone=zone)


def single_address_cidr(address: str) -> str:
    """`203.0.113.7` or `203.0.113.7/32` -> `203.0.113.7/32`; anything wider is refused (SSH from one address)."""
    try:
        network = ipaddress.ip_network(address.strip(), strict=True)
    except ValueError as exc:
        raise ProviderError(f"not an IP address for SSH access: {address!r}", code="BadSshCidr") from exc
    if network.num_addresses != 1:
        raise ProviderError(f"SSH access is only opened to a single address, not {network}", code="BadSshCidr")
    return str(network)


def caller_address(timeout: float = 5.0) -> str:
    """The caller's public IPv4 address as AWS sees it (checkip.amazonaws.com); used only when SSH is asked for."""
    import urllib.request

    with urllib.request.urlopen("https://checkip.amazonaws.com", timeout=timeout) as response:
        return str(response.read().decode().strip())


TRANSITION_TIME = re.compile(r"\((\d{4}-\d\d-\d\d \d\d:\d\d:\d\d) (?:GMT|UTC)\)")


def ended_at(raw: Mapping[str, Any]) -> dt.datetime:
    """When an ended instance stopped being billed: EC2 states it in StateTransitionReason, e.g.
    `User initiated (2024-05-01 12:00:00 GMT)`; when it does not, now (the moment gpuplan saw it gone)."""
    match = TRANSITION_TIME.search(str(raw.get("StateTransitionReason") or ""))
    if match:
        return dt.datetime.strptime(match.group(1), "%Y-%m-%d %H:%M:%S").replace(tzinfo=dt.timezone.utc)
    return dt.datetime.now(dt.timezone.utc)


def decimal(text: str | None) -> Decimal | None:
    try:
        return Decimal(text) if text else None
    except ArithmeticError:
        return None


def map_region_error(exc: Exception, where: Where, regions: AccountRegions) -> ProviderError:
    """map_client_error with the region's OptInStatus, asked (once, cached) only for a credential error:
    AuthFailure in a region the account had to enable blocks that region; in a default region it is bad
    credentials (see CREDENTIAL_CODES). When DescribeRegions itself fails the status stays unknown: AuthError."""
    response = getattr(exc, "response", None)
    code = response.get("Error", {}).get("Code") if isinstance(response, dict) else None
    if code in CREDENTIAL_CODES and where.region:
        try:
            status = regions.status() or {}
        except Exception:
            status = {}
        where = Where(where.region, where.zone, where.instance_type, where.spot, status.get(where.region))
    return map_client_error(exc, where=where)


def run_tags(request: LaunchRequest) -> dict[str, str]:
    """The tags of every resource a run gets (instances, volumes, placement group, secrets): the spec's labels,
    then gpuplan's own, which win a clash. The spec refused labels EC2 would refuse (gpuplan.jobs.spec: at most
    43, key <= 128, value <= 256, no aws: prefix; https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/Using_Tags.html#tag-restrictions)."""
    return {**{str(k): str(v) for k, v in (request.labels or {}).items()}, **request.tags()}


def tag_list(tags: Mapping[str, str]) -> list[dict[str, str]]:
    return [{"Key": k, "Value": v} for k, v in tags.items()]


def tag_dict(raw: Iterable[Mapping[str, str]] | None) -> dict[str, str]:
    return {t["Key"]: t["Value"] for t in raw or ()}
