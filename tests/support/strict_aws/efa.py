"""Rule 15 of the strict layer: RunInstances' NetworkInterfaces as EC2 checks them for EFA and network cards (moto
stores whatever it is sent). Always on: every account refuses these.

- The primary interface is network card 0, device 0, and may not be EFA-only ("You can't use an EFA-only network
  interface as the primary network interface", https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/efa-acc-inst-types.html).
- NetworkCardIndex must be one of the type's cards, and its InterfaceType one that card lists
  (DescribeInstanceTypes NetworkInfo.MaximumNetworkCards / NetworkCards[].InterfaceTypes,
  https://docs.aws.amazon.com/AWSEC2/latest/APIReference/API_NetworkCardInfo.html); at most
  EfaInfo.MaximumEfaInterfaces EFA devices (https://docs.aws.amazon.com/AWSEC2/latest/APIReference/API_EfaInfo.html);
  one interface per (card, device).
- AssociatePublicIpAddress: "You cannot specify more than one network interface in the request"
  (https://docs.aws.amazon.com/AWSEC2/latest/APIReference/API_InstanceNetworkInterfaceSpecification.html); EFA-only
  interfaces have no IP address and are not counted (the P5 page's use case 1 keeps automatic public IP assignment
  with 31 EFA-only interfaces). Message observed: "The associatePublicIPAddress parameter cannot be specified when
  launching with multiple network interfaces." (hashicorp/terraform-provider-aws#10043).
The other messages are not documented; they are made up in EC2's InvalidParameterValue shape.
"""

from __future__ import annotations

import re
from typing import Any

from .wire import Reply, ec2_error

_NIC = re.compile(r"^NetworkInterface\.(\d+)\.(\w+)$")


def interfaces_of(params: dict[str, str]) -> list[dict[str, str]]:
    """The request's NetworkInterface.N.* fields, one dict per interface, in N order."""
    found: dict[int, dict[str, str]] = {}
    for key, value in params.items():
        match = _NIC.match(key)
        if match:
            found.setdefault(int(match.group(1)), {})[match.group(2)] = value
    return [found[n] for n in sorted(found)]


def efa_devices(params: dict[str, str]) -> int:
    """EFA devices (efa and efa-only interfaces) a RunInstances request gives each instance."""
    return sum(1 for nic in interfaces_of(params) if nic.get("InterfaceType") in ("efa", "efa-only"))


def check_network_interfaces(params: dict[str, str], type_info: dict[str, Any] | None) -> Reply | None:
    nics = interfaces_of(params)
    if not nics:
        return None
    network = (type_info or {}).get("NetworkInfo") or {}
    cards = {int(c.get("NetworkCardIndex", 0)): set(c.get("InterfaceTypes") or ())
             for c in network.get("NetworkCards") or []}
    max_cards = int(network.get("MaximumNetworkCards") or 1)
    max_efa = int((network.get("EfaInfo") or {}).get("MaximumEfaInterfaces") or 0)
    seen: set[tuple[int, int]] = set()
    for nic in nics:
        card, device = int(nic.get("NetworkCardIndex", 0)), int(nic.get("DeviceIndex", 0))
        kind = nic.get("InterfaceType", "interface")
        if (card, device) in seen:
            return ec2_error("InvalidParameterValue", f"Network card {card} device index {device} is given twice.")
        seen.add((card, device))
        if (card, device) == (0, 0) and kind == "efa-only":
            return ec2_error("InvalidParameterValue", "An EFA-only network interface cannot be the primary network "
                             "interface (network card index 0, device index 0).")
        if card >= max_cards:
            return ec2_error("InvalidParameterValue", f"Network card index {card} is not valid: the instance type has "
                             f"{max_cards} network card(s).")
        if kind in ("efa", "efa-only") and cards and kind not in cards.get(card, set()):
            return ec2_error("InvalidParameterValue", f"Interface type {kind} is not supported on network card "
                             f"{card} of this instance type.")
    if (0, 0) not in seen:
        return ec2_error("InvalidParameterValue", "The primary network interface (network card index 0, device "
                         "index 0) is missing.")
    if efa_devices(params) > max_efa:
        return ec2_error("InvalidParameterValue", f"{efa_devices(params)} EFA interfaces requested; this instance type "
                         f"supports at most {max_efa}.")
    with_ip = [nic for nic in nics if nic.get("InterfaceType") != "efa-only"]
    if len(with_ip) > 1 and any(nic.get("AssociatePublicIpAddress") == "true" for nic in nics):
        return ec2_error("InvalidParameterCombination", "The associatePublicIPAddress parameter cannot be specified "
                         "when launching with multiple network interfaces.")
    return None
