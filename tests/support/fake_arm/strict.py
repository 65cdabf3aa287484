"""The strict layer of the fake ARM: documented Azure rules the plain mechanics do not keep, each with its source,
each switchable (`StrictArmRules`) so a test can show the plain fake accepting what the rule refuses.

- `tags`: at most 50 tag name/value pairs per resource or resource group; names at most 512 characters, values
  at most 256; names may not contain `<`, `>`, `%`, `&`, `\\`, `?`, `/`.
  https://learn.microsoft.com/azure/azure-resource-manager/management/tag-resources#limitations
  Errors: HTTP 400 `InvalidTagNameCharacters` ("The tag names '...' have reserved characters '<,>,%,&,\\,?,/' or
  control characters.", observed: hashicorp/terraform-provider-azurerm#2920); for the count and lengths the code
  was not found in Azure's docs: ours are `InvalidTag` / `TagCountExceeded` (made up, same shape).
- `custom_data`: `osProfile.customData` is base64 whose decoded size is at most 65,535 bytes
  (https://learn.microsoft.com/azure/virtual-machines/custom-data); Azure answers HTTP 400 `InvalidParameter`,
  target `customData`, "Custom data in OSProfile must be in Base64 encoding and with a maximum length of 87380
  characters." (observed: Azure/aks-engine#1663, Azure/acs-engine#4149).
- `immutable`: a PUT of an existing VM may not change `customData` or `zones`: HTTP 409 `PropertyChangeNotAllowed`
  "Changing property 'customData' is not allowed." (https://learn.microsoft.com/azure/virtual-machines/custom-data:
  "custom data ... can't be updated after VM creation"; the code: Azure/azure-cli#13457).
- `quota` (per (region, family) limits, `quotas`): vCPUs are limited per region at two tiers, the VM family and
  Total Regional vCPUs, and Spot VMs count against the separate low-priority quota; a create beyond a limit is
  HTTP 409 `OperationNotAllowed` "Operation could not be completed as it results in exceeding approved <quota>
  Cores quota. Additional details - Deployment Model: Resource Manager, Location: <region>, Current Limit: L,
  Current Usage: U, Additional Required: N, (Minimum) New Limit Required: M. ..."
  (https://learn.microsoft.com/azure/virtual-machines/quotas; https://learn.microsoft.com/azure/azure-resource-manager/troubleshooting/error-resource-quota;
  spot: https://learn.microsoft.com/azure/virtual-machines/spot-vms#quota). Deallocated VMs count too.
- `spot`: `evictionPolicy` and `billingProfile` are for Spot VMs only, and a Spot VM needs an eviction policy
  (Deallocate or Delete) and a max price of -1 or a positive number of USD per hour.
  https://learn.microsoft.com/azure/virtual-machines/spot-vms; the error shape is InvalidParameter (made-up text).
- `in_use`: a NIC attached to a VM cannot be deleted (HTTP 400 `NicInUse`,
  https://learn.microsoft.com/azure/virtual-network/virtual-network-network-interface#delete-a-network-interface), nor
  a public IP a NIC uses (HTTP 400 `PublicIPAddressInUse`,
  https://learn.microsoft.com/azure/virtual-network/ip-services/remove-public-ip-address-vm): teardown has to go
  VM first, or delete the whole resource group.
- `group_deleting`: a PUT into a resource group being deleted is HTTP 409 `ResourceGroupBeingDeleted`
  (https://learn.microsoft.com/azure/azure-resource-manager/troubleshooting/common-deployment-errors).
- `private_ips`: a NIC's private address comes from its subnet's range, whose first four addresses and last one
  Azure reserves (https://learn.microsoft.com/azure/virtual-network/virtual-networks-faq#are-there-any-restrictions-on-using-ip-addresses-within-these-subnets).
  Dynamic allocation: "Azure assigns the next available unassigned or unreserved IP address in the subnet's
  address range" when the NIC is created (10.64.0.4 for a run's first NIC), and the NIC keeps it until it is
  deleted, moved to another subnet or switched to static; Static: the address asked for, if it is in the subnet,
  not reserved and not another NIC's (HTTP 400 `PrivateIPAddressNotInSubnet`, `PrivateIPAddressInReservedRange`,
  `PrivateIPAddressInUse`: the codes Azure answers, messages ours).
  https://learn.microsoft.com/azure/virtual-network/ip-services/private-ip-addresses
  (https://learn.microsoft.com/training/modules/configure-virtual-networks/8-associate-private-ip-addresses).
  Off: every NIC takes the next address of one counter across all subnets (the plain fake).
- Capacity (`SkuNotAvailable` 409 at PUT; `AllocationFailed` / `ZonalAllocationFailed` as the operation's failed
  status, the VM left in provisioningState Failed) are injected by tests (`ArmState.fail_vm_create`): the sources
  are in providers/azure/errors.py.
"""

