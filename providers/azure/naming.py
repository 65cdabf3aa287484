"""Names and tags of the Azure resources one run makes, and the quota family of a VM size.

Every run gets its own resource group, `gpuplan-<run id>` (see providers/azure/network.py for why), holding its
virtual network, network security group, public IPs, NICs, disks and VMs; the names inside it are fixed, so a
retried launch finds what an earlier attempt made instead of making it twice.

Azure's rules kept here:
- Resource group names: 1-90 characters, alphanumerics, `_`, `-`, `.`, `(`, `)`, not ending in `.`;
  Linux VM names 1-64 characters, alphanumerics, `-`, `_`, `.`; NIC/public IP/VNet names 1-80.
  https://learn.microsoft.com/azure/azure-resource-manager/management/resource-name-rules
- Tags: at most 50 name/value pairs per resource; names at most 512 characters, values at most 256; names may not
  contain `<`, `>`, `%`, `&`, `\\`, `?`, `/`. https://learn.microsoft.com/azure/azure-resource-manager/management/tag-resources#limitations
"""

from __future__ import annotations

import re
from collections.abc import Mapping

MAX_TAGS = 50
MAX_TAG_NAME = 512
MAX_TAG_VALUE = 256
TAG_NAME_FORBIDDEN = re.compile(r"[<>%&\\?/]")
_NAME_UNSAFE = re.compile(r"[^A-Za-z0-9-]")

RG_PREFIX = "gpuplan-"
VNET = "gpuplan-vnet"
SUBNET = "nodes"
NSG = "gpuplan-nsg"
ADDRESS_SPACE = "10.64.0.0/16"
SUBNET_PREFIX = "10.64.0.0/20"
TAG_NODE_RANK = "gpuplan:node-rank"
TAG_SPOT = "gpuplan:spot"
TAG_PRICE = "gpuplan:price-per-hour"


def resource_group_name(run_id: str) -> str:
    """The run's own resource group (`gpuplan-r-0a1b2c3d`)."""
    return (RG_PREFIX + _NAME_UNSAFE.sub("-", run_id))[:90].rstrip(".")


def vm_name(run_id: str, rank: int, generation: int = 0) -> str:
    """A deterministic VM name per run, generation and node rank; also its Linux host name (64 characters)."""
    suffix = f"-{rank}" if generation == 0 else f"-g{generation}-{rank}"
    base = ("gpuplan-" + _NAME_UNSAFE.sub("-", run_id.lower())).strip("-")
    return base[: 64 - len(suffix)].rstrip("-") + suffix


def nic_name(vm: str) -> str:
    return f"{vm}-nic"


def public_ip_name(vm: str) -> str:
    return f"{vm}-ip"


def network_name(base: str, region: str) -> str:
    """One VNet and NSG per region a run's nodes use (a VNet lives in one region)."""
    return f"{base}-{region}"


def azure_tags(tags: Mapping[str, str], labels: Mapping[str, str] | None = None) -> dict[str, str]:
    """gpuplan's tags and the spec's labels as Azure tags, within Azure's limits: a label Azure would refuse (a
    forbidden character in its name) is left out rather than failing every create of the run; values are cut
    at 256 characters. gpuplan's own tags always fit and always win."""
    out: dict[str, str] = {}
    for key, value in (labels or {}).items():
        if TAG_NAME_FORBIDDEN.search(key) or not key or len(key) > MAX_TAG_NAME:
            continue
        out[key] = str(value)[:MAX_TAG_VALUE]
    out.update({k: str(v)[:MAX_TAG_VALUE] for k, v in tags.items()})
    if len(out) > MAX_TAGS:  # gpuplan's tags first, then the spec's in their order
        own = {k: out[k] for k in tags}
        rest = [(k, v) for k, v in out.items() if k not in own][: MAX_TAGS - len(own)]
        out = {**own, **dict(rest)}
    return out


# The vCPU quota family of gpuplan's GPU sizes, as Azure's Usage API and its quota errors name them
# (https://learn.microsoft.com/azure/virtual-machines/quotas; names from `az vm list-usage` output). Sizes not
# listed fall back to a name built the same way from the size's series letters and version: failover only needs
# every size of one family to map to the same word.
QUOTA_FAMILIES: dict[str, str] = {
    "NCADSA100V4": "standardNCADSA100v4Family",
    "NDASRV4": "standardNDASv4_A100Family",
    "NDAMSRV4": "standardNDAMSv4_A100Family",
    "NDISRH100V5": "standardNDSH100v5Family",
    "NDISRH200V5": "standardNDSH200v5Family",
    "NCADSH100V5": "standardNCadsH100v5Family",
    "NCCADSH100V5": "standardNCCadsH100v5Family",
    "NCASV3T4": "standardNCASv3_T4Family",
    "NVADSA10V5": "standardNVADSA10v5Family",
    "NCSV3": "standardNCSv3Family",
    "NDISRMI300XV5": "standardNDISRMI300Xv5Family",
}
_SIZE = re.compile(r"^Standard_([A-Z]+)\d+([a-z]*)(?:_([A-Za-z0-9]+))?(?:_(v\d+))?$")


def quota_family(size: str | None) -> str | None:
    """`Standard_NC24ads_A100_v4` -> `standardNCADSA100v4Family`; None for None."""
    if not size:
        return None
    match = _SIZE.match(size)
    if not match:
        return size
    series, features, accel, version = match.groups()
    key = f"{series}{features}{accel or ''}{version or ''}".upper()
    return QUOTA_FAMILIES.get(key) or f"standard{series}{features.upper()}{accel or ''}{version or ''}Family"
