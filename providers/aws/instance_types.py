"""What EC2 says about an instance type (DescribeInstanceTypes): its CPU architectures and whether it has EFA.

Both decide how a machine is launched: the AMI must match the type's architecture (gpuplan.providers.aws.image)
and a multi-node run on an EFA type gets an EFA interface (gpuplan.providers.aws.network).
Fields: `ProcessorInfo.SupportedArchitectures` (https://docs.aws.amazon.com/AWSEC2/latest/APIReference/API_ProcessorInfo.html)
and `NetworkInfo.EfaSupported` / `EfaInfo.MaximumEfaInterfaces` / `MaximumNetworkCards` /
`NetworkCards[].InterfaceTypes`
(https://docs.aws.amazon.com/AWSEC2/latest/APIReference/API_NetworkInfo.html,
https://docs.aws.amazon.com/AWSEC2/latest/APIReference/API_NetworkCardInfo.html).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from gpuplan.providers.aws.rules import map_client_error


@dataclass(frozen=True)
class TypeInfo:
    """The facts gpuplan launches by, for one instance type in one region."""

    instance_type: str
    architectures: tuple[str, ...]  # e.g. ("x86_64",), ("arm64",)
    efa_supported: bool = False
    max_efa_interfaces: int = 0
    network_cards: int = 1  # NetworkInfo.MaximumNetworkCards
    efa_only_cards: tuple[int, ...] = ()  # the cards whose InterfaceTypes include `efa-only`

    @property
    def architecture(self) -> str:
        """The architecture gpuplan boots it with: x86_64 when the type supports it, else its first one."""
        if "x86_64" in self.architectures or not self.architectures:
            return "x86_64"
        return self.architectures[0]


def describe_type(ec2: Any, instance_type: str, region: str) -> TypeInfo:
    """One DescribeInstanceTypes call; an unknown type is EC2's own error (mapped: failover blocks the type)."""
    try:
        found = ec2.describe_instance_types(InstanceTypes=[instance_type]).get("InstanceTypes", [])
    except Exception as exc:
        raise map_client_error(exc, region=region) from exc
    if not found:
        return TypeInfo(instance_type, ())
    raw = found[0]
    network = raw.get("NetworkInfo") or {}
    return TypeInfo(
        instance_type=instance_type,
        architectures=tuple((raw.get("ProcessorInfo") or {}).get("SupportedArchitectures") or ()),
        efa_supported=bool(network.get("EfaSupported")),
        max_efa_interfaces=int((network.get("EfaInfo") or {}).get("MaximumEfaInterfaces") or 0),
        network_cards=int(network.get("MaximumNetworkCards") or 1),
        efa_only_cards=tuple(int(c.get("NetworkCardIndex") or 0) for c in network.get("NetworkCards") or ()
                             if "efa-only" in (c.get("InterfaceTypes") or ())),
    )