from __future__ import annotations

import base64
import binascii
import ipaddress
import re
from dataclasses import dataclass, field

from support.fake_arm.model import ArmError, ArmState, Json

MAX_TAGS = 50
FORBIDDEN = re.compile(r"[<>%&\\?/]")
MAX_CUSTOM_DATA = 87380  # base64 characters of 65,535 bytes, as Azure's message says

# vCPUs of the sizes the tests use (https://learn.microsoft.com/azure/virtual-machines/sizes/overview).
VCPUS = {
    "Standard_NC4as_T4_v3": 4, "Standard_NC8as_T4_v3": 8, "Standard_NC24ads_A100_v4": 24,
    "Standard_NC48ads_A100_v4": 48, "Standard_NC96ads_A100_v4": 96, "Standard_ND96asr_v4": 96,
    "Standard_ND96amsr_A100_v4": 96, "Standard_NC40ads_H100_v5": 40, "Standard_ND96isr_H100_v5": 96,
    "Standard_NV36ads_A10_v5": 36, "Standard_NC6s_v3": 6,
}
LOW_PRIORITY = "LowPriorityCores"
TOTAL_REGIONAL = "Total Regional"


@dataclass
class StrictArmRules:
    tags: bool = True
    custom_data: bool = True
    immutable: bool = True
    spot: bool = True
    in_use: bool = True
    group_deleting: bool = True
    private_ips: bool = True
    # (region, quota name) -> vCPU limit; quota names: a family (`standardNCADSA100v4Family`), TOTAL_REGIONAL,
    # LOW_PRIORITY. Unset: unlimited.
    quotas: dict[tuple[str, str], int] = field(default_factory=dict)
    family_of: dict[str, str] = field(default_factory=dict)  # size -> quota family name (tests set what they use)


def check_tags(rules: StrictArmRules, body: Json) -> None:
    if not rules.tags:
        return
    tags = body.get("tags") or {}
    if len(tags) > MAX_TAGS:
        raise ArmError(400, "TagCountExceeded", f"The resource has {len(tags)} tags; at most {MAX_TAGS} are allowed.")
    bad = [k for k in tags if FORBIDDEN.search(k)]
    if bad:
        raise ArmError(400, "InvalidTagNameCharacters", f"The tag names '{','.join(bad)}' have reserved characters "
                       "'<,>,%,&,\\,?,/' or control characters.")
    for key, value in tags.items():
        if len(key) > 512 or len(str(value)) > 256:
            raise ArmError(400, "InvalidTag", f"Tag name '{key[:40]}' or its value is too long (names at most 512 "
                           "characters, values at most 256).")


def check_vm(rules: StrictArmRules, state: ArmState, existing: Json | None, body: Json) -> None:
    props = body.get("properties") or {}
    custom = (props.get("osProfile") or {}).get("customData")
    if rules.custom_data and custom is not None:
        try:
            base64.b64decode(custom, validate=True)
            valid = len(custom) <= MAX_CUSTOM_DATA
        except (binascii.Error, ValueError):
            valid = False
        if not valid:
            raise ArmError(400, "InvalidParameter", "Custom data in OSProfile must be in Base64 encoding and with a "
                           "maximum length of 87380 characters.", target="customData")
    if rules.immutable and existing is not None:
        old_custom = existing["properties"].get("osProfile", {}).get("customData")
        if custom is not None and old_custom is not None and custom != old_custom:
            raise ArmError(409, "PropertyChangeNotAllowed", "Changing property 'customData' is not allowed.",
                           target="customData")
        if (body.get("zones") or []) != (existing.get("zones") or []):
            raise ArmError(409, "PropertyChangeNotAllowed", "Changing property 'zones' is not allowed.",
                           target="zones")
    spot = props.get("priority") == "Spot"
    if rules.spot:
        if spot and props.get("evictionPolicy") not in ("Deallocate", "Delete"):
            raise ArmError(400, "InvalidParameter", "A Spot VM needs evictionPolicy Deallocate or Delete.",
                           target="evictionPolicy")
        if not spot and (props.get("evictionPolicy") or props.get("billingProfile")):
            raise ArmError(400, "InvalidParameter", "evictionPolicy and billingProfile are allowed only for Spot "
                           "VMs.", target="priority")
        price = (props.get("billingProfile") or {}).get("maxPrice")
        if spot and price is not None and not (price == -1 or price > 0):
            raise ArmError(400, "InvalidParameter", "maxPrice must be -1 or greater than 0.", target="maxPrice")
    if existing is None:
        check_quota(rules, state, body)


