"""EC2's rules as gpuplan applies them: error and state mapping, client tokens, tags, addresses.

Pure functions and constants (no client calls), split from providers/aws.py so the provider class reads as the
launch/describe/terminate flow and these rules can be tested on their own.
"""

from __future__ import annotations

import datetime as dt
import ipaddress
import re
from collections.abc import Iterable, Mapping
from decimal import Decimal
from typing import Any

from gpuplan.providers.base import AuthError, CapacityError, InstanceState, ProviderError, QuotaError

# AWS's Deep Learning Base GPU AMI (NVIDIA driver, CUDA, Docker and the NVIDIA container toolkit), published as a
# public SSM parameter in every commercial region, so gpuplan never hard-codes a per-region AMI id.
DEFAULT_AMI_PARAMETER = "/aws/service/deeplearning/ami/x86_64/base-oss-nvidia-driver-gpu-ubuntu-22.04/latest/ami-id"
DEFAULT_REGION = "us-east-1"
SECURITY_GROUP_NAME = "gpuplan"
TAG_NODE_RANK = "gpuplan:node-rank"
# The price recorded at launch travels with the machine, so a run adopted after a crash is billed correctly.
TAG_PRICE = "gpuplan:price-per-hour"

# EC2 error codes -> what failover should do with them.
CAPACITY_CODES = frozenset({
    "InsufficientInstanceCapacity",
    "InsufficientHostCapacity",
    "InsufficientReservedInstanceCapacity",
    "InsufficientCapacity",
    "InsufficientFreeAddressesInSubnet",
    "Unsupported",
    "InvalidInstanceType",
    "SpotMaxPriceTooLow",
    "InsufficientSpotInstanceCapacity",
})
QUOTA_CODES = frozenset({
    "InstanceLimitExceeded",
    "MaxSpotInstanceCountExceeded",
    "VcpuLimitExceeded",
    "MaxSpotFleetRequestCountExceeded",
    "ResourceLimitExceeded",
    "PlacementGroupLimitExceeded",
})
AUTH_CODES = frozenset({
    "UnauthorizedOperation",
    "AuthFailure",
    "InvalidClientTokenId",
    "SignatureDoesNotMatch",
    "OptInRequired",
    "ExpiredToken",
    "RequestExpired",
    "Blocked",
    "PendingVerification",
    "AccessDenied",
    "AccessDeniedException",
    "UnrecognizedClientException",
})
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


def map_client_error(exc: Exception, *, region: str | None = None, zone: str | None = None) -> ProviderError:
    """A botocore error -> the typed error failover understands; the EC2 message is kept (it holds no secrets)."""
    from botocore.exceptions import ClientError, EndpointConnectionError, NoCredentialsError, PartialCredentialsError

    where = zone or region or "aws"
    if isinstance(exc, (NoCredentialsError, PartialCredentialsError)):
        return AuthError(f"AWS credentials not found ({exc}); configure them with `aws configure` or AWS_PROFILE",
                         code="NoCredentials", region=region, zone=zone)
    if isinstance(exc, EndpointConnectionError):
        return ProviderError(f"cannot reach AWS in {where}: {exc}", code="EndpointConnectionError", region=region,
                             zone=zone)
    if isinstance(exc, ClientError):
        error = exc.response.get("Error", {})
        code = str(error.get("Code") or "Unknown")
        message = f"{code} in {where}: {error.get('Message') or exc}"
        if code in CAPACITY_CODES:
            return CapacityError(message, code=code, region=region, zone=zone)
        if code in QUOTA_CODES:
            return QuotaError(message, code=code, region=region, zone=zone)
        if code in AUTH_CODES:
            return AuthError(message, code=code, region=region, zone=zone)
        return ProviderError(message, code=code, region=region, zone=zone)
    return ProviderError(f"AWS call failed in {where}: {type(exc).__name__}: {exc}", region=region, zone=zone)


def client_token(run_id: str, zone: str | None, region: str, generation: int = 0) -> str:
    """The idempotency token of one launch: the run id, plus where and which relaunch (EC2 allows 64 ASCII chars).

    Same run + same zone + same generation -> same token, so a retried call after a crash returns the same
    machines on EC2; a different zone or a relaunch after a spot interruption needs a different one (EC2 rejects a
    reused token with different parameters).
    """
    token = f"{run_id}.{zone or region}.{generation}"
    return token[:64]


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


def tag_list(tags: Mapping[str, str]) -> list[dict[str, str]]:
    return [{"Key": k, "Value": v} for k, v in tags.items()]


def tag_dict(raw: Iterable[Mapping[str, str]] | None) -> dict[str, str]:
    return {t["Key"]: t["Value"] for t in raw or ()}
