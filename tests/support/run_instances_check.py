"""Check what a provider sends to RunInstances against EC2's documented rules that moto does not enforce.

moto accepts a zone id in `Placement.AvailabilityZone` only to refuse it with a message of its own, accepts any
ClientToken (no length check, no idempotency), and answers from regions the account has not enabled. A test that
passes because of that proves nothing, so the tests register `RunInstancesCheck` on the provider's launch client
(`before-call.ec2.RunInstances`, which sees the serialised parameters before moto does) and it refuses, like EC2:

- a zone that is not one of this account's zone NAMES in the region (DescribeAvailabilityZones ZoneName):
  https://docs.aws.amazon.com/AWSEC2/latest/APIReference/API_Placement.html ("AvailabilityZone: The Availability
  Zone of the instance"; ids go in AvailabilityZoneId) and
  https://docs.aws.amazon.com/global-infrastructure/latest/regions/az-ids.html (names are per account);
- a ClientToken longer than 64 ASCII characters, and a token reused with different parameters
  (IdempotentParameterMismatch): https://docs.aws.amazon.com/ec2/latest/devguide/ec2-api-idempotency.html.

Each refusal raises AssertionError in the test (it is a bug in gpuplan, not a cloud condition).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass
class RunInstancesCheck:
    """Register with `attach(client, zone_names)`; `calls` keeps every checked call's parameters."""

    zone_names: frozenset[str]
    calls: list[dict[str, str]] = field(default_factory=list)
    tokens: dict[str, dict[str, str]] = field(default_factory=dict)

    def before_call(self, params: dict[str, Any], **_: Any) -> None:
        body = params.get("body")
        flat = {k: str(v) for k, v in body.items()} if isinstance(body, dict) else {}
        self.calls.append(flat)
        zone = flat.get("Placement.AvailabilityZone")
        assert zone is None or zone in self.zone_names, \
            f"RunInstances Placement.AvailabilityZone={zone!r} is not a zone name of this account: " \
            f"{sorted(self.zone_names)}"
        token = flat.get("ClientToken", "")
        assert token and len(token) <= 64 and token.isascii(), f"ClientToken {token!r}: 1-64 ASCII characters"
        same = {k: v for k, v in flat.items() if k != "ClientToken"}
        earlier = self.tokens.setdefault(token, same)
        assert earlier == same, f"ClientToken {token!r} reused for a different request (IdempotentParameterMismatch)"


def attach(client: Any, *, zone_names: frozenset[str] | None = None) -> RunInstancesCheck:
    """Check every RunInstances of `client` (the provider's launch client); zone names default to what
    DescribeAvailabilityZones answers in the client's region."""
    if zone_names is None:
        zones = client.describe_availability_zones()["AvailabilityZones"]
        zone_names = frozenset(z["ZoneName"] for z in zones)
    check = RunInstancesCheck(zone_names)
    client.meta.events.register_first("before-call.ec2.RunInstances", check.before_call)
    return check