def _usage(state: ArmState, region: str, pick: str, rules: StrictArmRules) -> int:
    total = 0
    for vm in state.vms():
        if vm["location"] != region:
            continue
        size = vm["properties"]["hardwareProfile"]["vmSize"]
        spot = vm["properties"].get("priority") == "Spot"
        if (pick == LOW_PRIORITY and spot) or (pick == TOTAL_REGIONAL and not spot) \
                or (pick == rules.family_of.get(size) and not spot):
            total += VCPUS.get(size, 0)
    return total


def check_quota(rules: StrictArmRules, state: ArmState, body: Json) -> None:
    region = body["location"]
    size = body["properties"]["hardwareProfile"]["vmSize"]
    spot = body["properties"].get("priority") == "Spot"
    wanted = VCPUS.get(size, 0)
    names = [LOW_PRIORITY] if spot else [n for n in (rules.family_of.get(size), TOTAL_REGIONAL) if n]
    for name in names:
        limit = rules.quotas.get((region, name))
        if limit is None:
            continue
        used = _usage(state, region, name, rules)
        if used + wanted > limit:
            raise ArmError(409, "OperationNotAllowed", f"Operation could not be completed as it results in exceeding "
                           f"approved {name} Cores quota. Additional details - Deployment Model: Resource Manager, "
                           f"Location: {region}, Current Limit: {limit}, Current Usage: {used}, Additional "
                           f"Required: {wanted}, (Minimum) New Limit Required: {used + wanted}. Submit a request "
                           "for Quota increase at https://aka.ms/ProdportalCRP/#blade/Microsoft_Azure_Capacity/"
                           "UsageAndQuota.ReactView/Parameters/ ... by specifying parameters listed in the "
                           "'Details' section for deployment to succeed.")


def private_ip(rules: StrictArmRules, state: ArmState, nic_id: str, subnet: Json, asked: Json,
               before: Json | None) -> str:
    """The private address of NIC `nic_id`'s IP configuration `asked` in `subnet` (`before`: the configuration's
    properties as they were, on an update)."""
    if not rules.private_ips:
        return state.next_private_ip()
    network = ipaddress.ip_network(subnet["properties"]["addressPrefix"])
    reserved = {*list(network)[:4], network[-1]}
    used = {c["properties"].get("privateIPAddress") for n in state.of_type("Microsoft.Network/networkInterfaces")
            if n["id"].lower() != nic_id.lower() for c in n["properties"].get("ipConfigurations", [])
            if c.get("properties", {}).get("subnet", {}).get("id", "").lower() == subnet["id"].lower()}
    if asked.get("privateIPAllocationMethod") == "Static":
        address = ipaddress.ip_address(asked.get("privateIPAddress") or "0.0.0.0")
        if address not in network:
            raise ArmError(400, "PrivateIPAddressNotInSubnet", f"IP configuration of {nic_id} asks for private IP "
                           f"address {address}, which is not in subnet {subnet['id']}.")
        if address in reserved:
            raise ArmError(400, "PrivateIPAddressInReservedRange", f"Private IP address {address} is in the "
                           f"reserved range of subnet {subnet['id']}.")
        if str(address) in used:
            raise ArmError(400, "PrivateIPAddressInUse", f"IP configuration of {nic_id} is using the private IP "
                           f"address {address} which is already allocated to another resource.")
        return str(address)
    kept = (before or {}).get("privateIPAddress")
    if kept and kept not in used and (before or {}).get("subnet", {}).get("id", "").lower() == subnet["id"].lower():
        return str(kept)
    for address in network.hosts():
        if address not in reserved and str(address) not in used:
            return str(address)
    raise ArmError(400, "SubnetIsFull", f"Subnet {subnet['id']} has no free private IP address.")
